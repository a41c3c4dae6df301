//===- DriverTest.cpp - File formats and the initializer ------------------===//
//
// Part of the zero-mlir project.
//
// The MPI-free parts of the training driver: .npy parsing, safetensors and
// checkpoint files (and the checksum of their manifest), atomic writes and
// their fault-injection hook, and the deterministic initializer; the
// manifest, checkpoints and data sources are the files beside it, in the
// same executable. The end-to-end behaviour is tested by the lit tests in
// test/E2E.
//
//===----------------------------------------------------------------------===//

#include "DriverTestUtil.h"

using namespace zrt;
using namespace zrt_test;

namespace {

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

TEST(NpyTest, RoundTrip) {
  NpyArray a;
  a.descr = "<f4";
  a.itemSize = 4;
  a.shape = {2, 3};
  a.data = bytesOf({1, 2, 3, 4, 5, 6});
  NpyArray b = parseNpy(writeNpy(a), "a.npy");
  EXPECT_EQ(b.descr, "<f4");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b.itemSize, 4);
  EXPECT_EQ(b.data, a.data);
  // numpy pads the header so that the data is 64-byte aligned.
  EXPECT_EQ((writeNpy(a).size() - a.data.size()) % 64, 0u);

  a.descr = "<i8";
  a.itemSize = 8;
  a.shape = {2};
  a.data = std::string(16, '\1');
  b = parseNpy(writeNpy(a), "y.npy");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(b.numel(), 2);
}

TEST(NpyTest, HeaderAsNumpyWritesIt) {
  // Exactly what numpy 1.x writes for np.zeros((3,), np.int32), and a
  // version-2.0 header with '|' and '=' byte orders.
  std::string header = "{'descr': '<i4', 'fortran_order': False, "
                       "'shape': (3,), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string v1 = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) +
                   '\0' + header + std::string(12, '\0');
  NpyArray a = parseNpy(v1, "x.npy");
  EXPECT_EQ(a.descr, "<i4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));

  std::string h2 = "{\"descr\": \"|u1\", \"fortran_order\": False, "
                   "\"shape\": (2, 2)}\n";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8) + char(h2.size()) +
                   std::string(3, '\0') + h2 + "abcd";
  a = parseNpy(v2, "u.npy");
  EXPECT_EQ(a.descr, "<u1");
  EXPECT_EQ(a.numel(), 4);
}

TEST(NpyTest, RejectsUnsupported) {
  NpyArray a;
  a.descr = "<f4";
  a.itemSize = 4;
  a.shape = {2};
  a.data = bytesOf({1, 2});
  std::string good = writeNpy(a);

  EXPECT_NE(errorOf([&] { parseNpy("not numpy", "n.npy"); }).find("magic"),
            std::string::npos);
  std::string truncated = good.substr(0, good.size() - 1);
  EXPECT_NE(errorOf([&] { parseNpy(truncated, "t.npy"); }).find("data bytes"),
            std::string::npos);

  auto withHeader = [&](const std::string &from, const std::string &to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  std::string fortran =
      withHeader("'fortran_order': False", "'fortran_order': True ");
  EXPECT_NE(errorOf([&] { parseNpy(fortran, "f.npy"); }).find("Fortran"),
            std::string::npos);
  std::string big = withHeader("<f4", ">f4");
  EXPECT_NE(errorOf([&] { parseNpy(big, "b.npy"); }).find("big-endian"),
            std::string::npos);
  std::string complex = withHeader("<f4", "<c8");
  EXPECT_NE(errorOf([&] {
              parseNpy(complex, "c.npy");
            }).find("unsupported dtype '<c8'"),
            std::string::npos);
  std::string malformed = withHeader("'shape': (2,)", "'shape': [2,]");
  EXPECT_NE(errorOf([&] { parseNpy(malformed, "m.npy"); }).find("malformed"),
            std::string::npos);
}

TEST(NpyTest, RejectsOverflowingShapes) {
  auto file = [](const std::string &shape, size_t dataBytes) {
    NpyArray a;
    a.descr = "<i8";
    a.itemSize = 8;
    a.shape = {1};
    a.data = std::string(dataBytes, '\0');
    std::string s = writeNpy(a);
    // Same header length: the shape text replaces "(1,), " and padding.
    size_t at = s.find("(1,), }");
    std::string text = shape + ", }";
    s.replace(at, text.size() > 7 ? text.size() : 7,
              text + std::string(text.size() > 7 ? 0 : 7 - text.size(), ' '));
    size_t headerLen = s.find('\n') + 1 - 10;
    s[8] = char(headerLen & 0xff);
    s[9] = char(headerLen >> 8);
    return s;
  };
  // 16 * 8 * (2^57 + 1) * 8 bytes wraps to 1024: it used to read 16 bytes
  // as a (16, 8, 2^57+1) array.
  EXPECT_EQ(errorOf([&] {
              parseNpy(file("(16, 8, 144115188075855873)", 1024), "y.npy");
            }),
            "y.npy: the .npy header's 'shape' (16, 8, 144115188075855873) "
            "has more bytes than a file can hold");
  // A 23-digit dimension used to fail inside std::stoll ("stoll").
  EXPECT_EQ(errorOf([&] {
              parseNpy(file("(12345678901234567890123,)", 8), "z.npy");
            }),
            "z.npy: the .npy header's 'shape' has a dimension "
            "12345678901234567890123 beyond 2^63");
  EXPECT_EQ(parseNpy(file("(1,)", 8), "ok.npy").numel(), 1);
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

TEST(SafetensorsTest, RoundTripAndLayout) {
  std::vector<Tensor> tensors = {
      {"w", {2, 2}, {1, 2, 3, 4}}, {"b", {2}, {5, 6}}, {"s", {}, {7}}};
  std::string bytes = writeSafetensors(tensors);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, len));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({16, 24}));
  EXPECT_EQ(bytes.size(), 8 + len + 7 * 4);

  std::vector<Tensor> back = parseSafetensors(bytes, "m.safetensors");
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].name, tensors[i].name); // file order kept
    EXPECT_EQ(back[i].shape, tensors[i].shape);
    EXPECT_EQ(back[i].data, tensors[i].data);
  }
}

TEST(SafetensorsTest, MetadataFirst) {
  std::string bytes =
      writeSafetensors({{"w", {1}, {1}}}, {{"format", "pt"}, {"step", "7"}});
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  auto header = nlohmann::ordered_json::parse(bytes.substr(8, len));
  EXPECT_EQ(header.begin().key(), "__metadata__");
  EXPECT_EQ(header["__metadata__"].dump(), R"({"format":"pt","step":"7"})");
  ASSERT_EQ(parseSafetensors(bytes, "m").size(), 1u);
}

TEST(SafetensorsTest, WidensHalfPrecision) {
  // bf16 1.0, -2.5, 2^-133 (subnormal), inf; f16 1.0, -2.5, 2^-24
  // (smallest subnormal), 65504 (largest finite).
  const uint16_t bf16[] = {0x3f80, 0xc020, 0x0001, 0x7f80};
  const uint16_t f16[] = {0x3c00, 0xc100, 0x0001, 0x7bff};
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[4],"data_offsets":[8,16]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string s(8, '\0');
  uint64_t len = header.size();
  std::memcpy(&s[0], &len, 8);
  s += header;
  s.append(reinterpret_cast<const char *>(bf16), 8);
  s.append(reinterpret_cast<const char *>(f16), 8);
  std::vector<Tensor> t = parseSafetensors(s, "half");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t[0].data[0], 1.0f);
  EXPECT_EQ(t[0].data[1], -2.5f);
  EXPECT_EQ(t[0].data[2], std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isinf(t[0].data[3]));
  EXPECT_EQ(t[1].data,
            (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24), 65504.0f}));
}

TEST(SafetensorsTest, MatchesHuggingFaceNames) {
  std::vector<WantedTensor> wanted = {
      {"transformer.wte.weight", {2, 1}},
      {"transformer.h.0.attn.c_attn.weight", {1, 3}},
      {"transformer.ln_f.bias", {1}}};
  // Base-model names, a mask buffer, a tied head and a different order.
  std::vector<Tensor> base = {{"h.0.attn.bias", {1, 1, 2, 2}, {1, 0, 1, 1}},
                              {"ln_f.bias", {1}, {5}},
                              {"h.0.attn.c_attn.weight", {1, 3}, {2, 3, 4}},
                              {"h.0.attn.masked_bias", {}, {-1e4f}},
                              {"wte.weight", {2, 1}, {6, 7}},
                              {"lm_head.weight", {2, 1}, {6, 7}}};
  std::vector<Tensor> got = matchWeights(base, wanted, "base.safetensors");
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(got[i].name, wanted[i].name);
  EXPECT_EQ(got[0].data, (std::vector<float>{6, 7}));
  EXPECT_EQ(got[1].data, (std::vector<float>{2, 3, 4}));

  // A head that is not the embedding is a parameter the program lacks.
  base.back().data = {6, 8};
  EXPECT_EQ(errorOf([&] { matchWeights(base, wanted, "f"); }),
            "f: the weights have tensor 'lm_head.weight', which is no "
            "parameter of the program");

  // The closest unused name, not the equally close one already taken (wpe).
  std::vector<Tensor> typo = {
      {"transformer.wte.weigth", {2, 1}, {0, 0}},
      {"transformer.wpe.weight", {2, 1}, {0, 0}},
      {"transformer.h.0.attn.c_attn.weight", {1, 3}, {0, 0, 0}},
      {"transformer.ln_f.bias", {1}, {0}}};
  std::vector<WantedTensor> withWpe = wanted;
  withWpe.insert(withWpe.begin() + 1, {"transformer.wpe.weight", {2, 1}});
  EXPECT_EQ(errorOf([&] { matchWeights(typo, withWpe, "t.safetensors"); }),
            "t.safetensors: the weights have no tensor "
            "'transformer.wte.weight'; closest: 'transformer.wte.weigth'");
  typo[0].name = "transformer.wte.weight";
  typo[2].shape = {3, 1};
  EXPECT_EQ(errorOf([&] { matchWeights(typo, withWpe, "t.safetensors"); }),
            "t.safetensors: tensor 'transformer.h.0.attn.c_attn.weight' has "
            "shape [3, 1], the program's parameter "
            "'transformer.h.0.attn.c_attn.weight' has shape [1, 3]");
}

TEST(SafetensorsTest, MatchesHuggingFaceLlamaNames) {
  std::vector<WantedTensor> wanted = {
      {"model.embed_tokens.weight", {2, 1}},
      {"model.layers.0.self_attn.q_proj.weight", {1, 1}},
      {"model.norm.weight", {1}}};
  // Rotary buffers of older and newer files and a tied head saved anyway.
  std::vector<Tensor> file = {
      {"model.layers.0.self_attn.rotary_emb.inv_freq", {1}, {1}},
      {"model.rotary_emb.inv_freq", {1}, {1}},
      {"model.norm.weight", {1}, {5}},
      {"model.layers.0.self_attn.q_proj.weight", {1, 1}, {3}},
      {"model.embed_tokens.weight", {2, 1}, {6, 7}},
      {"lm_head.weight", {2, 1}, {6, 7}}};
  std::vector<Tensor> got = matchWeights(file, wanted, "llama.safetensors");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data, (std::vector<float>{6, 7}));
  EXPECT_EQ(got[1].data, (std::vector<float>{3}));
  EXPECT_EQ(got[2].data, (std::vector<float>{5}));

  // An untied head is a parameter the tied program lacks.
  file.back().data = {6, 8};
  EXPECT_EQ(errorOf([&] { matchWeights(file, wanted, "f"); }),
            "f: the weights have tensor 'lm_head.weight', which is no "
            "parameter of the program");
}

TEST(SafetensorsTest, SkipsMaskBuffersUnread) {
  // A bool mask beside an F32 weight, base-model names.
  std::string header =
      R"({"h.0.attn.bias":{"dtype":"BOOL","shape":[1,1,2,2],"data_offsets":[0,4]},)"
      R"("h.0.ln_1.bias":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  std::string s(8, '\0');
  uint64_t len = header.size();
  std::memcpy(&s[0], &len, 8);
  float v = 0.5f;
  s += header + std::string("\1\0\1\1", 4);
  s.append(reinterpret_cast<const char *>(&v), 4);
  std::string dir = tempDir();
  writeFileAtomic(dir + "/mask.safetensors", s);
  WeightFiles files(dir + "/mask.safetensors",
                    {{"transformer.h.0.ln_1.bias", {1}}}, {});
  float got = 0;
  files.read(0, 0, 1, &got);
  EXPECT_EQ(got, 0.5f);
  EXPECT_EQ(files.dataBytesRead(), 4u);
  std::system(("rm -rf " + dir).c_str());
  // Without the skip the dtype is refused.
  EXPECT_NE(errorOf([&] { parseSafetensors(s, "mask"); }).find("dtype BOOL"),
            std::string::npos);
}

TEST(WeightFilesTest, ReadsOnlyTheRangesAsked) {
  std::string dir = tempDir();
  std::vector<Tensor> tensors = {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}},
                                 {"b", {4}, {7, 8, 9, 10}, ZRT_BF16}};
  writeFileAtomic(dir + "/w.safetensors", writeSafetensors(tensors));
  WeightFiles files(dir + "/w.safetensors", {{"b", {4}}, {"a", {2, 3}}}, {});
  std::vector<float> out(3);
  files.read(1, 2, 5, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 5}));
  files.read(0, 1, 3, out.data());
  EXPECT_EQ(out[0], 8.0f);
  EXPECT_EQ(out[1], 9.0f);
  EXPECT_EQ(files.dataBytesRead(), 3u * 4 + 2u * 2);
  EXPECT_EQ(files.totalBytes(), readFile(dir + "/w.safetensors").size());
  // A name tied to a wanted parameter is left unread.
  std::vector<Tensor> tied = {{"e", {2}, {1, 2}},
                              {"lm_head.weight", {2}, {3, 4}}};
  writeFileAtomic(dir + "/t.safetensors", writeSafetensors(tied));
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/t.safetensors", {{"e", {2}}}, {});
            }),
            dir + "/t.safetensors: the weights have tensor 'lm_head.weight', "
                  "which is no parameter of the program");
  WeightFiles t(dir + "/t.safetensors", {{"e", {2}}}, {"lm_head.weight"});
  EXPECT_EQ(t.dataBytesRead(), 0u);
  std::system(("rm -rf " + dir).c_str());
}

TEST(WeightFilesTest, ModelTensorsThatAreNoParameter) {
  std::string dir = tempDir();
  // A buffer the step holds as constants and an unused BF16 tensor.
  manifest::HfModel hf;
  hf.buffers.emplace().push_back({"s", {2}, {0.5, 0.75}});
  hf.unused.emplace().push_back("pooler");
  std::vector<Tensor> tensors = {{"w", {2}, {1, 2}},
                                 {"s", {2}, {0.5f, 0.75f}},
                                 {"pooler", {3}, {1.5f, -2, 3}, ZRT_BF16}};
  writeFileAtomic(dir + "/w.safetensors", writeSafetensors(tensors));
  WeightFiles files(dir + "/w.safetensors", {{"w", {2}}}, {}, &hf);
  std::vector<Tensor> carried = files.readUnused();
  ASSERT_EQ(carried.size(), 1u);
  EXPECT_EQ(carried[0].name, "pooler");
  EXPECT_EQ(carried[0].data, (std::vector<float>{1.5f, -2, 3}));
  EXPECT_EQ(carried[0].dtype, ZRT_BF16);
  // Exported: the buffer's values and the unused tensor in its dtype, the
  // same bytes as the file's.
  std::vector<Tensor> out = {tensors[0]};
  EXPECT_TRUE(appendUntrained(hf, carried, out).empty());
  EXPECT_EQ(writeSafetensors(out), writeSafetensors(tensors));
  EXPECT_EQ(appendUntrained(hf, {}, out), std::vector<std::string>{"pooler"});
  // Without the model's record both are no parameter.
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/w.safetensors", {{"w", {2}}}, {});
            }),
            dir + "/w.safetensors: the weights have tensor 's', which is no "
                  "parameter of the program");
  // A buffer of other values (or shape) trains another model.
  tensors[1].data[1] = 0.8f;
  writeFileAtomic(dir + "/w.safetensors", writeSafetensors(tensors));
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/w.safetensors", {{"w", {2}}}, {}, &hf);
            }),
            dir + "/w.safetensors: buffer 's' holds 0.800000012 at element "
                  "1, but the compiled step was traced with 0.75 there and "
                  "holds it as a constant; import the model from these "
                  "weights (zero-import --hf) and compile it again");
  tensors[1] = {"s", {1, 2}, {0.5f, 0.75f}};
  writeFileAtomic(dir + "/w.safetensors", writeSafetensors(tensors));
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/w.safetensors", {{"w", {2}}}, {}, &hf);
            }),
            dir + "/w.safetensors: buffer 's' has shape [1, 2]; the compiled "
                  "step holds it as a constant of shape [2]");
  std::system(("rm -rf " + dir).c_str());
}

TEST(WeightFilesTest, FusedExpertsFromPerExpertTensors) {
  // Two experts of gate [1, 2] and up [1, 2] (Mixtral's w1 and w3) make
  // gate_up_proj [2, 2, 2], expert by expert; down_proj [2, 2, 1] from
  // the Qwen-MoE families' down_proj, one in BF16.
  std::string dir = tempDir();
  std::string p = "m.layers.0.mlp.experts.";
  std::vector<Tensor> tensors = {
      {p + "1.w3.weight", {1, 2}, {7, 8}},
      {p + "0.w1.weight", {1, 2}, {1, 2}},
      {p + "0.w3.weight", {1, 2}, {3, 4}},
      {p + "1.w1.weight", {1, 2}, {5, 6}},
      {"other", {1}, {9}},
      {p + "0.down_proj.weight", {2, 1}, {10, 11}},
      {p + "1.down_proj.weight", {2, 1}, {12, 13}, ZRT_BF16}};
  writeFileAtomic(dir + "/w.safetensors", writeSafetensors(tensors));
  std::vector<WantedTensor> wanted = {{p + "down_proj", {2, 2, 1}},
                                      {"other", {1}},
                                      {p + "gate_up_proj", {2, 2, 2}}};
  WeightFiles files(dir + "/w.safetensors", wanted, {});
  std::vector<float> out(8);
  files.read(2, 0, 8, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  // A range across parts reads only its elements.
  uint64_t before = files.dataBytesRead();
  files.read(2, 3, 6, out.data());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 3),
            (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(files.dataBytesRead() - before, 3u * 4);
  files.read(0, 1, 4, out.data());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 3),
            (std::vector<float>{11, 12, 13}));
  files.read(1, 0, 1, out.data());
  EXPECT_EQ(out[0], 9.0f);
  // An expert missing leaves the fused name missing; a part of another
  // shape is named.
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/w.safetensors",
                          {{p + "gate_up_proj", {3, 2, 2}}}, {});
            })
                .rfind(dir + "/w.safetensors: the weights have no tensor '" +
                           p + "gate_up_proj'",
                       0),
            0u);
  EXPECT_EQ(errorOf([&] {
              WeightFiles(dir + "/w.safetensors",
                          {{p + "gate_up_proj", {2, 4, 1}}}, {});
            }),
            dir + "/w.safetensors: tensor '" + p +
                "0.w1.weight' has shape [1, 2]; the program's parameter '" + p +
                "gate_up_proj' [2, 4, 1] takes 2 of [2, 1] per expert");
  std::system(("rm -rf " + dir).c_str());
}

TEST(WeightFilesTest, HuggingFaceDirectoryAsSavePretrained) {
  EXPECT_EQ(parseShardSize("50GB", "s"), 50000000000);
  EXPECT_EQ(parseShardSize("100KB", "s"), 100000);
  EXPECT_EQ(parseShardSize("1.5mb", "s"), 1500000);
  EXPECT_EQ(parseShardSize("4096", "s"), 4096);
  EXPECT_EQ(errorOf([] { parseShardSize("5XB", "--max-shard-size"); }),
            "--max-shard-size '5XB': expected a size in bytes, or with a "
            "unit KB, MB, GB or TB (as save_pretrained's max_shard_size)");
  std::string dir = tempDir();
  // 16, 40 and 16 bytes with shards of 32: the 40 alone in a shard placed
  // where it is met, then [16, 16], as huggingface_hub splits.
  std::vector<Tensor> tensors = {{"x", {4}, {1, 2, 3, 4}},
                                 {"y", {10}, std::vector<float>(10, 1.0f)},
                                 {"z", {4}, {5, 6, 7, 8}}};
  EXPECT_EQ(writeHfDirectory(dir, "{}\n", tensors, 32, {{"format", "pt"}}), 2);
  EXPECT_EQ(readFile(dir + "/config.json"), "{}\n");
  nlohmann::json index =
      nlohmann::json::parse(readFile(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 72);
  EXPECT_EQ(index["metadata"]["total_parameters"], 18);
  EXPECT_EQ(index["weight_map"]["x"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["y"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["z"], "model-00002-of-00002.safetensors");
  // Read back through the index; then one file replaces the shards.
  WeightFiles sharded(dir, {{"z", {4}}, {"y", {10}}, {"x", {4}}}, {});
  float v = 0;
  sharded.read(0, 3, 4, &v);
  EXPECT_EQ(v, 8.0f);
  EXPECT_EQ(sharded.fileCount(), 2u);
  EXPECT_EQ(writeHfDirectory(dir, "{}\n", tensors, 1000, {}), 1);
  std::vector<std::string> names = listDir(dir);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(errorOf([&] { WeightFiles(dir + "/none", {}, {}); }),
            "cannot open '" + dir + "/none': No such file or directory");
  std::system(("rm -rf " + dir).c_str());
}

TEST(SafetensorsTest, EditDistance) {
  EXPECT_EQ(editDistance("", "abc"), 3u);
  EXPECT_EQ(editDistance("weight", "weigth"), 1u); // adjacent swap
  EXPECT_EQ(editDistance("wte", "wpe"), 1u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
}

/// A safetensors file: the header's length, the header and `dataBytes`
/// zero bytes of data.
std::string safetensorsFile(const std::string &header, size_t dataBytes) {
  std::string s(8, '\0');
  uint64_t len = header.size();
  std::memcpy(&s[0], &len, 8);
  return s + header + std::string(dataBytes, '\0');
}

TEST(SafetensorsTest, RejectsBadFiles) {
  auto error = [&](const std::string &header, size_t dataBytes,
                   const std::string &name) {
    return errorOf(
        [&] { parseSafetensors(safetensorsFile(header, dataBytes), name); });
  };
  std::string withMeta = safetensorsFile(
      R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      4);
  EXPECT_EQ(parseSafetensors(withMeta, "ok").size(), 1u);
  EXPECT_EQ(
      error(R"({"x":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16,
            "h.safetensors"),
      "h.safetensors: tensor 'x' has dtype I64; only F32, BF16 and F16 are "
      "supported");
  EXPECT_NE(error(R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})",
                  4, "b")
                .find("the shape needs 6"),
            std::string::npos);
  EXPECT_NE(
      error(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "o")
          .find("outside the data section"),
      std::string::npos);
  EXPECT_NE(
      error(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "s")
          .find("the shape needs 12"),
      std::string::npos);
  EXPECT_NE(error("{oops", 0, "j").find("malformed"), std::string::npos);
  EXPECT_NE(errorOf([&] {
              parseSafetensors(std::string(4, '\0'), "short");
            }).find("shorter than 8"),
            std::string::npos);
}

TEST(SafetensorsTest, StrictToTheFormat) {
  auto error = [&](const std::string &header, size_t dataBytes) {
    return errorOf(
        [&] { parseSafetensors(safetensorsFile(header, dataBytes), "w"); });
  };
  // Overlapping data_offsets used to be read twice.
  EXPECT_EQ(error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12),
            "w: tensors 'a' (data_offsets [0, 8]) and 'b' ([4, 12]) overlap");
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
      "w: bytes [0, 4) of the data section belong to no tensor (the format "
      "allows no holes)");
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
      "w: the data section has 8 bytes, the tensors end at byte 4");
  // A shape of [8.9, 16] used to be read as [8, 16].
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[8.9,16],"data_offsets":[0,512]}})",
            512),
      "w: tensor 'a': shape has an entry 8.9 that is not an integer");
  // 1e300 used to be reported as "negative".
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[1e300],"data_offsets":[0,4]}})", 4),
      "w: tensor 'a': shape has an entry 1e+300 that is not an integer");
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
      "w: tensor 'a': shape has a negative entry -1");
  // An overflowing shape used to end in vector::_M_default_append.
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
            R"("data_offsets":[0,4]}})",
            4),
      "w: tensor 'a': shape [4294967296,4294967296] has more elements than a "
      "file can hold");
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[4611686018427387904],)"
            R"("data_offsets":[0,0]}})",
            0),
      "w: tensor 'a': data_offsets span 0 bytes, the shape needs more than "
      "2^64");
  // Duplicate names used to keep the last one.
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            8),
      "w: the safetensors header has the key 'a' twice in one object (names "
      "and fields must be unique)");
  EXPECT_EQ(error(R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],)"
                  R"("data_offsets":[0,4]}})",
                  4),
            "w: the safetensors header has the key 'dtype' twice in one object "
            "(names and fields must be unique)");
  EXPECT_EQ(error(R"({"a":{"dtype":"F32","shape":[1]}})", 4),
            "w: tensor 'a' lacks \"data_offsets\"");
  EXPECT_EQ(
      error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0.5,4]}})", 4),
      "w: tensor 'a': data_offsets has an entry 0.5 that is not an integer");
  EXPECT_EQ(error(R"({"a":[1]})", 0), "w: tensor 'a' is not a JSON object");
}

//===----------------------------------------------------------------------===//
// Checksums, atomic writes, checkpoint files
//===----------------------------------------------------------------------===//

TEST(ChecksumTest, Crc32MatchesZlib) {
  EXPECT_EQ(crc32("123456789", 9), 0xcbf43926u);
  EXPECT_EQ(crc32("", 0), 0u);
  // Incremental equals one pass.
  EXPECT_EQ(crc32("6789", 4, crc32("12345", 5)), 0xcbf43926u);
}

TEST(AtomicWriteTest, ReplacesWithoutLeftovers) {
  std::string dir = tempDir();
  std::string path = dir + "/f.bin";
  writeFileAtomic(path, "first");
  EXPECT_EQ(readFile(path), "first");
  writeFileAtomic(path, std::string("sec\0nd", 6));
  EXPECT_EQ(readFile(path), std::string("sec\0nd", 6));
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"f.bin"});
  EXPECT_NE(errorOf([&] {
              writeFileAtomic(dir + "/no/such/f", "x");
            }).find("cannot create"),
            std::string::npos);
  makeDirs(dir + "/a/b/c");
  writeFileAtomic(dir + "/a/b/c/g", "y");
  EXPECT_EQ(readFile(dir + "/a/b/c/g"), "y");
  std::system(("rm -rf " + dir).c_str());
}

TEST(AtomicWriteTest, InterruptedBeforeRenameKeepsTheOldFile) {
  // The hook runs where a crash would leave the new data in a temporary
  // only: the old file must be intact (what --inject-kill-during-save
  // relies on).
  std::string dir = tempDir();
  std::string path = dir + "/latest";
  writeFileAtomic(path, "step_2\n");
  std::string seen;
  setBeforeRenameHook([&](const std::string &p) {
    seen = p;
    throw std::runtime_error("crash");
  });
  EXPECT_EQ(errorOf([&] { writeFileAtomic(path, "step_4\n"); }), "crash");
  setBeforeRenameHook(nullptr);
  EXPECT_EQ(seen, path);
  EXPECT_EQ(readFile(path), "step_2\n");
  std::vector<std::string> names = listDir(dir);
  ASSERT_EQ(names.size(), 2u);
  std::string tmp = names[0] == "latest" ? names[1] : names[0];
  EXPECT_EQ(tmp.rfind("latest.tmp.", 0), 0u);
  EXPECT_EQ(readFile(dir + "/" + tmp), "step_4\n");
  // Without the hook the next write goes through.
  writeFileAtomic(path, "step_4\n");
  EXPECT_EQ(readFile(path), "step_4\n");
  std::system(("rm -rf " + dir).c_str());
}

TEST(CheckpointManifestTest, EverySingleBitFlipIsCaught) {
  nlohmann::json m = {
      {"format", 2},
      {"schedule_hash", "0x00000000000000ff"},
      {"world_size", 2},
      {"stage", 3},
      {"step", 10},
      {"files",
       {{{"rank", 0}, {"file", "rank_0.bin"}, {"bytes", 1234}, {"crc32", 7}},
        {{"rank", 1}, {"file", "rank_1.bin"}, {"bytes", 1234}, {"crc32", 9}}}}};
  std::string text = sealManifest(m);
  EXPECT_NE(text.find("\"manifest_crc32\""), std::string::npos);
  EXPECT_EQ(openManifest(text, "ck"), m);
  // Sealing is idempotent and independent of key order.
  EXPECT_EQ(sealManifest(openManifest(text, "ck")), text);
  for (size_t i = 0; i < text.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = text;
      bad[i] = char(bad[i] ^ (1 << bit));
      // Refused: invalid JSON, or valid JSON failing the checksum. (No
      // single flip turns JSON whitespace, ' ' and '\n' here, into other
      // JSON whitespace.)
      std::string err = errorOf([&] { openManifest(bad, "ck"); });
      EXPECT_EQ(err.rfind("ck", 0), 0u)
          << "flip of bit " << bit << " at " << i << " ('" << text[i]
          << "'): " << (err.empty() ? "went unnoticed" : err);
    }
  // A format-1 manifest (no checksum) and a missing checksum.
  EXPECT_NE(errorOf([&] {
              openManifest(R"({"format": 1, "step": 3})", "ck");
            }).find("ck has format 1, this runtime reads formats 2 and 3"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              openManifest(R"({"format": 2, "step": 3})", "ck");
            }).find("has no manifest_crc32 checksum"),
            std::string::npos);
  EXPECT_NE(
      errorOf([&] { openManifest("[1, 2]", "ck"); }).find("not a JSON object"),
      std::string::npos);
}

TEST(CheckpointFileTest, RoundTripAndCorruption) {
  CheckpointFile f{R"({"step":3})", std::string("\0\1\2\3payload", 11)};
  std::string bytes = packCheckpoint(f);
  CheckpointFile back = unpackCheckpoint(bytes, "r.bin");
  EXPECT_EQ(back.header, f.header);
  EXPECT_EQ(back.payload, f.payload);

  std::string flipped = bytes;
  flipped[20] ^= 1;
  EXPECT_NE(errorOf([&] {
              unpackCheckpoint(flipped, "r.bin");
            }).find("checksum mismatch"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              unpackCheckpoint(bytes.substr(0, 10), "r.bin");
            }).find("truncated"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              unpackCheckpoint(bytes.substr(0, bytes.size() - 1), "r.bin");
            }).find("checksum"),
            std::string::npos);
}

TEST(CheckpointFileTest, Int8SectionAbsmaxBlocks) {
  // An 8-bit state's section is its buffer: ceil(n / 2048) fp32 absmaxes,
  // then n codes. The reader finds the absmaxes from the size alone.
  for (int64_t n : {int64_t(1), int64_t(2047), int64_t(2048), int64_t(2049),
                    int64_t(4096), int64_t(53760), int64_t(1) << 30}) {
    int64_t blocks = (n + 2047) / 2048;
    EXPECT_EQ(absmaxBlocks(n + 4 * blocks), blocks) << n << " elements";
    EXPECT_EQ(optimizers::stateBufferBytes(optimizers::Kind::AdamW,
                                           optimizers::StatePrecision::Int8,
                                           kExpAvg, n),
              n + 4 * blocks);
  }
  EXPECT_EQ(absmaxBlocks(0), 0);
}

//===----------------------------------------------------------------------===//
// Initializer
//===----------------------------------------------------------------------===//

TEST(InitTest, DeterministicAndIndependentOfOrder) {
  ParamInfo p;
  p.init = InitKind::Normal;
  p.std = 0.02;
  // A value depends on (seed, parameter, element) only.
  float a = initValue(p, 1234, 3, 1000);
  for (int i = 0; i < 100; ++i)
    initValue(p, 1234, 3, uint64_t(i));
  EXPECT_EQ(initValue(p, 1234, 3, 1000), a);
  EXPECT_NE(initValue(p, 1235, 3, 1000), a);
  EXPECT_NE(initValue(p, 1234, 4, 1000), a);
  EXPECT_NE(initValue(p, 1234, 3, 1001), a);
  // Scaled by std.
  EXPECT_FLOAT_EQ(float(0.02 * counterNormal(1234, 3, 1000)), a);

  p.init = InitKind::Zeros;
  EXPECT_EQ(initValue(p, 1, 0, 7), 0.0f);
  p.init = InitKind::Ones;
  EXPECT_EQ(initValue(p, 1, 0, 7), 1.0f);
}

TEST(InitTest, StandardNormal) {
  const int n = 200000;
  double sum = 0, sq = 0, fourth = 0;
  int beyond3 = 0;
  for (int i = 0; i < n; ++i) {
    double x = counterNormal(42, 0, uint64_t(i));
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += x * x;
    fourth += x * x * x * x;
    beyond3 += std::abs(x) > 3;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.015);
  EXPECT_NEAR(fourth / n, 3.0, 0.1); // Gaussian kurtosis
  EXPECT_NEAR(double(beyond3) / n, 0.0027, 0.001);
}

} // namespace
