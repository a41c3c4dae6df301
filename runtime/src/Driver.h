//===- Driver.h - Training driver internals ---------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Model state outside the step functions: initialization, safetensors
// import/export and sharded checkpoints (State.cpp), used by the training
// loop (Driver.cpp). Functions marked "local" touch only this rank and
// throw std::runtime_error; "collective" ones must be called on every rank.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DRIVER_H
#define ZERO_RT_DRIVER_H

#include "Checkpoint.h"
#include "Files.h"
#include "Program.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zrt {

/// Where training stands between steps.
struct Progress {
  /// Steps completed.
  int64_t step = 0;
  /// Global batch rows consumed from the data stream.
  int64_t dataPosition = 0;
  /// After a resume from another layout: what saved it (else empty).
  std::string resharded;
};

/// Local: fills the fp32 masters this rank owns (unless the fp32 params are
/// the masters) and its params buffers (full at stages 0-2, the shard at
/// stage 3) from the deterministic initializer,
/// or from `tensors` when given (every parameter by name, F32, same shape);
/// zeroes moments and gradients.
void initializeParameters(zrt_ctx &ctx, uint64_t seed,
                          const std::vector<Tensor> *tensors);

/// Collective: the fp32 masters of every parameter in declaration order,
/// on rank 0 (empty elsewhere).
std::vector<Tensor> gatherParameters(zrt_ctx &ctx);

/// Local: writes DIR/rank_R.bin atomically.
SavedFile writeRankCheckpoint(const zrt_ctx &ctx, const std::string &dir,
                              const Progress &progress);
/// Local (rank 0): writes DIR/manifest.json, then points root/latest at it.
void writeCheckpointManifest(const zrt_ctx &ctx, const std::string &root,
                             const std::string &dir, const Progress &progress,
                             const std::vector<SavedFile> &files);
/// Local: the step directory `path` names (itself, or what path/latest
/// names), verified to be of this program's model, dtype and optimizer;
/// loads this rank's owned ranges from whichever ranks saved them (any
/// world size, stage or grouping).
Progress readCheckpoint(zrt_ctx &ctx, const std::string &path);

} // namespace zrt

#endif // ZERO_RT_DRIVER_H
