//===- CheckpointTest.cpp - Universal checkpoints and frozen tensors ------===//
//
// Part of the zero-mlir project.
//
// Checkpoints read into any layout by parameter name (other world sizes,
// partitionings and expert placements), what they refuse, and frozen
// partitions' saves and resumes.
//
//===----------------------------------------------------------------------===//

#include "DriverTestUtil.h"

using namespace zrt;
using namespace zrt_test;

namespace {

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
  EXPECT_NE(error(j).find("weight_decay 0.0, this program's is 0.1"),
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

} // namespace
