//===- Layout.cpp - What a rank owns and keeps of a program ---------------===//
//
// Part of the zero-mlir project.
//
// The per-rank layout arithmetic of a compiled program: rank r owns
// [r * shard, (r + 1) * shard) of a partition's layout clipped to numel,
// everything at stage 0; and which optimizer states it keeps, in how many
// bytes.
//
//===----------------------------------------------------------------------===//

#include "Program/Manifest.h"
#include "Support/Support.h"

#include "zero_rt/optimizers.h"

#include <algorithm>
#include <optional>
#include <string_view>

using namespace zrt;

std::optional<double> Manifest::optimizerParam(std::string_view name) const {
  if (name == manifest::Optimizer::lrKey)
    return lr;
  if (std::optional<optimizers::HyperParam> p = optimizers::hyperParamOf(name))
    return hyperParam(*p);
  return std::nullopt;
}

bool Manifest::keepsState(BufferKind kind) const {
  if (!optimizers::hasState(optimizer, kind))
    return false;
  const char *gate = optimizers::stateGate(optimizer, kind);
  if (!gate)
    return true;
  std::optional<double> value = optimizerParam(gate);
  if (!value)
    fatal("optimizers.def: gate '%s' is not a manifest optimizer field", gate);
  return *value != 0.0;
}

int64_t Manifest::bufferBytes(const PartitionInfo &p, BufferKind kind) const {
  if (statePrecision != optimizers::StatePrecision::F32 &&
      optimizers::hasState(optimizer, kind))
    return optimizers::stateBufferBytes(optimizer, statePrecision, kind,
                                        p.counts[kind]);
  return p.counts[kind] * p.elementBytes(kind);
}

Range Manifest::shardRange(const PartitionInfo &p, int64_t shard) const {
  if (stage == 0)
    return {0, p.numel};
  return {std::min(shard * p.shardNumel, p.numel),
          std::min((shard + 1) * p.shardNumel, p.numel)};
}

Range Manifest::owned(const PartitionInfo &p, int rank) const {
  return shardRange(p, shardOf(p, rank));
}
