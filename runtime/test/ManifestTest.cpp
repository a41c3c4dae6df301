//===- ManifestTest.cpp - The program manifest ----------------------------===//
//
// Part of the zero-mlir project.
//
// Reading the program manifest: its layout arithmetic (uneven shards,
// expert partitions), what it refuses, and what the compiler writes into it
// (memory timeline, topology, planned communication).
//
//===----------------------------------------------------------------------===//

#include "DriverTestUtil.h"

using namespace zrt;
using namespace zrt_test;

namespace {

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

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

// The optimizer's hyper-parameters are optimizers.def's rows, read by name:
// a row the manifest leaves out is its default, whatever the kind.
TEST(ManifestTest, ReadsHyperParamsByRow) {
  nlohmann::json j = tinyManifest(1, 4);
  for (const optimizers::HyperParamRow &p : optimizers::kHyperParams)
    j["optimizer"].erase(p.name);
  Manifest m = Manifest::parse(j.dump());
  for (const optimizers::HyperParamRow &p : optimizers::kHyperParams) {
    EXPECT_EQ(m.hyperParam(p.id), p.defaultValue) << p.name;
    EXPECT_EQ(m.optimizerParam(p.name), p.defaultValue) << p.name;
  }
  EXPECT_EQ(m.optimizerParam("lr"), 1e-3);
  EXPECT_EQ(m.optimizerParam("amsgrad"), std::nullopt);
  EXPECT_EQ(m.optimizerParam("bias_correction"), 1.0);
  EXPECT_EQ(m.optimizerParam("ns_steps"), 5.0);

  // Flat keys, each of its row's type, as the compiler writes them for
  // every kind (this program's is AdamW).
  j["optimizer"]["muon_lr"] = 0.02;
  j["optimizer"]["muon_nesterov"] = false;
  j["optimizer"]["ns_steps"] = 3;
  j["optimizer"]["adjust_lr_fn"] = 1;
  j["optimizer"]["beta2_decay"] = -0.5;
  j["optimizer"]["maximize"] = true;
  m = Manifest::parse(j.dump());
  using HP = optimizers::HyperParam;
  EXPECT_EQ(m.hyperParam(HP::muon_lr), 0.02);
  EXPECT_EQ(m.hyperParam(HP::muon_nesterov), 0.0);
  EXPECT_EQ(m.hyperParam(HP::ns_steps), 3.0);
  EXPECT_EQ(m.hyperParam(HP::adjust_lr_fn), 1.0);
  EXPECT_EQ(m.optimizerParam("beta2_decay"), -0.5);
  EXPECT_EQ(m.optimizerParam("maximize"), 1.0);
  EXPECT_EQ(m.optimizerParam("beta1"), 0.9);
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
  // A hyper-parameter's field has its row's type.
  j = tinyManifest(1, 4);
  j["optimizer"]["maximize"] = 1;
  EXPECT_NE(error(j).find("key 'optimizer.maximize' must be true or false"),
            std::string::npos);
  j = tinyManifest(1, 4);
  j["optimizer"]["ns_steps"] = 2.5;
  EXPECT_NE(error(j).find("key 'optimizer.ns_steps' must be an integer"),
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

} // namespace
