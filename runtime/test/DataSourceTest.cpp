//===- DataSourceTest.cpp - The driver's input data -----------------------===//
//
// Part of the zero-mlir project.
//
// Token files and arrays as the driver reads them: label conventions,
// ignored labels, and a schedule as long as the run.
//
//===----------------------------------------------------------------------===//

#include "DriverTestUtil.h"

using namespace zrt;
using namespace zrt_test;

namespace {

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
  auto data =
      openArrayData(m, dir + "/ids.npy", dir + "/labels.npy", "", 2, {});
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
              openArrayData(strict, dir + "/ids.npy", dir + "/labels.npy", "",
                            2, {});
            }),
            "'" + dir +
                "/labels.npy': label -100 at row 0, column 3 is outside the "
                "model's classes [0, 10)");
  // The ignored index is a label only: as a token id it is refused.
  writeBytes(dir + "/bad-ids.npy", writeNpy(labels));
  EXPECT_EQ(errorOf([&] {
              openArrayData(m, dir + "/bad-ids.npy", dir + "/labels.npy", "", 2,
                            {});
            }),
            "'" + dir +
                "/bad-ids.npy': token -100 at row 0, column 3 is outside the "
                "model's vocabulary [0, 10)");
  std::system(("rm -rf " + dir).c_str());
}

TEST(DataSourceTest, PackedRowsPositions) {
  std::string dir = tempDir();
  // Ids, positions and labels [2, 4] of i64, by their roles (the positions
  // second, as a traced forward's position_ids), positions below 4.
  nlohmann::json j = tinyManifest(0, 1);
  auto input = [](int64_t offset, int64_t bound, const char *role) {
    return nlohmann::json{{"shape", {2, 4}},
                          {"dtype", "i64"},
                          {"offset", offset},
                          {"index_bound", bound},
                          {"role", role}};
  };
  nlohmann::json y = input(128, 10, "labels");
  y["ignored_index"] = -100;
  j["inputs"] = {input(0, 10, "tokens"), input(64, 4, "positions"), y};
  j["plan"]["arena_bytes"] = 192;
  j["labels"] = "same_tokens";
  Manifest m = Manifest::parse(j.dump());
  auto i64 = [](std::vector<int64_t> v, int64_t rows) {
    return writeNpy(NpyArray{"<i8", {rows, 4}, 8, rawOf(v)});
  };
  writeBytes(dir + "/ids.npy", i64({1, 2, 3, 4, 5, 6, 7, 8}, 2));
  writeBytes(dir + "/labels.npy", i64({-100, 2, -100, 4, -100, 6, 7, 8}, 2));
  // Row 0 holds documents of 2 and 2 tokens, row 1 one of 4.
  writeBytes(dir + "/pos.npy", i64({0, 1, 0, 1, 0, 1, 2, 3}, 2));
  auto data = openArrayData(m, dir + "/ids.npy", dir + "/labels.npy",
                            dir + "/pos.npy", 2, {});
  std::vector<char> arena(192);
  zrt_ctx ctx;
  ctx.step = arena.data();
  data->load(ctx, 0);
  std::vector<int64_t> x(8), pos(8), labels(8);
  std::memcpy(x.data(), arena.data(), 64);
  std::memcpy(pos.data(), arena.data() + 64, 64);
  std::memcpy(labels.data(), arena.data() + 128, 64);
  EXPECT_EQ(x, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 1, 0, 1, 0, 1, 2, 3}));
  EXPECT_EQ(labels, (std::vector<int64_t>{-100, 2, -100, 4, -100, 6, 7, 8}));

  // Refused naming the file and the place: no positions, positions of
  // another shape, a negative position, one past the row.
  auto open = [&](const std::string &positions) {
    return errorOf([&] {
      openArrayData(m, dir + "/ids.npy", dir + "/labels.npy", positions, 2, {});
    });
  };
  EXPECT_NE(open("").find("--inputs/--labels: the model reads the positions "
                          "of packed rows (an input of [2, 4]); pass "
                          "--positions P.npy"),
            std::string::npos);
  writeBytes(dir + "/short.npy", i64({0, 1, 2, 3}, 1));
  EXPECT_EQ(open(dir + "/short.npy"),
            "'" + dir +
                "/short.npy': positions of shape [1, 4], the token "
                "ids in '" +
                dir +
                "/ids.npy' are [2, 4] (one position "
                "per token)");
  writeBytes(dir + "/negative.npy", i64({0, 1, 0, 1, 0, -1, 2, 3}, 2));
  EXPECT_EQ(open(dir + "/negative.npy"),
            "'" + dir +
                "/negative.npy': position -1 at row 1, column 1 is "
                "outside the model's positions [0, 4)");
  writeBytes(dir + "/past.npy", i64({0, 1, 2, 4, 0, 1, 2, 3}, 2));
  EXPECT_EQ(open(dir + "/past.npy"),
            "'" + dir +
                "/past.npy': position 4 at row 0, column 3 is outside "
                "the model's positions [0, 4)");
  // A model of one document a row takes no positions.
  Manifest plain = tokenManifest("same_tokens", -100);
  EXPECT_NE(errorOf([&] {
              openArrayData(plain, dir + "/ids.npy", dir + "/labels.npy",
                            dir + "/pos.npy", 2, {});
            }).find("pos.npy': the model reads no positions"),
            std::string::npos);

  // A token file's windows are one document each: positions 0..T-1.
  writeBytes(dir + "/t8.bin",
             rawOf(std::vector<uint16_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  auto tokens = openTokenData(m, dir + "/t8.bin", 2, {});
  std::fill(arena.begin(), arena.end(), 0);
  tokens->load(ctx, 0);
  std::memcpy(pos.data(), arena.data() + 64, 64);
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
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
