//===- Format.h - The files of a checkpoint ---------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Checkpoints are universal: a checkpoint records each parameter's name,
// shape, group (partition) and offset in the group's flat layout, and each
// rank file holds that rank's owned range of every group's masters and Adam
// moments (rank r owns [r * shard, (r + 1) * shard), everything at stage 0).
// Any element of any parameter is therefore found by name, whatever world
// size, stage or grouping saved it: resharding is a copy of ranges
// (Reader.h).
//
// This file is what a checkpoint's files hold: a step directory DIR/step_N
// holds rank_R.bin per rank and manifest.json, written last. Host only,
// without MPI or device memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CHECKPOINT_FORMAT_H
#define ZERO_RT_CHECKPOINT_FORMAT_H

#include "Program/Manifest.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// 3: manifest.json records the parameters (name, shape, group, offset,
/// and `frozen` for a frozen one), the precision and the optimizer, so that
/// any layout can load it.
constexpr int kCheckpointFormat = 3;

/// The keys of a checkpoint's JSON objects (zero_rt/checkpoint.def):
/// checkpoint::ManifestFile::step is manifest.json's "step".
namespace checkpoint {

/// A key of an object and what it means.
struct Key {
  const char *key;
  const char *what;
};

// clang-format off
#define ZRT_CHECKPOINT_OBJECT(name) struct name {
#define ZRT_CHECKPOINT_KEY(id, key, presence, what)                            \
  static constexpr const char *id = key;
#define ZRT_CHECKPOINT_END(name) };
#include "zero_rt/checkpoint.def"

/// The keys of object O, in the table's order.
template <typename O>
struct Keys;
#define ZRT_CHECKPOINT_OBJECT(name)                                            \
  template <> struct Keys<name> {                                              \
    static constexpr Key values[] = {
#define ZRT_CHECKPOINT_KEY(id, key, presence, what)                            \
  {key, what},
#define ZRT_CHECKPOINT_END(name) }; };
#include "zero_rt/checkpoint.def"
// clang-format on

} // namespace checkpoint

/// The buffers a checkpoint keeps, in rank-file order: the masters and the
/// optimizers' states (optimizers.def); params are re-derived from the
/// masters (or are the masters).
constexpr BufferKind kSavedBuffers[] = {
    kMaster,
#define ZRT_OPTIMIZER_BUFFER(bufferId, key) bufferId,
#include "zero_rt/optimizers.def"
};
/// Whether a checkpoint holds buffer `kind` (of kSavedBuffers) of group
/// `p`: every group's masters, and the optimizer's states (those the
/// partition has) of the groups that train.
inline bool isSaved(const PartitionInfo &p, BufferKind kind) {
  return kind == kMaster || (!p.frozen && p.hasBuffer(kind));
}

/// Whether a checkpoint of program `m` saves buffer `kind` as its own
/// bytes: block-wise 8-bit states (their absmaxes and codes), which
/// re-quantising would not reproduce, and states laid out by each rank's
/// layout (optimizers.def's ZRT_OPTIMIZER_LAYOUT_STATES).
inline bool isRawState(const Manifest &m, BufferKind kind) {
  return (m.int8States() ||
          optimizers::layoutStatesText(m.optimizer) != nullptr) &&
         optimizers::isStateBuffer(kind);
}

/// DIR/step_N, the directory of step N's checkpoint under `root`.
std::string checkpointDir(const std::string &root, int64_t step);
/// Whether `name` is a step directory's (step_N for N >= 0).
bool isStepName(const char *name);
/// "rank_R.bin".
std::string rankFileName(int rank);
/// The CRC-32 of a rank file without its trailer (which is this value), as
/// the manifest records it.
uint32_t rankFileCrc(const std::string &bytes);

//===----------------------------------------------------------------------===//
// Rank files
//===----------------------------------------------------------------------===//

/// A rank's checkpoint: the magic "ZRTCKPT1", the 8-byte little-endian
/// length of a JSON header, the header, the payload, and a 4-byte
/// little-endian CRC-32 of everything before it.
struct CheckpointFile {
  std::string header;
  std::string payload;
};

std::string packCheckpoint(const CheckpointFile &file);
/// Verifies the magic, lengths and checksum; throws naming `name`.
CheckpointFile unpackCheckpoint(const std::string &bytes,
                                const std::string &name);

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
/// group at stage 0, also when the params are the masters). A frozen group
/// has only its masters' section (isSaved).
std::string
packRankFile(const Manifest &m, int rank, int world, const TrainingState &state,
             const std::function<void(int32_t group, BufferKind kind, char *dst,
                                      int64_t bytes)> &fill);

//===----------------------------------------------------------------------===//
// manifest.json
//===----------------------------------------------------------------------===//

/// The text of a checkpoint manifest.json: `manifest` plus "manifest_crc32",
/// the CRC-32 of the compact JSON dump of everything else.
std::string sealManifest(nlohmann::json manifest);
/// Parses a manifest.json and verifies its format and checksum; returns it
/// without the checksum. Throws a message starting with `where`.
nlohmann::json openManifest(const std::string &text, const std::string &where);

/// A rank file as written, for the checkpoint manifest.
struct SavedFile {
  uint32_t crc = 0;
  uint64_t bytes = 0;
};

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
  /// The dtype it computes in ("f32", "bf16", "f16"): its group's. The
  /// masters and moments are saved in fp32 whatever it is.
  std::string computeDtype;
  /// It does not train: its values are saved (a 16-bit one widened
  /// exactly), it has no moments, and a program that trains it does not
  /// resume it (nor the reverse).
  bool frozen = false;
  /// Muon updates it whole: its momentum is packed apart from AdamW's
  /// moments (a layout state's part).
  bool muon = false;
  /// Split over the expert sets of this many ranks (1: not): `shape` is one
  /// member's experts, dimension 0 of the whole tensor this times its.
  int64_t expertParallel = 1;
};

/// `count` values of a layout state (optimizers.def's
/// ZRT_OPTIMIZER_LAYOUT_STATES) of parameter `param`, an index into the
/// table the runs were made from, from its value `begin` on, at value `at`
/// of a rank's section. A parameter's values are its elements for a state
/// kept element by element (a part's, or a vector's under a factored
/// state), and a factored tensor's row then column statistics
/// (zero_rt/adafactor.h's factorCount) otherwise.
struct StateRun {
  size_t param;
  int64_t begin, count, at;
};

/// The runs of one rank's section of layout state `kind` of optimizer
/// `optimizer` in group `group`, whose elements [begin, end) the rank owns,
/// in section order: the order in which the runtime's update packs them
/// (deviceMuon's parts, Adafactor's tensors by offset). Values of the
/// section outside every run (gaps, padding, the rest of the largest
/// rank's size) hold nothing.
std::vector<StateRun> layoutStateRuns(optimizers::Kind optimizer,
                                      BufferKind kind,
                                      const std::vector<SavedParam> &params,
                                      int32_t group, int64_t begin,
                                      int64_t end);
/// The values parameter `p` keeps of layout state `kind` (0 when it keeps
/// none: the other part's parameters, a frozen one).
int64_t layoutStateValues(optimizers::Kind optimizer, BufferKind kind,
                          const SavedParam &p);

/// The parameters of program `m` as a checkpoint records them.
std::vector<SavedParam> savedParams(const Manifest &m);
/// The layout of program `m`'s groups as a checkpoint records it.
nlohmann::json layoutJson(const Manifest &m);
/// The optimizer settings of program `m` that a resume must share.
/// `param_weight_decay` (the parameters with a weight decay of their own, by
/// name) is there only for a model with weight-decay groups.
nlohmann::json optimizerJson(const Manifest &m);
/// Hyper-parameter `p` of value `value` as optimizerJson records it, of its
/// row's type: true or false, an integer (an enum's number) or a number.
nlohmann::json hyperParamJson(optimizers::HyperParam p, double value);
/// The value of a hyper-parameter as optimizerJson records it (true is 1);
/// throws json's type_error for another JSON type.
double hyperParamValue(const nlohmann::json &j);

/// The manifest.json of a checkpoint of program `m` on `world` ranks at
/// `step` whose rank files are `files` (sealed: sealManifest's text).
std::string checkpointManifest(const Manifest &m, int world, int64_t step,
                               const std::vector<SavedFile> &files);

/// The Hugging Face model a checkpoint manifest records (a program
/// imported with zero-import --hf), if any; `where` names it in errors.
std::optional<manifest::HfModel> savedHfModel(const nlohmann::json &manifest,
                                              const std::string &where);

/// The PEFT model a checkpoint manifest records (a program with
/// #zero.peft), if any; `where` names it in errors.
std::optional<manifest::Peft> savedPeft(const nlohmann::json &manifest,
                                        const std::string &where);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_FORMAT_H
