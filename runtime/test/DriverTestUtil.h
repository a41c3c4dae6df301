//===- DriverTestUtil.h - What the driver's tests share ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Helpers of zrt-driver-test's files (DriverTest.cpp, ManifestTest.cpp,
// CheckpointTest.cpp, DataSourceTest.cpp): errors, temporary directories,
// bytes and the tiny manifest most of them start from.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_TEST_DRIVER_TEST_UTIL_H
#define ZRT_TEST_DRIVER_TEST_UTIL_H

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

namespace zrt_test {

/// Runs fn and returns the message it threw ("" if it did not).
template <typename Fn>
inline std::string errorOf(const Fn &fn) {
  try {
    fn();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

/// A fresh directory under the test's temporary directory.
inline std::string tempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/zrt-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::runtime_error("mkdtemp failed");
  return buf.data();
}

inline std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.')
      names.push_back(e->d_name);
  closedir(d);
  return names;
}

inline std::string bytesOf(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4);
}

/// A program manifest of one partition of 10 elements at `stage` on
/// `world` ranks.
inline nlohmann::json tinyManifest(int stage, int world) {
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

} // namespace zrt_test

#endif // ZRT_TEST_DRIVER_TEST_UTIL_H
