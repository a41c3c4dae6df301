//===- Reader.h - Reading checkpoints of any layout -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// An opened checkpoint, and the remap that makes it universal: a program
// reads the ranges its layout owns by parameter name from whichever rank
// files hold them, whatever world size, stage or grouping saved them. The
// training driver reads its own rank's ranges through it (Rank.h);
// zero-ckpt inspects, consolidates and reshards whole checkpoints. Host
// only, without MPI or device memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CHECKPOINT_READER_H
#define ZERO_RT_CHECKPOINT_READER_H

#include "Checkpoint/Format.h"
#include "Program/Manifest.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace zrt {

/// One group (partition) as a checkpoint records it.
struct SavedGroup {
  std::string name;
  int64_t numel = 0, shardNumel = 0, paddedNumel = 0;
  /// Sharded over each expert replica set instead of the world.
  bool expert = false;
};

/// An opened checkpoint: the verified manifest.json of a step directory and
/// its rank files, each read (and checked against the manifest) when first
/// needed. Methods throw std::runtime_error naming the file.
class CheckpointReader {
public:
  /// `path`: a step directory, or a save directory whose `latest` names one.
  explicit CheckpointReader(const std::string &path);

  /// The step directory.
  const std::string &dir() const { return stepDir; }
  /// "checkpoint 'DIR'", how messages name it.
  const std::string &where() const { return whereText; }
  /// The manifest without its checksum.
  const nlohmann::json &manifest() const { return json_; }

  int format = 0, world = 0, stage = 0;
  int64_t step = 0;
  std::string scheduleHash;
  std::vector<SavedParam> params;
  std::vector<SavedGroup> groups;
  /// Expert parallelism as the checkpoint records it (1: none, or a
  /// checkpoint from before it recorded it; see checkExpertsRecorded) and
  /// where its expert sets lie (zero_rt/topology.h's ZRT_EXPERT_*).
  int64_t expertParallel = 1;
  int32_t expertPlacement = ZRT_EXPERT_CONTIGUOUS;
  /// The ranks' axes as far as the checkpoint's sharding goes: the world
  /// and its expert sets.
  zrt_mesh mesh() const;
  /// "experts split over P ranks (expert_parallel, PLACEMENT sets)" for
  /// messages; empty without expert parallelism.
  std::string expertText() const;
  /// Fails, naming `command`, when the checkpoint holds expert partitions
  /// it does not record: one from before checkpoints recorded expert
  /// parallelism, at stages 1-3 (a group sharded over fewer ranks than the
  /// world). Its rank files hold their own experts under the same names,
  /// which only the program that saved it can tell apart.
  void checkExpertsRecorded(const std::string &command) const;
  /// Parameter `param`'s shape as --export writes it: without padding rows,
  /// and of an expert-parallel one every expert (dimension 0 times
  /// expert_parallel).
  std::vector<int64_t> wholeShape(size_t param) const;
  /// Copies elements [begin, end) of parameter `param`'s whole tensor
  /// (wholeShape; an expert-parallel one's experts gathered from each
  /// expert set member in order) of buffer `kind` to `out`, as read().
  void readWhole(size_t param, BufferKind kind, int64_t begin, int64_t end,
                 float *out);
  /// The ranks whose files hold expert set member `member`'s experts, the
  /// j-th its shard j of an expert group (each one the whole group at
  /// stage 0).
  zrt_rank_set expertHolders(int64_t member) const;

  /// The path of rank `rank`'s file.
  std::string rankPath(int rank) const;
  /// Reads rank `rank`'s file and checks it against the manifest (size,
  /// CRC-32, its own trailer, rank, step and schedule); the empty string if
  /// it is sound, else why not.
  std::string check(int rank) const;
  /// Reads rank `rank`'s file (see check()) and names its first NaN or
  /// infinite value (parameter, buffer and element); the empty string if
  /// every saved value is finite.
  std::string nonFinite(int rank);
  /// The training state rank `rank`'s file records.
  TrainingState state(int rank);
  /// Copies elements [begin, end) of parameter `param`'s buffer `kind`
  /// (master, exp_avg or exp_avg_sq) to `out`. Where several ranks hold them
  /// (stage 0), rank `prefer` is read if it exists, else rank 0. A NaN or
  /// infinite value is refused, naming the rank file, parameter and
  /// element. Saved shard i is read from rank file first + i * stride (an
  /// expert partition's shards are its expert set member's ranks').
  void read(size_t param, BufferKind kind, int64_t begin, int64_t end,
            float *out, int prefer = 0, int first = 0, int stride = 1);
  /// Copies values [begin, end) of parameter `param`'s layout state `kind`
  /// (`layoutStates`: its elements, or a factored tensor's statistics; see
  /// StateRun) to `out`, from the rank files whose sections hold them, as
  /// read() does for element-wise buffers; of an expert-parallel parameter
  /// expert set member `member`'s experts.
  void readState(size_t param, BufferKind kind, int64_t begin, int64_t end,
                 float *out, int64_t member = 0);
  /// The runs of rank `rank`'s section of layout state `kind` of group
  /// `group` in this checkpoint's layout.
  const std::vector<StateRun> &stateRuns(int rank, int32_t group,
                                         BufferKind kind);
  /// The `bytes` of rank `rank`'s section of buffer `kind` of group
  /// `group`, saved as the buffer's own bytes (8-bit states); fails naming
  /// the file when it lacks it or its size differs.
  std::string_view rawSection(int rank, const std::string &group,
                              BufferKind kind, int64_t bytes);
  /// Whether it holds int8 optimizer states (its optimizer's `states`):
  /// their sections are the buffers' own bytes.
  bool int8States = false;
  /// How its optimizer lays its states out by each rank's layout
  /// (optimizers::layoutStatesText: Muon's packed by part, Adafactor's
  /// factored), nullptr when it does not: their sections are the buffers'
  /// own bytes too.
  const char *layoutStates = nullptr;
  /// Its optimizer (Adam when it records none).
  optimizers::Kind optimizer = optimizers::Kind::Adam;
  /// Sets the parameter table (of a format-2 checkpoint, which has none).
  void setParams(std::vector<SavedParam> table);
  /// The index of the parameter named `name`, or -1.
  int64_t find(const std::string &name) const;
  /// The parameters' compute dtypes for messages: "bf16" when they share
  /// one, else each with its number of parameters ("bf16 for 3 parameters,
  /// f32 for 1").
  std::string computeDtypes() const;
  /// Drops the rank files read so far from memory.
  void release() { ranks.clear(); }

private:
  struct RankFile {
    nlohmann::json header;
    std::string payload;
    /// (group, buffer) -> (offset, bytes) in the payload.
    std::map<std::pair<int32_t, int>, std::pair<uint64_t, uint64_t>> sections;
  };
  RankFile &load(int rank);
  /// The shard of group `group` that rank `rank`'s file holds: its index in
  /// its expert replica set for an expert group, else its rank.
  int64_t shardIndex(int32_t group, int rank) const;
  /// The start of rank `rank`'s section of buffer `kind` of group `group`,
  /// which must hold at least `values` fp32 values (fails naming the file).
  const char *section(int rank, int32_t group, BufferKind kind,
                      int64_t values);
  /// check(), keeping the file it read (when sound) in `file`.
  std::string verify(int rank, CheckpointFile &file) const;

  std::string stepDir, whereText;
  nlohmann::json json_;
  std::map<std::string, size_t> byName;
  std::map<int, RankFile> ranks;
  std::map<std::tuple<int, int32_t, int>, std::vector<StateRun>> runs;
};

/// Throws, naming the checkpoint, unless program `m` can load it: the same
/// parameters (names, shapes and compute dtypes, in order; the message names
/// the first that differs) and optimizer settings. World size, stage and
/// grouping may differ.
/// A format-2 checkpoint records no parameters: it takes `m`'s when `m` is
/// the program that saved it.
void checkSameModel(CheckpointReader &ckpt, const Manifest &m);

/// The fp32 absmaxes at the start of an 8-bit state's section of `bytes`
/// (one per block of its elements, the last one possibly short).
int64_t absmaxBlocks(int64_t bytes);

/// The host buffer `kind` of group `p` of program `m` holds on rank `rank`:
/// its owned layout range read from `ckpt` by parameter name (elements that
/// no parameter covers, the padding, are zero). `out` gets the owned range's
/// size.
/// Layout state `kind` of group `p` as rank `rank` of program `m` keeps
/// it (layoutStateRuns over its owned elements, the buffer's size), each
/// parameter's values read by name from `ckpt` (readState).
std::vector<float> loadLayoutState(CheckpointReader &ckpt, const Manifest &m,
                                   int32_t p, int rank, BufferKind kind);
void remapOwned(CheckpointReader &ckpt, const Manifest &m, int32_t p, int rank,
                BufferKind kind, std::vector<float> &out);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_READER_H
