//===- Calls.h - What the step's calls share --------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The calls generated step functions make are written once for both
// backends (Program.cpp says how), one concern per file of this folder.
// This header holds what several of them use, and declares the
// implementations behind abi.def's ZRT_COLLECTIVE entries, whose C symbols
// Program.cpp generates from the table.
//
//===----------------------------------------------------------------------===//

#ifndef ZRT_PROGRAM_CALLS_H
#define ZRT_PROGRAM_CALLS_H

#include "zero_rt/program.h"

#include "Collectives/Collectives.h"
#include "Collectives/Flight.h"
#include "Collectives/Groups.h"
#include "Device/Device.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"
#include "Program/Manifest.h"
#include "Support/Support.h"

#include <cstdint>
#include <vector>

namespace zrt::program {

/// Element n of a buffer in partition `part`'s compute dtype.
inline char *element(char *base, int64_t n, const PartitionInfo &part) {
  return base + n * part.computeBytes;
}

/// The parameters of partition p with a weight decay of their own, as
/// zrt_update's decay ranges of this rank's owned elements (parameters are laid
/// out in offset order).
struct DecayRanges {
  std::vector<int64_t> ranges;
  std::vector<double> decays;
};

DecayRanges decayRanges(const zrt_ctx &ctx, int32_t p,
                        const PartitionInfo &part);

/// The Group the step's collectives run over: the world, in one level or
/// two (Groups.h).
inline Group &worldGroup(zrt_ctx *ctx) {
  return groupOf(ctx->comm, ZRT_RANKS_GROUP);
}

/// The Group partition `part`'s collectives run over: an expert partition's
/// over the rank's expert replica set (the ranks holding the same experts,
/// member j owning shard j), the others over worldGroup.
inline Group &partitionGroup(zrt_ctx *ctx, const PartitionInfo &part) {
  return part.expert ? groupOf(ctx->comm, ZRT_RANKS_EXPERT_REPLICAS)
                     : worldGroup(ctx);
}

/// Records a collective over `group` in the flight recorder before it is
/// issued; returns its sequence number. The test hook ZRT_TEST_SKIP_COLLECTIVE
/// stops this rank here instead, waiting (as the watchdog sees it) forever.
int64_t record(zrt_ctx *ctx, const char *what, CommKind kind, int32_t setKind,
               zrt_rank_set set, int64_t bytes);

inline int64_t record(zrt_ctx *ctx, const char *what, CommKind kind,
                      const Group &group, int64_t bytes) {
  return record(ctx, what, kind, group.kind, group.set, bytes);
}

/// zrt_update's schedule: null for a constant learning rate.
inline const zrt_lr_schedule *lrSchedule(const Manifest &m) {
  return m.schedule.kind == ZRT_LR_CONSTANT ? nullptr : &m.schedule;
}

/// The manifest's optimizer: its kind, state precision and the
/// hyper-parameters of its rows.
zrt_optimizer optimizerOf(const Manifest &m);

/// The update of partition p's owned elements: its compute dtype, the
/// context's optimizer step, schedule and clipping, `stats`, `skip` and the
/// decay ranges `decay` (which must outlive it). Each body sets the
/// gradient, masters, parameters, states and count it updates.
zrt_update updateOf(const zrt_ctx &ctx, const PartitionInfo &part,
                    const float *stats, int32_t skip, const DecayRanges &decay);

/// Sets `u`'s states to partition p's state buffers of the manifest's
/// optimizer, in its rows' order (null where the partition has none).
void setStates(const zrt_ctx &ctx, int32_t p, zrt_update &u);

// The implementations of abi.def's collectives, one per row, with the
// parameters of its C entry.
#define ZRT_COLLECTIVE(name, impl, ret, params, args) ret impl params;
#include "zero_rt/abi.def"

} // namespace zrt::program

#endif // ZRT_PROGRAM_CALLS_H
