//===- Rank.h - This rank's part of a checkpoint ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What a running rank saves and restores: its owned masters and Adam
// moments, wherever they live, and the training state (step, data position,
// Adam's step count, loss scaler). The driver (Driver.cpp) runs these on
// every rank and agrees on the outcome.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CHECKPOINT_RANK_H
#define ZERO_RT_CHECKPOINT_RANK_H

#include "Checkpoint/Format.h"
#include "Program/Manifest.h"

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

/// Local: writes DIR/rank_R.bin atomically, for a rank of the first MiCS
/// shard group (every rank without MiCS), as a checkpoint of that many
/// ranks.
SavedFile writeRankCheckpoint(const zrt_ctx &ctx, const std::string &dir,
                              const Progress &progress);
/// Local (rank 0): writes DIR/manifest.json of the ranks that saved `files`,
/// then points root/latest at it.
void writeCheckpointManifest(const zrt_ctx &ctx, const std::string &root,
                             const std::string &dir, const Progress &progress,
                             const std::vector<SavedFile> &files);
/// Local: the step directory `path` names (itself, or what path/latest
/// names), verified to be of this program's model, dtype and optimizer;
/// loads this rank's owned ranges from whichever ranks saved them (any
/// world size, stage or grouping).
Progress readCheckpoint(zrt_ctx &ctx, const std::string &path);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_RANK_H
