//===- Checkpoint.h - Universal sharded checkpoints -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The host side of checkpoints, without MPI or device memory: the format of
// manifest.json and the rank files, and the remap that makes a checkpoint
// universal. A checkpoint records each parameter's name, shape, group
// (partition) and offset in the group's flat layout, and each rank file
// holds that rank's owned range of every group's masters and Adam moments
// (rank r owns [r * shard, (r + 1) * shard), everything at stage 0). Any
// element of any parameter is therefore found by name, whatever world size,
// stage or grouping saved it: resharding is a copy of ranges. The training
// driver (State.cpp) reads its own rank's ranges through it; zero-ckpt
// inspects, consolidates and reshards whole checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CHECKPOINT_H
#define ZERO_RT_CHECKPOINT_H

#include "Files.h"
#include "Program.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zrt {

/// 3: manifest.json records the parameters (name, shape, group, offset), the
/// precision and the optimizer, so that any layout can load it.
constexpr int kCheckpointFormat = 3;
/// The buffers a checkpoint keeps, in rank-file order; params are re-derived
/// from the masters (or are the masters).
constexpr BufferKind kSavedBuffers[] = {kMaster, kExpAvg, kExpAvgSq};

/// DIR/step_N, the directory of step N's checkpoint under `root`.
std::string checkpointDir(const std::string &root, int64_t step);
/// "rank_R.bin".
std::string rankFileName(int rank);
/// The CRC-32 of a rank file without its trailer (which is this value), as
/// the manifest records it.
uint32_t rankFileCrc(const std::string &bytes);

/// The text of a checkpoint manifest.json: `manifest` plus "manifest_crc32",
/// the CRC-32 of the compact JSON dump of everything else.
std::string sealManifest(nlohmann::json manifest);
/// Parses a manifest.json and verifies its format and checksum; returns it
/// without the checksum. Throws a message starting with `where`.
nlohmann::json openManifest(const std::string &text, const std::string &where);

/// What a rank file's header records besides its layout: the training state
/// every rank shares.
struct TrainingState {
  int64_t step = 0;
  /// Global batch rows consumed from the data stream.
  int64_t dataPosition = 0;
  /// Adam's t (skipped steps do not count).
  int64_t adamSteps = 0;
  /// The loss scaler as JSON (its fields by name).
  nlohmann::json lossScaler;
};

/// The bytes of rank `rank`'s file of a checkpoint of program `m` saved on
/// `world` ranks: a header (layout and `state`) and, per group and saved
/// buffer, a section that `fill` writes (it gets the group, the buffer and
/// the section's bytes, zeroed; masters are the padded shard, the whole
/// group at stage 0, also when the params are the masters).
std::string
packRankFile(const Manifest &m, int rank, int world, const TrainingState &state,
             const std::function<void(int32_t group, BufferKind kind, char *dst,
                                      int64_t bytes)> &fill);

/// A rank file as written, for the checkpoint manifest.
struct SavedFile {
  uint32_t crc = 0;
  uint64_t bytes = 0;
};

/// The manifest.json of a checkpoint of program `m` on `world` ranks at
/// `step` whose rank files are `files` (sealed: sealManifest's text).
std::string checkpointManifest(const Manifest &m, int world, int64_t step,
                               const std::vector<SavedFile> &files);

/// One parameter as a checkpoint records it.
struct SavedParam {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  /// Its group, an index into CheckpointReader::groups, and its element
  /// offset in the group's flat layout.
  int32_t group = -1;
  int64_t offset = 0;
  /// Rows without padding (-1: not padded), as ParamInfo::rows.
  int64_t rows = -1;
};

/// One group (partition) as a checkpoint records it.
struct SavedGroup {
  std::string name;
  int64_t numel = 0, shardNumel = 0;
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
  std::string computeDtype, scheduleHash;
  std::vector<SavedParam> params;
  std::vector<SavedGroup> groups;

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
  /// element.
  void read(size_t param, BufferKind kind, int64_t begin, int64_t end,
            float *out, int prefer = 0);
  /// Sets the parameter table (of a format-2 checkpoint, which has none).
  void setParams(std::vector<SavedParam> table);
  /// The index of the parameter named `name`, or -1.
  int64_t find(const std::string &name) const;
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
  /// check(), keeping the file it read (when sound) in `file`.
  std::string verify(int rank, CheckpointFile &file) const;

  std::string stepDir, whereText;
  nlohmann::json json_;
  std::map<std::string, size_t> byName;
  std::map<int, RankFile> ranks;
};

/// The parameters of program `m` as a checkpoint records them.
std::vector<SavedParam> savedParams(const Manifest &m);

/// Throws, naming the checkpoint, unless program `m` can load it: the same
/// parameters (names and shapes, in order; the message names the first that
/// differs), compute dtype and optimizer settings. World size, stage and
/// grouping may differ.
/// A format-2 checkpoint records no parameters: it takes `m`'s when `m` is
/// the program that saved it.
void checkSameModel(CheckpointReader &ckpt, const Manifest &m);

/// The host buffer `kind` of group `p` of program `m` holds on rank `rank`:
/// its owned layout range read from `ckpt` by parameter name (elements that
/// no parameter covers, the padding, are zero). `out` gets the owned range's
/// size.
void remapOwned(CheckpointReader &ckpt, const Manifest &m, int32_t p, int rank,
                BufferKind kind, std::vector<float> &out);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_H
