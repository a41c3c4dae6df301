//===- DriverTest.cpp - File formats, initializer, manifest ---------------===//
//
// Part of the zero-mlir project.
//
// The MPI-free parts of the training driver: .npy parsing, safetensors and
// checkpoint files (and the checksum of their manifest), atomic writes and
// their fault-injection hook, the deterministic initializer and the
// manifest's layout arithmetic. The end-to-end behaviour is tested by the
// lit tests in test/E2E.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Format.h"
#include "Checkpoint/Rank.h"
#include "Checkpoint/Reader.h"
#include "Data/DataSource.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "Driver/State.h"
#include "Program/Manifest.h"
#include "Support/Types.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

using namespace zrt;

namespace {

/// Runs fn and returns the message it threw ("" if it did not).
template <typename Fn>
std::string errorOf(const Fn &fn) {
  try {
    fn();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

/// A fresh directory under the test's temporary directory.
std::string tempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/zrt-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::runtime_error("mkdtemp failed");
  return buf.data();
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.')
      names.push_back(e->d_name);
  closedir(d);
  return names;
}

std::string bytesOf(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}

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

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

nlohmann::json tinyManifest(int stage, int world) {
  // One partition of 10 elements: shards of 3 leave rank 3 a single one.
  // fp32 parameters are their own masters: no master buffer.
  int64_t shard = stage == 0 ? 10 : 3, full = 10;
  auto n = [&](bool isFull) { return isFull ? full : shard; };
  return {
      {"version", ZRT_PROGRAM_VERSION},
      {"stage", stage},
      {"world_size", world},
      {"accumulation_steps", 1},
      {"global_batch", 4},
      {"hash", "0x00000000000000ff"},
      {"precision",
       {{"kind", "fp32"},
        {"initial_scale_power", 16},
        {"loss_scale_window", 1000},
        {"hysteresis", 2},
        {"min_loss_scale", 1.0}}},
      {"optimizer",
       {{"kind", "adamw"},
        {"lr", 1e-3},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"eps", 1e-8},
        {"weight_decay", 0.0}}},
      {"gradient_clipping", 0.0},
      {"inputs",
       {{{"shape", {4, 2}}, {"dtype", "f32"}, {"offset", 0}},
        {{"shape", {4}}, {"dtype", "i64"}, {"offset", 32}}}},
      {"params",
       {{{"name", "w"},
         {"shape", {2, 4}},
         {"numel", 8},
         {"init", "normal"},
         {"std", 0.1},
         {"partition", 0},
         {"offset", 0}},
        {{"name", "b"},
         {"shape", {2}},
         {"numel", 2},
         {"init", "zeros"},
         {"partition", 0},
         {"offset", 8}}}},
      {"partitions",
       {{{"name", "flat"},
         {"numel", 10},
         {"padded_numel", stage == 0 ? 10 : 12},
         {"shard_numel", shard},
         {"compute_dtype", "f32"},
         {"params", {"w", "b"}},
         {"buffers",
          {{"params", 0},
           {"grads", 64},
           {"exp_avg", 192},
           {"exp_avg_sq", 256}}},
         {"buffer_numel",
          {{"params", n(stage <= 2)},
           {"grads", n(stage <= 1)},
           {"exp_avg", n(stage == 0)},
           {"exp_avg_sq", n(stage == 0)}}}}}},
      {"plan",
       {{"persistent_bytes", 320}, {"arena_bytes", 64}, {"peak_bytes", 384}}},
  };
}

TEST(ManifestTest, ParsesAndSplitsUnevenly) {
  Manifest m = Manifest::parse(tinyManifest(2, 4).dump());
  EXPECT_EQ(m.stage, 2);
  EXPECT_EQ(m.hash, 0xffu);
  EXPECT_EQ(m.optimizer, manifest::OptimizerKind::AdamW);
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[1].init, InitKind::Zeros);
  EXPECT_EQ(m.inputs[1].elementBytes(), 8);
  const PartitionInfo &p = m.partitions[0];
  EXPECT_TRUE(p.paramsAreMasters);
  EXPECT_FALSE(p.hasBuffer(kMaster));
  EXPECT_EQ(p.offsets[kMaster], -1);
  EXPECT_EQ(p.counts[kMaster], 0);
  EXPECT_EQ(p.offsets[kExpAvg], 192);
  int64_t expect[4][2] = {{0, 3}, {3, 6}, {6, 9}, {9, 10}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(m.owned(p, r).begin, expect[r][0]);
    EXPECT_EQ(m.owned(p, r).end, expect[r][1]);
  }
  Manifest m0 = Manifest::parse(tinyManifest(0, 4).dump());
  EXPECT_EQ(m0.owned(m0.partitions[0], 3).size(), 10);
}

/// tinyManifest(2, 4) with expert parallelism 2: its partition of experts
/// sharded over the 2 ranks holding the same experts (shards of 5).
nlohmann::json expertManifest() {
  nlohmann::json j = tinyManifest(2, 4);
  j["expert_parallel"] = 2;
  for (nlohmann::json &param : j["params"])
    param["expert_parallel"] = 2;
  nlohmann::json &part = j["partitions"][0];
  part["expert"] = true;
  part["padded_numel"] = 10;
  part["shard_numel"] = 5;
  for (const char *kind : {"grads", "exp_avg", "exp_avg_sq"})
    part["buffer_numel"][kind] = 5;
  return j;
}

TEST(ManifestTest, ShardsExpertPartitionsOverExpertReplicas) {
  Manifest m = Manifest::parse(expertManifest().dump());
  const PartitionInfo &p = m.partitions[0];
  ASSERT_TRUE(p.expert);
  EXPECT_EQ(m.params[0].expertParallel, 2);
  EXPECT_EQ(m.shardGroupSize(p), 2);
  EXPECT_EQ(m.shardGroupSize(), 4);
  // Ranks 0 and 1 hold experts of members 0 and 1 (their expert set);
  // ranks 0 and 2 hold the same experts, shards 0 and 1 of them.
  int64_t expect[4][2] = {{0, 5}, {0, 5}, {5, 10}, {5, 10}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(m.owned(p, r).begin, expect[r][0]) << "rank " << r;
    EXPECT_EQ(m.owned(p, r).end, expect[r][1]) << "rank " << r;
    EXPECT_EQ(m.expertMember(r), r % 2);
  }
  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json j = expertManifest();
  j["params"][1]["expert_parallel"] = 4;
  EXPECT_NE(error(j).find("holds experts split over 4 ranks"),
            std::string::npos);
  j = expertManifest();
  j["topology"] = {{"ranks_per_node", 4}, {"mics_shard_size", 2}};
  EXPECT_NE(error(j).find("with MiCS or hpZ"), std::string::npos);
}

TEST(ManifestTest, RejectsInconsistentManifests) {
  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json j = tinyManifest(1, 4);
  j["version"] = ZRT_PROGRAM_VERSION + 1;
  EXPECT_NE(error(j).find("program version"), std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffers"]["exp_avg_sq"] = 310;
  EXPECT_NE(error(j).find("outside the persistent arena"), std::string::npos);
  // Adafactor's row borrows Adam's entries: without its parameters a
  // program would train Adam under its name, so it is refused.
  j = tinyManifest(1, 4);
  j["optimizer"]["kind"] = "adafactor";
  EXPECT_NE(error(j).find("optimizer.adafactor is missing for adafactor"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["optimizer"]["adafactor"] = {{"beta2_decay", -0.8}, {"eps1", -1.0},
                                 {"eps2", 1e-3},        {"d", 1.0},
                                 {"maximize", false}};
  EXPECT_NE(error(j).find("optimizer.adafactor is set for adamw"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffer_numel"]["grads"] = 3; // stage 1 keeps full grads
  EXPECT_NE(error(j).find("stage 1 needs 10"), std::string::npos);
  j = tinyManifest(1, 4);
  j["params"][1]["offset"] = 9;
  EXPECT_NE(error(j).find("outside partition"), std::string::npos);
  // Exactly f32 parameters are their own masters.
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffers"]["master"] = 128;
  j["partitions"][0]["buffer_numel"]["master"] = 3;
  EXPECT_NE(error(j).find("has a master buffer with compute dtype f32"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0]["compute_dtype"] = "bf16";
  j["precision"]["kind"] = "bf16";
  EXPECT_NE(error(j).find("has no master buffer with compute dtype bf16"),
            std::string::npos);
  j["partitions"][0]["buffers"]["master"] = 128;
  j["partitions"][0]["buffer_numel"]["master"] = 3;
  EXPECT_NO_THROW(Manifest::parse(j.dump()));
  j = tinyManifest(1, 4);
  j.erase("plan");
  EXPECT_NE(error(j).find("invalid program manifest: missing key 'plan'"),
            std::string::npos);
  // Missing and mistyped keys are named by their path.
  j = tinyManifest(1, 4);
  j["plan"].erase("peak_bytes");
  EXPECT_NE(error(j).find("missing key 'plan.peak_bytes'"), std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffer_numel"].erase("grads");
  EXPECT_NE(error(j).find("missing key 'partitions[0].buffer_numel.grads'"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["stage"] = "one";
  EXPECT_NE(error(j).find("key 'stage' must be an integer, got string"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["params"][1]["shape"] = {2.5};
  EXPECT_NE(
      error(j).find("key 'params[1].shape[0]' must be an integer, got number"),
      std::string::npos);
  j = tinyManifest(1, 4);
  j["world_size"] = int64_t(1) << 40;
  EXPECT_NE(error(j).find("key 'world_size' is out of range"),
            std::string::npos);
  // So are values outside an enum's, with the ones it has.
  j = tinyManifest(1, 4);
  j["params"][0]["init"] = "uniform";
  EXPECT_NE(error(j).find("key 'params[0].init' has unknown value 'uniform' "
                          "(normal, zeros or ones)"),
            std::string::npos);
  // hpZ's secondary buffer needs hpZ (and padded / h elements).
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffers"]["secondary"] = 0;
  j["partitions"][0]["buffer_numel"]["secondary"] = 1;
  EXPECT_NE(error(j).find("' is not a device buffer of padded / "
                          "hpz_partition_size = "),
            std::string::npos)
      << error(j);
  j = tinyManifest(1, 4);
  j["partitions"][0]["host_buffers"] = {"moments"};
  EXPECT_NE(
      error(j).find("key 'partitions[0].host_buffers[0]' has unknown "
                    "value 'moments' (params, grads, master, exp_avg, "
                    "exp_avg_sq, momentum_buffer, host_grads, host_params or "
                    "secondary)"),
      std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0]["compute_dtype"] = "i64";
  EXPECT_NE(error(j).find("partition 'flat' has unknown compute dtype 'i64'"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["partitions"][0].erase("compute_dtype");
  EXPECT_NE(error(j).find("missing key 'partitions[0].compute_dtype'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { Manifest::parse("{"); }).find("invalid"),
            std::string::npos);
}

// Partitions of one program compute in their own dtypes: a bf16 group with
// its fp32 masters beside an fp32 group that is its own. Each buffer's bytes
// follow its partition's dtype.
// Expert parallelism: absent is none; present, it is above 1 and divides
// the world.
TEST(ManifestTest, ReadsExpertParallel) {
  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json j = tinyManifest(1, 4);
  EXPECT_EQ(Manifest::parse(j.dump()).expertParallel, 1);
  j["expert_parallel"] = 2;
  EXPECT_EQ(Manifest::parse(j.dump()).expertParallel, 2);
  j["expert_parallel"] = 3;
  EXPECT_NE(error(j).find("expert_parallel 3 is not a divisor of the world "
                          "size 4 above 1"),
            std::string::npos)
      << error(j);
  j["expert_parallel"] = 1;
  EXPECT_NE(error(j).find("expert_parallel 1 is not a divisor"),
            std::string::npos);
}

TEST(ManifestTest, MixedComputeDtypes) {
  nlohmann::json j = tinyManifest(1, 4);
  nlohmann::json bf16 = j["partitions"][0];
  bf16["name"] = "flat_1";
  bf16["compute_dtype"] = "bf16";
  bf16["params"] = {"b"};
  bf16["numel"] = 2;
  bf16["padded_numel"] = 4;
  bf16["shard_numel"] = 1;
  // Masters and moments (1 x 4 bytes each) at 320, params and grads (2 x 2
  // bytes each) after them, ending at the arena's end: 4-byte elements
  // would not fit.
  bf16["buffers"] = {{"master", 320},
                     {"exp_avg", 324},
                     {"exp_avg_sq", 328},
                     {"params", 332},
                     {"grads", 336}};
  bf16["buffer_numel"] = {{"params", 2},
                          {"grads", 2},
                          {"master", 1},
                          {"exp_avg", 1},
                          {"exp_avg_sq", 1}};
  j["partitions"][0]["params"] = {"w"};
  j["partitions"][0]["numel"] = 8;
  j["partitions"][0]["padded_numel"] = 8;
  j["partitions"][0]["shard_numel"] = 2;
  j["partitions"][0]["buffer_numel"] = {
      {"params", 8}, {"grads", 8}, {"exp_avg", 2}, {"exp_avg_sq", 2}};
  j["partitions"].push_back(bf16);
  j["params"][1]["partition"] = 1;
  j["params"][1]["offset"] = 0;
  j["plan"]["persistent_bytes"] = 340;
  j["plan"]["peak_bytes"] = 404;
  Manifest m = Manifest::parse(j.dump());
  ASSERT_EQ(m.partitions.size(), 2u);
  const PartitionInfo &f32 = m.partitions[0], &b16 = m.partitions[1];
  EXPECT_EQ(f32.computeDtype, ZRT_F32);
  EXPECT_EQ(f32.computeBytes, 4);
  EXPECT_TRUE(f32.paramsAreMasters);
  EXPECT_EQ(b16.computeDtype, ZRT_BF16);
  EXPECT_EQ(b16.computeDtypeName, "bf16");
  EXPECT_EQ(b16.elementBytes(kGrads), 2);
  EXPECT_EQ(b16.elementBytes(kMaster), 4);
  EXPECT_FALSE(b16.paramsAreMasters);
  // The master rule is the partition's own: an f32 group among bf16 ones
  // still has none.
  j = tinyManifest(1, 4);
  j["partitions"][0]["buffers"]["master"] = 128;
  j["partitions"][0]["buffer_numel"]["master"] = 3;
  j["precision"]["kind"] = "bf16";
  EXPECT_NE(errorOf([&] { Manifest::parse(j.dump()); })
                .find("partition 'flat' has a master buffer with compute "
                      "dtype f32"),
            std::string::npos);
}

// Stage-3 parameter shards on NVMe: in the parameters' swap file (part of
// nvme_bytes, the total of the rank's files), fp32 with device masters.
TEST(ManifestTest, ParamsOnNvme) {
  auto onNvme = [] {
    nlohmann::json j = tinyManifest(3, 4);
    nlohmann::json &p = j["partitions"][0];
    p["buffers"]["master"] = 128;
    p["buffer_numel"]["master"] = 3;
    p["nvme_buffers"] = {"params"};
    j["plan"]["host_bytes"] = 8192;
    j["plan"]["nvme_bytes"] = 4096;
    j["plan"]["param_nvme_bytes"] = 4096;
    j["plan"]["param_swap_offset"] = 0;
    j["plan"]["param_swap_bytes"] = 8192;
    j["param_nvme_path"] = "/p";
    return j;
  };
  Manifest m = Manifest::parse(onNvme().dump());
  const PartitionInfo &p = m.partitions[0];
  EXPECT_TRUE(p.paramsOffloaded());
  EXPECT_FALSE(p.paramsOnHost());
  EXPECT_FALSE(p.paramsAreMasters);
  EXPECT_EQ(m.optimizerNvmeBytes(), 0);
  EXPECT_EQ(m.paramNvmePath, "/p");
  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json j = onNvme();
  j.erase("param_nvme_path");
  EXPECT_NE(error(j).find("inconsistent parameter swap file"),
            std::string::npos);
  j = onNvme();
  j["plan"]["param_swap_bytes"] = 0;
  EXPECT_NE(error(j).find("inconsistent parameter swap file"),
            std::string::npos);
  j = onNvme();
  j["plan"]["param_swap_offset"] = 4096; // past the host arena
  EXPECT_NE(error(j).find("inconsistent parameter swap file"),
            std::string::npos);
  j = onNvme();
  j["partitions"][0]["buffers"]["params"] = 64;
  EXPECT_NE(error(j).find("lies outside the swap file (or off its 4096-byte "
                          "blocks)"),
            std::string::npos);
  // An fp32 shard on NVMe is never its own master.
  j = onNvme();
  j["partitions"][0]["buffers"].erase("master");
  j["partitions"][0]["buffer_numel"].erase("master");
  EXPECT_NE(error(j).find("has no master buffer"), std::string::npos);
}

TEST(ManifestTest, ReadsTheMemoryTimeline) {
  nlohmann::json j = tinyManifest(1, 4);
  Manifest none = Manifest::parse(j.dump());
  EXPECT_TRUE(none.plannedLiveBytes.empty());
  EXPECT_EQ(none.backwardStart, -1);
  j["plan"]["scratch_bytes"] = 16;
  j["memory_timeline"] = {{"live_bytes", {48, 64, 0}},
                          {"scratch_bytes", {0, 16, 0}},
                          {"backward_start", 1}};
  Manifest m = Manifest::parse(j.dump());
  EXPECT_EQ(m.plannedLiveBytes, (std::vector<int64_t>{48, 64, 0}));
  EXPECT_EQ(m.plannedScratchBytes, (std::vector<int64_t>{0, 16, 0}));
  EXPECT_EQ(m.backwardStart, 1);

  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json bad = j;
  bad["memory_timeline"]["scratch_bytes"] = {0, 16};
  EXPECT_NE(error(bad).find("3 live_bytes but 2 scratch_bytes"),
            std::string::npos);
  bad = j;
  bad["memory_timeline"]["live_bytes"][1] = 65; // the arena has 64 bytes
  EXPECT_NE(error(bad).find("at op 1 exceeds"), std::string::npos);
  bad = j;
  bad["memory_timeline"]["scratch_bytes"][2] = -1;
  EXPECT_NE(error(bad).find("at op 2 exceeds"), std::string::npos);
  bad = j;
  bad["memory_timeline"]["backward_start"] = 4;
  EXPECT_NE(error(bad).find("backward_start 4"), std::string::npos);
  bad = j;
  bad["memory_timeline"].erase("live_bytes");
  EXPECT_NE(error(bad).find("invalid program manifest"), std::string::npos);
}

// The topology and the planned communication are optional: absent, one
// node without hpZ or MiCS and nothing to compare; present, checked by the
// rules #zero.schedule verifies, errors naming the key.
TEST(ManifestTest, ReadsTopologyAndPlannedComm) {
  nlohmann::json j = tinyManifest(3, 4);
  Manifest none = Manifest::parse(j.dump());
  EXPECT_EQ(none.ranksPerNode, 0);
  EXPECT_EQ(none.hpzPartitionSize, 1);
  EXPECT_EQ(none.micsShardSize, 0);
  EXPECT_FALSE(none.hasPlannedComm);

  j["topology"] = {{"ranks_per_node", 2}, {"mics_shard_size", 2}};
  j["plan"]["comm"] = {
      {"all_gather", {{"intra_node_bytes", 40}, {"inter_node_bytes", 12}}},
      {"all_reduce", {{"intra_node_bytes", 8}, {"inter_node_bytes", 0}}}};
  Manifest m = Manifest::parse(j.dump());
  EXPECT_EQ(m.ranksPerNode, 2);
  EXPECT_EQ(m.hpzPartitionSize, 1);
  EXPECT_EQ(m.micsShardSize, 2);
  EXPECT_TRUE(m.hasPlannedComm);
  EXPECT_EQ(m.plannedComm[kAllGather], (LinkBytes{40, 12}));
  EXPECT_EQ(m.plannedComm[kReduceScatter], (LinkBytes{0, 0}));
  EXPECT_EQ(m.plannedComm[kAllReduce], (LinkBytes{8, 0}));

  auto error = [](nlohmann::json j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  nlohmann::json bad = j;
  bad["topology"]["ranks_per_node"] = 3;
  EXPECT_NE(error(bad).find("key 'topology.ranks_per_node' 3 does not divide "
                            "the world size 4"),
            std::string::npos);
  bad = j;
  bad["topology"]["mics_shard_size"] = -2;
  EXPECT_NE(error(bad).find("key 'topology.mics_shard_size' -2"),
            std::string::npos);
  bad = j;
  bad["topology"]["hpz_partition_size"] = 0;
  EXPECT_NE(error(bad).find("key 'topology.hpz_partition_size' 0 is not a "
                            "positive divisor of the world size 4"),
            std::string::npos);
  bad = j;
  bad["topology"]["hpz_partition_size"] = 2;
  EXPECT_NE(error(bad).find("key 'topology.hpz_partition_size' and "
                            "mics_shard_size exclude each other"),
            std::string::npos);
  bad = tinyManifest(2, 4);
  bad["topology"] = {{"ranks_per_node", 2}, {"hpz_partition_size", 2}};
  EXPECT_NE(error(bad).find("key 'topology.hpz_partition_size' needs stage "
                            "3, the program is stage 2"),
            std::string::npos);
  bad = j;
  bad["topology"]["ranks_per_node"] = "two";
  EXPECT_NE(error(bad).find("key 'topology.ranks_per_node' must be an "
                            "integer, got string"),
            std::string::npos);
  bad = j;
  bad["plan"]["comm"]["all_gather"]["inter_node_bytes"] = -1;
  EXPECT_NE(error(bad).find("key 'plan.comm.all_gather' has negative bytes"),
            std::string::npos);
  bad = j;
  bad["plan"]["comm"]["reduce"] = {{"intra_node_bytes", 4}};
  EXPECT_NE(error(bad).find("missing key 'plan.comm.reduce.inter_node_bytes'"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Universal checkpoints
//===----------------------------------------------------------------------===//

/// A value written over one element of a saved section: rank `rank`'s
/// buffer `kind`, element `index` of its section (rank < 0: none).
struct Poison {
  int rank = -1;
  BufferKind kind = kMaster;
  int64_t index = 0;
  float value = 0;
};

/// Saves a checkpoint of `m` on its world size under `root` in which element
/// e of the group layout holds 1000 * kind + e (the padding 0), as the
/// driver's ranks would, each its owned range; then `poison`, checksummed
/// as if saved.
void saveSynthetic(const Manifest &m, const std::string &root, int64_t step,
                   Poison poison = {}) {
  std::string dir = checkpointDir(root, step);
  makeDirs(dir);
  TrainingState state{step, 40, step - 1, {{"cur_scale", 2048.0}}};
  std::vector<SavedFile> files;
  for (int r = 0; r < m.worldSize; ++r) {
    std::string bytes =
        packRankFile(m, r, m.worldSize, state,
                     [&](int32_t p, BufferKind kind, char *dst, int64_t size) {
                       Range own = m.owned(m.partitions[size_t(p)], r);
                       ASSERT_LE(own.size() * 4, size);
                       for (int64_t e = own.begin; e < own.end; ++e) {
                         float v = float(1000 * kind + e);
                         std::memcpy(dst + (e - own.begin) * 4, &v, 4);
                       }
                       if (r == poison.rank && kind == poison.kind) {
                         ASSERT_LT(poison.index * 4, size);
                         std::memcpy(dst + poison.index * 4, &poison.value, 4);
                       }
                     });
    writeFileAtomic(dir + "/" + rankFileName(r), bytes);
    files.push_back({rankFileCrc(bytes), bytes.size()});
  }
  writeFileAtomic(dir + "/manifest.json",
                  checkpointManifest(m, m.worldSize, step, files));
  writeFileAtomic(root + "/latest", "step_" + std::to_string(step) + "\n");
}

/// tinyManifest's model (w [2, 4], b [2]) regrouped at stage 3 on 3 ranks:
/// b alone in group "b" (shards of 1, rank 2 owns nothing), then w in group
/// "w" (shards of 3, rank 2 owns 2).
Manifest regrouped() {
  Manifest m = Manifest::parse(tinyManifest(0, 1).dump());
  m.stage = 3;
  m.worldSize = 3;
  PartitionInfo b = m.partitions[0], w = m.partitions[0];
  b.name = "b";
  b.numel = 2;
  b.paddedNumel = 3;
  b.shardNumel = 1;
  w.name = "w";
  w.numel = 8;
  w.paddedNumel = 9;
  w.shardNumel = 3;
  for (PartitionInfo *g : {&b, &w})
    for (int k = 0; k < kNumBufferKinds; ++k)
      g->counts[k] = g->shardNumel;
  m.partitions = {b, w};
  m.params[0].partition = 1; // w
  m.params[0].offset = 0;
  m.params[1].partition = 0; // b
  m.params[1].offset = 0;
  return m;
}

TEST(UniversalCheckpointTest, RemapsBetweenLayouts) {
  std::string root = tempDir();
  // Saved at stage 2 on 4 ranks (rank 3 holds one element).
  Manifest saved = Manifest::parse(tinyManifest(2, 4).dump());
  saveSynthetic(saved, root, 7);
  CheckpointReader ckpt(root);
  EXPECT_EQ(ckpt.step, 7);
  EXPECT_EQ(ckpt.world, 4);
  ASSERT_EQ(ckpt.params.size(), 2u);
  EXPECT_EQ(ckpt.params[1].name, "b");
  EXPECT_EQ(ckpt.params[1].offset, 8);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(ckpt.check(r), "");
  TrainingState state = ckpt.state(0);
  EXPECT_EQ(state.dataPosition, 40);
  EXPECT_EQ(state.adamSteps, 6);
  EXPECT_EQ(state.lossScaler.at("cur_scale"), 2048.0);

  // Into one rank at stage 0: everything, in order.
  Manifest one = Manifest::parse(tinyManifest(0, 1).dump());
  checkSameModel(ckpt, one);
  std::vector<float> values;
  for (BufferKind kind : kSavedBuffers) {
    // Adam's states only (no SGD momentum_buffer).
    if (kind != kMaster && !one.keepsState(kind))
      continue;
    remapOwned(ckpt, one, 0, 0, kind, values);
    ASSERT_EQ(values.size(), 10u);
    for (int e = 0; e < 10; ++e)
      EXPECT_EQ(values[size_t(e)], float(1000 * kind + e));
  }

  // Into another grouping on 3 ranks: each owned range by name.
  Manifest three = regrouped();
  checkSameModel(ckpt, three);
  // b: rank 0 owns its element 0, rank 1 element 1, rank 2 nothing.
  remapOwned(ckpt, three, 0, 0, kExpAvg, values);
  EXPECT_EQ(values, (std::vector<float>{1000 * kExpAvg + 8}));
  remapOwned(ckpt, three, 0, 1, kExpAvg, values);
  EXPECT_EQ(values, (std::vector<float>{1000 * kExpAvg + 9}));
  remapOwned(ckpt, three, 0, 2, kExpAvg, values);
  EXPECT_TRUE(values.empty());
  // w: rank 2 owns its elements 6 and 7 (saved by ranks 2 and 3).
  remapOwned(ckpt, three, 1, 2, kExpAvgSq, values);
  EXPECT_EQ(values,
            (std::vector<float>{1000 * kExpAvgSq + 6, 1000 * kExpAvgSq + 7}));

  // Round trip: the regrouped checkpoint read back into stage 0.
  std::string root2 = tempDir();
  CheckpointReader again(root);
  std::string dir2 = checkpointDir(root2, 7);
  makeDirs(dir2);
  std::vector<SavedFile> files;
  for (int r = 0; r < 3; ++r) {
    std::string bytes =
        packRankFile(three, r, 3, again.state(0),
                     [&](int32_t p, BufferKind kind, char *dst, int64_t) {
                       remapOwned(again, three, p, r, kind, values);
                       std::memcpy(dst, values.data(), values.size() * 4);
                     });
    writeFileAtomic(dir2 + "/" + rankFileName(r), bytes);
    files.push_back({rankFileCrc(bytes), bytes.size()});
  }
  writeFileAtomic(dir2 + "/manifest.json",
                  checkpointManifest(three, 3, 7, files));
  CheckpointReader back(dir2);
  EXPECT_EQ(back.stage, 3);
  checkSameModel(back, one);
  for (BufferKind kind : kSavedBuffers) {
    if (kind != kMaster && !one.keepsState(kind))
      continue;
    remapOwned(back, one, 0, 0, kind, values);
    for (int e = 0; e < 10; ++e)
      EXPECT_EQ(values[size_t(e)], float(1000 * kind + e));
  }
  std::system(("rm -rf " + root + " " + root2).c_str());
}

/// tinyManifest's model at stage 2 on 4 ranks with w [2, 4] two of the
/// four experts of [4, 4] (expert_parallel 2, placed by `placement`) in the
/// expert group "experts" (sharded over the 2 ranks holding the same
/// experts: shards of 4), b in the dense group "dense" (shards of 1).
Manifest expertParallel(int32_t placement) {
  Manifest m = Manifest::parse(tinyManifest(2, 4).dump());
  m.expertParallel = 2;
  m.expertPlacement = placement;
  PartitionInfo experts = m.partitions[0], dense = m.partitions[0];
  experts.name = "experts";
  experts.expert = true;
  experts.numel = experts.paddedNumel = 8;
  experts.shardNumel = 4;
  experts.counts[kParams] = experts.counts[kGrads] = 8;
  experts.counts[kExpAvg] = experts.counts[kExpAvgSq] = 4;
  dense.name = "dense";
  dense.numel = 2;
  dense.paddedNumel = 4;
  dense.shardNumel = 1;
  dense.counts[kParams] = dense.counts[kGrads] = 2;
  dense.counts[kExpAvg] = dense.counts[kExpAvgSq] = 1;
  m.partitions = {experts, dense};
  m.params[0].expertParallel = 2;
  m.params[1].partition = 1;
  m.params[1].offset = 0;
  return m;
}

TEST(UniversalCheckpointTest, GathersEveryExpert) {
  for (int32_t placement : {ZRT_EXPERT_CONTIGUOUS, ZRT_EXPERT_STRIDED}) {
    std::string root = tempDir();
    Manifest m = expertParallel(placement);
    // Element e of a rank's group layout holds 1000 * kind + e, plus 100 *
    // its expert set member in the expert group.
    std::string dir = checkpointDir(root, 1);
    makeDirs(dir);
    std::vector<SavedFile> files;
    for (int r = 0; r < 4; ++r) {
      std::string bytes = packRankFile(
          m, r, 4, {1, 8, 1, {{"cur_scale", 1.0}}},
          [&](int32_t p, BufferKind kind, char *dst, int64_t size) {
            const PartitionInfo &part = m.partitions[size_t(p)];
            Range own = m.owned(part, r);
            ASSERT_LE(own.size() * 4, size);
            for (int64_t e = own.begin; e < own.end; ++e) {
              float v = float(1000 * kind + e +
                              (part.expert ? 100 * m.expertMember(r) : 0));
              std::memcpy(dst + (e - own.begin) * 4, &v, 4);
            }
          });
      writeFileAtomic(dir + "/" + rankFileName(r), bytes);
      files.push_back({rankFileCrc(bytes), bytes.size()});
    }
    writeFileAtomic(dir + "/manifest.json", checkpointManifest(m, 4, 1, files));
    CheckpointReader ckpt(dir);
    EXPECT_EQ(ckpt.expertParallel, 2);
    EXPECT_EQ(ckpt.expertPlacement, placement);
    EXPECT_TRUE(ckpt.groups[0].expert);
    EXPECT_FALSE(ckpt.groups[1].expert);
    EXPECT_EQ(ckpt.wholeShape(0), (std::vector<int64_t>{4, 4}));
    EXPECT_EQ(ckpt.wholeShape(1), (std::vector<int64_t>{2}));
    EXPECT_EQ(errorOf([&] { ckpt.checkExpertsRecorded("consolidate"); }), "");
    for (BufferKind kind : {kMaster, kExpAvg, kExpAvgSq}) {
      // Member q's experts are elements [8q, 8q + 8), each from the two
      // ranks holding its shards.
      std::vector<float> whole(16), want(16);
      for (int q = 0; q < 2; ++q)
        for (int e = 0; e < 8; ++e)
          want[size_t(8 * q + e)] = float(1000 * kind + 100 * q + e);
      ckpt.readWhole(0, kind, 0, 16, whole.data());
      EXPECT_EQ(whole, want)
          << kBufferNames[kind] << " placement " << placement;
      // A range across the members' boundary.
      std::vector<float> part(6);
      ckpt.readWhole(0, kind, 5, 11, part.data());
      EXPECT_EQ(part, std::vector<float>(want.begin() + 5, want.begin() + 11));
      std::vector<float> b(2);
      ckpt.readWhole(1, kind, 0, 2, b.data());
      EXPECT_EQ(
          b, (std::vector<float>{float(1000 * kind), float(1000 * kind + 1)}));
    }
    // The program that saved it resumes it; a dense one is refused naming
    // the expert layout, and so is an expert-parallel program of another
    // layout.
    EXPECT_EQ(errorOf([&] { checkSameModel(ckpt, m); }), "");
    std::vector<float> values;
    // Rank 3 is member 1 and owns shard 1 (elements 4-7) of its experts.
    remapOwned(ckpt, m, 0, 3, kExpAvg, values);
    float base = float(1000 * kExpAvg + 100);
    EXPECT_EQ(values,
              (std::vector<float>{base + 4, base + 5, base + 6, base + 7}));
    // The same model without expert parallelism: w [4, 4] whole.
    Manifest dense = Manifest::parse(tinyManifest(0, 1).dump());
    dense.params[0].shape = {4, 4};
    dense.params[0].numel = 16;
    dense.params[1].offset = 16;
    PartitionInfo &flat = dense.partitions[0];
    flat.numel = flat.paddedNumel = flat.shardNumel = 18;
    for (BufferKind k : {kParams, kGrads, kExpAvg, kExpAvgSq})
      flat.counts[k] = 18;
    std::string error = errorOf([&] { checkSameModel(ckpt, dense); });
    EXPECT_NE(error.find(
                  std::string("its experts split over 2 ranks "
                              "(expert_parallel, ") +
                  (placement == ZRT_EXPERT_STRIDED ? "strided" : "contiguous") +
                  " sets); this program has no expert parallelism"),
              std::string::npos)
        << error;
    Manifest other = expertParallel(placement);
    other.stage = 3;
    error = errorOf([&] { checkSameModel(ckpt, other); });
    EXPECT_NE(error.find("this program splits experts over 2 ranks "
                         "(expert_parallel), and resharding an "
                         "expert-parallel checkpoint is not supported"),
              std::string::npos)
        << error;
    // A checkpoint of the dense program into the expert-parallel one.
    std::string root2 = tempDir();
    saveSynthetic(dense, root2, 2);
    CheckpointReader whole(root2);
    EXPECT_EQ(whole.expertParallel, 1);
    error = errorOf([&] { checkSameModel(whole, m); });
    EXPECT_NE(error.find("without expert parallelism (its parameter 'w' [4, "
                         "4] holds every expert); this program splits experts "
                         "over 2 ranks (expert_parallel, [2, 4] a rank)"),
              std::string::npos)
        << error;
    std::system(("rm -rf " + root + " " + root2).c_str());
  }
}

TEST(UniversalCheckpointTest, RefusesAnotherModelNamingWhatDiffers) {
  std::string root = tempDir();
  saveSynthetic(Manifest::parse(tinyManifest(2, 4).dump()), root, 3);
  CheckpointReader ckpt(root);
  auto error = [&](nlohmann::json j) {
    Manifest m = Manifest::parse(j.dump());
    return errorOf([&] { checkSameModel(ckpt, m); });
  };
  nlohmann::json j = tinyManifest(1, 4);
  EXPECT_EQ(error(j), "");
  j["params"][1]["name"] = "bias";
  j["partitions"][0]["params"][1] = "bias";
  EXPECT_NE(error(j).find("is of another model: its parameter 2 of 2 is 'b' "
                          "[2], this program's parameter 2 of 2 is 'bias' [2]"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["params"][0]["shape"] = {4, 2};
  EXPECT_NE(error(j).find("its parameter 'w' has shape [2, 4], this "
                          "program's [4, 2]"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["optimizer"]["lr"] = 3e-4;
  EXPECT_NE(error(j).find("was saved with learning rate 0.001, this "
                          "program's is 0.0003"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["optimizer"]["kind"] = "adam";
  EXPECT_NE(error(j).find("was saved with optimizer \"adamw\", this "
                          "program's is \"adam\""),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["optimizer"]["weight_decay"] = 0.1;
  EXPECT_NE(error(j).find("weight decay 0.0, this program's is 0.1"),
            std::string::npos);
  // A parameter that computes in another dtype, named.
  j = tinyManifest(1, 4);
  j["partitions"][0]["compute_dtype"] = "bf16";
  j["partitions"][0]["buffers"]["master"] = 128;
  j["partitions"][0]["buffer_numel"]["master"] = 3;
  EXPECT_NE(error(j).find("was saved with compute dtype f32, this program's "
                          "is bf16 for parameter 'w'"),
            std::string::npos);
  std::system(("rm -rf " + root).c_str());
}

// Each parameter records the dtype it computes in; a checkpoint from before
// that recorded one for the whole step, which every parameter takes. A group
// computes in one dtype.
TEST(UniversalCheckpointTest, ReadsEachParametersComputeDtype) {
  std::string root = tempDir();
  saveSynthetic(Manifest::parse(tinyManifest(2, 4).dump()), root, 3);
  std::string path = checkpointDir(root, 3) + "/manifest.json";
  nlohmann::json saved = openManifest(readFile(path), "ck");
  ASSERT_EQ(saved["params"][1]["compute_dtype"], "f32");
  EXPECT_FALSE(saved.contains("compute_dtype"));
  auto reopen = [&](const nlohmann::json &j) {
    writeFileAtomic(path, sealManifest(j));
    return errorOf([&] {
      CheckpointReader ckpt(root);
      EXPECT_EQ(ckpt.computeDtypes(), "f32");
      checkSameModel(ckpt, Manifest::parse(tinyManifest(1, 4).dump()));
    });
  };
  EXPECT_EQ(reopen(saved), "");
  nlohmann::json old = saved;
  for (nlohmann::json &p : old["params"])
    p.erase("compute_dtype");
  old["compute_dtype"] = "f32";
  EXPECT_EQ(reopen(old), "");
  old.erase("compute_dtype");
  EXPECT_NE(reopen(old).find("malformed checkpoint metadata"),
            std::string::npos);
  nlohmann::json mixed = saved;
  mixed["params"][1]["compute_dtype"] = "bf16";
  EXPECT_NE(reopen(mixed).find("parameter 'b' computes in bf16, but 'w' of "
                               "the same group 'flat' in f32; a group "
                               "computes in one dtype"),
            std::string::npos);
  mixed["params"][1]["compute_dtype"] = "i64";
  EXPECT_NE(reopen(mixed).find("parameter 'b' has compute dtype 'i64' (f32, "
                               "bf16 or f16)"),
            std::string::npos);
  std::system(("rm -rf " + root).c_str());
}

TEST(UniversalCheckpointTest, NamesNonFiniteValues) {
  // Stage 2 on 4 ranks, shards of 3: rank 3 holds layout element 9 (b's
  // element 1) and two elements of padding.
  Manifest m = Manifest::parse(tinyManifest(2, 4).dump());
  Manifest one = Manifest::parse(tinyManifest(0, 1).dump());
  std::vector<float> values;
  std::string nan = tempDir();
  saveSynthetic(m, nan, 3, {3, kExpAvg, 0, std::nanf("")});
  CheckpointReader ckpt(nan);
  std::string rank3 = checkpointDir(nan, 3) + "/rank_3.bin";
  std::string want = rank3 + ": parameter 'b' exp_avg element 1 is NaN; a "
                             "checkpoint's masters and Adam moments must be "
                             "finite";
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(ckpt.nonFinite(r), "");
  EXPECT_EQ(ckpt.nonFinite(3), want);
  // The CRC-32s hold: only the value is wrong.
  EXPECT_EQ(ckpt.check(3), "");
  checkSameModel(ckpt, m);
  // A resume into another layout names the file it read.
  checkSameModel(ckpt, one);
  remapOwned(ckpt, one, 0, 0, kMaster, values);
  EXPECT_EQ(errorOf([&] { remapOwned(ckpt, one, 0, 0, kExpAvg, values); }),
            want);
  // Rank 1's range holds no NaN: its own resume reads it.
  remapOwned(ckpt, m, 0, 1, kExpAvg, values);
  EXPECT_EQ(values.size(), 3u);

  // An infinity in the padding: inspect finds it; a resume, which reads
  // only the parameters' elements, is not affected.
  std::string pad = tempDir();
  saveSynthetic(m, pad, 3, {3, kExpAvgSq, 2, -INFINITY});
  CheckpointReader padded(pad);
  EXPECT_EQ(padded.nonFinite(3),
            checkpointDir(pad, 3) +
                "/rank_3.bin: the padding of group 'flat' exp_avg_sq element "
                "11 is infinite; a checkpoint's masters and Adam moments must "
                "be finite");
  checkSameModel(padded, one);
  remapOwned(padded, one, 0, 0, kExpAvgSq, values);
  EXPECT_EQ(values[9], float(1000 * kExpAvgSq + 9));

  // Format 2 records no parameters: the group and its element are named.
  std::string path = checkpointDir(nan, 3) + "/manifest.json";
  nlohmann::json j = openManifest(readFile(path), "ck");
  j["format"] = 2;
  j.erase("params");
  writeFileAtomic(path, sealManifest(j));
  CheckpointReader old(nan);
  EXPECT_EQ(old.nonFinite(3),
            rank3 + ": group 'flat' exp_avg element 9 is NaN; a checkpoint's "
                    "masters and Adam moments must be finite");
  std::system(("rm -rf " + nan + " " + pad).c_str());
}

TEST(UniversalCheckpointTest, Format2LoadsOnlyIntoItsOwnProgram) {
  // A format-2 manifest records no parameters.
  std::string root = tempDir();
  Manifest m = Manifest::parse(tinyManifest(2, 4).dump());
  saveSynthetic(m, root, 3);
  std::string path = checkpointDir(root, 3) + "/manifest.json";
  nlohmann::json j = openManifest(readFile(path), "ck");
  j["format"] = 2;
  j.erase("params");
  writeFileAtomic(path, sealManifest(j));
  CheckpointReader same(root);
  EXPECT_EQ(same.format, 2);
  EXPECT_TRUE(same.params.empty());
  checkSameModel(same, m);
  std::vector<float> values;
  remapOwned(same, m, 0, 3, kMaster, values);
  EXPECT_EQ(values, (std::vector<float>{float(1000 * kMaster + 9)}));
  CheckpointReader other(root);
  Manifest moved = Manifest::parse(tinyManifest(1, 4).dump());
  EXPECT_NE(errorOf([&] {
              checkSameModel(other, moved);
            }).find("has format 2, which records no parameters"),
            std::string::npos);
  std::system(("rm -rf " + root).c_str());
}

//===----------------------------------------------------------------------===//
// Frozen parameters
//===----------------------------------------------------------------------===//

/// A bf16 step on one rank at stage 0: w [2, 4] trains (params, grads,
/// masters and moments), b [6] is frozen in a partition of its own that
/// holds only its params. `frozenB` false: b trains in a partition like w's.
nlohmann::json frozenManifest(bool frozenB = true) {
  nlohmann::json j = tinyManifest(0, 1);
  j["precision"]["kind"] = "bf16";
  j["params"][1]["shape"] = {6};
  j["params"][1]["numel"] = 6;
  j["params"][1]["init"] = "normal";
  j["params"][1]["std"] = 0.3;
  j["params"][1]["partition"] = 1;
  j["params"][1]["offset"] = 0;
  if (frozenB)
    j["params"][1]["frozen"] = true;
  nlohmann::json w = {{"name", "flat"},
                      {"numel", 8},
                      {"padded_numel", 8},
                      {"shard_numel", 8},
                      {"compute_dtype", "bf16"},
                      {"params", {"w"}},
                      {"buffers",
                       {{"params", 0},
                        {"grads", 16},
                        {"master", 32},
                        {"exp_avg", 64},
                        {"exp_avg_sq", 96}}},
                      {"buffer_numel",
                       {{"params", 8},
                        {"grads", 8},
                        {"master", 8},
                        {"exp_avg", 8},
                        {"exp_avg_sq", 8}}}};
  nlohmann::json b = {{"name", "flat_1"},
                      {"numel", 6},
                      {"padded_numel", 6},
                      {"shard_numel", 6},
                      {"compute_dtype", "bf16"},
                      {"params", {"b"}},
                      {"buffers", {{"params", 128}}},
                      {"buffer_numel", {{"params", 6}}}};
  if (!frozenB) {
    b["buffers"] = {{"params", 128},
                    {"grads", 144},
                    {"master", 160},
                    {"exp_avg", 192},
                    {"exp_avg_sq", 224}};
    b["buffer_numel"] = {{"params", 6},
                         {"grads", 6},
                         {"master", 6},
                         {"exp_avg", 6},
                         {"exp_avg_sq", 6}};
  }
  j["partitions"] = {w, b};
  j["plan"] = {
      {"persistent_bytes", 256}, {"arena_bytes", 64}, {"peak_bytes", 320}};
  return j;
}

TEST(FrozenTest, ManifestMarksFrozenPartitions) {
  Manifest m = Manifest::parse(frozenManifest().dump());
  EXPECT_FALSE(m.params[0].frozen);
  EXPECT_TRUE(m.params[1].frozen);
  EXPECT_FALSE(m.partitions[0].frozen);
  const PartitionInfo &b = m.partitions[1];
  EXPECT_TRUE(b.frozen);
  // No masters: the bf16 params are all it has.
  EXPECT_FALSE(b.paramsAreMasters);
  EXPECT_FALSE(b.hasBuffer(kMaster));
  EXPECT_FALSE(b.hasBuffer(kGrads));
  // An fp32 frozen partition's params are its values, as a master's.
  nlohmann::json j = frozenManifest();
  j["partitions"][1]["compute_dtype"] = "f32";
  j["partitions"][1]["buffers"]["params"] = 160;
  EXPECT_TRUE(Manifest::parse(j.dump()).partitions[1].paramsAreMasters);

  auto error = [](const nlohmann::json &j) {
    return errorOf([&] { Manifest::parse(j.dump()); });
  };
  j = frozenManifest();
  j["partitions"][1]["buffers"]["grads"] = 144;
  j["partitions"][1]["buffer_numel"]["grads"] = 6;
  EXPECT_NE(error(j).find("frozen partition 'flat_1' has a grads buffer "
                          "(only params)"),
            std::string::npos);
  // A partition is frozen or trains as a whole.
  j = frozenManifest(false);
  j["params"][0]["frozen"] = true;
  j["params"][1]["partition"] = 0;
  j["params"][1]["offset"] = 2;
  j["params"][0]["numel"] = 2;
  j["params"][0]["shape"] = {2};
  EXPECT_NE(error(j).find("partition 'flat' mixes frozen parameter 'w' with "
                          "trainable 'b'"),
            std::string::npos);
  j = frozenManifest();
  j["params"][1]["frozen"] = "yes";
  EXPECT_NE(error(j).find("key 'params[1].frozen' must be true or false"),
            std::string::npos);
}

/// A context on the host arrays of `m` (the CPU backend's device memory).
struct HostContext {
  explicit HostContext(const Manifest &m)
      : persistent(size_t(m.persistentBytes), 0) {
    ctx.manifest = &m;
    ctx.persistent = persistent.data();
  }
  std::vector<char> persistent;
  zrt_ctx ctx;
};

// A frozen bf16 parameter is initialized in fp32 and rounded once; exports
// and checkpoints widen it exactly, and a resume restores it bitwise.
TEST(FrozenTest, InitializesSavesAndRestoresBitwise) {
  Manifest m = Manifest::parse(frozenManifest().dump());
  HostContext host(m);
  zrt_ctx &ctx = host.ctx;
  initializeParameters(ctx, 7, nullptr);
  const BF16 *b = ctx.buffer<BF16>(1, kParams);
  std::vector<float> widened(6);
  for (int e = 0; e < 6; ++e) {
    float v = initValue(m.params[1], 7, 1, uint64_t(e));
    EXPECT_EQ(b[e].bits, fromFloat<BF16>(v).bits) << "element " << e;
    widened[size_t(e)] = toFloat(b[e]);
  }
  // Rounded indeed: the fp32 values do not survive.
  EXPECT_NE(widened[0], initValue(m.params[1], 7, 1, 0));
  std::vector<Tensor> exported = gatherParameters(ctx);
  ASSERT_EQ(exported.size(), 2u);
  EXPECT_EQ(exported[1].data, widened);

  std::string root = tempDir();
  std::string dir = checkpointDir(root, 4);
  makeDirs(dir);
  Progress progress{4, 32, ""};
  std::vector<SavedFile> files = {writeRankCheckpoint(ctx, dir, progress)};
  writeCheckpointManifest(ctx, root, dir, progress, files);
  std::vector<char> before = host.persistent;
  CheckpointReader ckpt(root);
  EXPECT_FALSE(ckpt.params[0].frozen);
  EXPECT_TRUE(ckpt.params[1].frozen);
  EXPECT_EQ(ckpt.manifest().at("params").at(1).at("frozen"), true);
  EXPECT_FALSE(ckpt.manifest().at("params").at(0).contains("frozen"));
  // Its values, widened; no moments.
  std::vector<float> saved(6);
  ckpt.read(1, kMaster, 0, 6, saved.data());
  EXPECT_EQ(saved, widened);
  EXPECT_NE(errorOf([&] {
              ckpt.read(1, kExpAvg, 0, 6, saved.data());
            }).find("lacks buffer exp_avg of 'flat_1'"),
            std::string::npos);

  std::fill(host.persistent.begin(), host.persistent.end(), char(0x55));
  Progress resumed = readCheckpoint(ctx, root);
  EXPECT_EQ(resumed.step, 4);
  EXPECT_EQ(std::memcmp(host.persistent.data() + 128, before.data() + 128, 12),
            0);
  // The trainable partition's params and masters too (its gradients and
  // moments start from zero here, as at initialization).
  EXPECT_EQ(std::memcmp(host.persistent.data(), before.data(), 16), 0);
  EXPECT_EQ(std::memcmp(host.persistent.data() + 32, before.data() + 32, 32),
            0);
  std::system(("rm -rf " + root).c_str());
}

// Resuming with another set of frozen parameters is refused, naming the
// first parameter whose flag differs.
TEST(FrozenTest, ResumeRefusesAnotherFrozenSet) {
  std::string root = tempDir(), other = tempDir();
  saveSynthetic(Manifest::parse(frozenManifest().dump()), root, 3);
  saveSynthetic(Manifest::parse(frozenManifest(false).dump()), other, 3);
  CheckpointReader frozen(root), trains(other);
  Manifest frozenProgram = Manifest::parse(frozenManifest().dump());
  Manifest trainingProgram = Manifest::parse(frozenManifest(false).dump());
  EXPECT_EQ(errorOf([&] { checkSameModel(frozen, frozenProgram); }), "");
  EXPECT_EQ(errorOf([&] { checkSameModel(trains, trainingProgram); }), "");
  EXPECT_EQ(errorOf([&] { checkSameModel(frozen, trainingProgram); }),
            frozen.where() +
                ": parameter 'b' is frozen in the checkpoint but trains in "
                "this program (resume with the same frozen parameters; "
                "--init-from an export starts a run with others)");
  EXPECT_EQ(errorOf([&] { checkSameModel(trains, frozenProgram); }),
            trains.where() +
                ": parameter 'b' trains in the checkpoint but is frozen in "
                "this program (resume with the same frozen parameters; "
                "--init-from an export starts a run with others)");
  // A checkpoint whose group mixes them is malformed.
  std::string path = checkpointDir(root, 3) + "/manifest.json";
  nlohmann::json j = openManifest(readFile(path), "ck");
  j["params"][1]["partition"] = 0;
  j["params"][1]["offset"] = 0;
  writeFileAtomic(path, sealManifest(j));
  EXPECT_NE(errorOf([&] { CheckpointReader again(root); })
                .find("parameter 'b' is frozen, but 'w' of the same group "
                      "'flat' is trainable"),
            std::string::npos);
  std::system(("rm -rf " + root + " " + other).c_str());
}

//===----------------------------------------------------------------------===//
// Data sources
//===----------------------------------------------------------------------===//

/// A token model's manifest: token ids and labels [2, 4] of i64 with ids
/// in [0, 10), labels fed as `labels` says and, when given, an ignored
/// label.
Manifest tokenManifest(const char *labels,
                       std::optional<int64_t> ignored = std::nullopt) {
  nlohmann::json j = tinyManifest(0, 1);
  nlohmann::json y = {
      {"shape", {2, 4}}, {"dtype", "i64"}, {"offset", 64}, {"index_bound", 10}};
  if (ignored)
    y["ignored_index"] = *ignored;
  j["inputs"] = {
      {{"shape", {2, 4}}, {"dtype", "i64"}, {"offset", 0}, {"index_bound", 10}},
      y};
  j["plan"]["arena_bytes"] = 128;
  j["labels"] = labels;
  return Manifest::parse(j.dump());
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <typename T>
std::string rawOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(T));
}

/// The inputs a data source loads for rows [first, first + 2).
std::pair<std::vector<int64_t>, std::vector<int64_t>> loaded(DataSource &data,
                                                             int64_t first) {
  std::vector<char> arena(128);
  zrt_ctx ctx;
  ctx.step = arena.data();
  data.load(ctx, first);
  std::vector<int64_t> x(8), y(8);
  std::memcpy(x.data(), arena.data(), 64);
  std::memcpy(y.data(), arena.data() + 64, 64);
  return {x, y};
}

TEST(DataSourceTest, TokenLabelConventions) {
  std::string dir = tempDir();
  // Nine tokens: one global batch of 2 rows x 4 tokens and the label after.
  writeBytes(dir + "/t.bin",
             rawOf(std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  Manifest next = tokenManifest("next_token");
  EXPECT_FALSE(next.sameTokenLabels);
  auto data = openTokenData(next, dir + "/t.bin", 2, {});
  auto [x, y] = loaded(*data, 0);
  EXPECT_EQ(x, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(y, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(data->wholeRows(), 2);
  EXPECT_EQ(data->labelsPerRow(), 4);
  // Where a global batch's rows come from: windows and their tokens (the
  // label after them included), wrapping around the file.
  EXPECT_EQ(data->describeRows(0, 2),
            "windows 0-1 of '" + dir + "/t.bin', tokens 0-8");
  EXPECT_EQ(data->describeRows(3, 1),
            "window 3 of '" + dir + "/t.bin', tokens 3-7");
  EXPECT_EQ(data->describeRows(2, 2),
            "windows 2-3 of '" + dir + "/t.bin', tokens 8 and 0-7");

  // The same window as ids and labels, and no token after it needed.
  Manifest same = tokenManifest("same_tokens");
  EXPECT_TRUE(same.sameTokenLabels);
  writeBytes(dir + "/t8.bin",
             rawOf(std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  data = openTokenData(same, dir + "/t8.bin", 2, {});
  std::tie(x, y) = loaded(*data, 0);
  EXPECT_EQ(x, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(y, x);
  EXPECT_EQ(data->wholeRows(), 2);
  EXPECT_NE(errorOf([&] { openTokenData(next, dir + "/t8.bin", 2, {}); })
                .find("holds 8 tokens; one global batch of 2 rows x 4 tokens "
                      "needs at least 9 (targets are shifted by one)"),
            std::string::npos);
  // The manifest's default is next_token.
  nlohmann::json j = tinyManifest(0, 1);
  EXPECT_FALSE(Manifest::parse(j.dump()).sameTokenLabels);
  j["labels"] = "shifted";
  EXPECT_TRUE(Manifest::parse(j.dump()).shiftedLabels);
  j["labels"] = "previous_token";
  EXPECT_NE(errorOf([&] { Manifest::parse(j.dump()); }).find("labels"),
            std::string::npos);
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataSourceTest, TokenArraysWithIgnoredLabels) {
  std::string dir = tempDir();
  // Three rows of token ids (uint16) and labels (int64, -100 ignored).
  NpyArray ids{
      "<u2",
      {3, 4},
      2,
      rawOf(std::vector<uint16_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2})};
  NpyArray labels{
      "<i8",
      {3, 4},
      8,
      rawOf(std::vector<int64_t>{2, 3, 4, -100, 6, 7, 8, 9, -100, -100, 2, 3})};
  writeBytes(dir + "/ids.npy", writeNpy(ids));
  writeBytes(dir + "/labels.npy", writeNpy(labels));
  Manifest m = tokenManifest("next_token", -100);
  auto data = openArrayData(m, dir + "/ids.npy", dir + "/labels.npy", 2, {});
  EXPECT_EQ(data->wholeRows(), 3);
  // Rows 2 and 0: the rows of a step wrap around the samples.
  auto [x, y] = loaded(*data, 2);
  EXPECT_EQ(x, (std::vector<int64_t>{9, 0, 1, 2, 1, 2, 3, 4}));
  EXPECT_EQ(y, (std::vector<int64_t>{-100, -100, 2, 3, 2, 3, 4, -100}));
  EXPECT_EQ(data->labelsPerRow(), 4);
  EXPECT_EQ(data->describeRows(2, 2), "rows 2 and 0 of '" + dir +
                                          "/ids.npy' and '" + dir +
                                          "/labels.npy'");
  EXPECT_EQ(data->describeRows(4, 2),
            "rows 1-2 of '" + dir + "/ids.npy' and '" + dir + "/labels.npy'");
  // Without an ignored index in the manifest, -100 is refused.
  Manifest strict = tokenManifest("next_token");
  EXPECT_EQ(errorOf([&] {
              openArrayData(strict, dir + "/ids.npy", dir + "/labels.npy", 2,
                            {});
            }),
            "'" + dir +
                "/labels.npy': label -100 at row 0, column 3 is outside the "
                "model's classes [0, 10)");
  // The ignored index is a label only: as a token id it is refused.
  writeBytes(dir + "/bad-ids.npy", writeNpy(labels));
  EXPECT_EQ(errorOf([&] {
              openArrayData(m, dir + "/bad-ids.npy", dir + "/labels.npy", 2,
                            {});
            }),
            "'" + dir +
                "/bad-ids.npy': token -100 at row 0, column 3 is outside the "
                "model's vocabulary [0, 10)");
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataSourceTest, ScheduleAsLongAsTheRun) {
  nlohmann::json j = tinyManifest(0, 1);
  j["optimizer"]["schedule"] = {{"kind", "warmup_cosine_lr"},
                                {"warmup_min_lr", 0.0},
                                {"warmup_max_lr", 0.001},
                                {"warmup_num_steps", 5},
                                {"warmup_type", "linear"},
                                {"warmup_min_ratio", 0.0},
                                {"cos_min_ratio", 0.0001},
                                {"cycle_min_lr", 0.0},
                                {"cycle_max_lr", 0.0},
                                {"decay_lr_rate", 0.0},
                                {"cycle_first_step_size", 2000},
                                {"cycle_second_step_size", 0},
                                {"decay_step_size", 0},
                                {"cycle_momentum", true},
                                {"cycle_min_mom", 0.8},
                                {"cycle_max_mom", 0.9},
                                {"decay_mom_rate", 0.0},
                                {"lr_range_test_min_lr", 0.001},
                                {"lr_range_test_step_size", 2000},
                                {"lr_range_test_step_rate", 1.0},
                                {"lr_range_test_staircase", false}};
  // Without total_num_steps: "auto", the run's length.
  Manifest m = Manifest::parse(j.dump());
  EXPECT_TRUE(m.scheduleRunLength);
  m.resolveRunLength(40);
  EXPECT_EQ(m.schedule.total_num_steps, 40);
  Manifest shortRun = Manifest::parse(j.dump());
  EXPECT_NE(errorOf([&] { shortRun.resolveRunLength(5); })
                .find("the run's length --steps 5, which must exceed "
                      "warmup_num_steps (at least 2), 5"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              shortRun.resolveRunLength(0);
            }).find("but the run has none (--steps 0)"),
            std::string::npos);
  // A given total stays.
  j["optimizer"]["schedule"]["total_num_steps"] = 100;
  Manifest fixed = Manifest::parse(j.dump());
  EXPECT_FALSE(fixed.scheduleRunLength);
  fixed.resolveRunLength(40);
  EXPECT_EQ(fixed.schedule.total_num_steps, 100);
}

} // namespace
