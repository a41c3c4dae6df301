//===- State.h - Model state outside the step functions ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The parameters and optimizer states of a rank between steps: their
// initialization and export, and copies between host memory and a
// partition's buffers wherever those live (tensor memory, the host arena or
// a swap file), which checkpoints use too. Functions marked "local" touch
// only this rank and throw std::runtime_error; "collective" ones must be
// called on every rank.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_STATE_H
#define ZERO_RT_STATE_H

#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "Program/Manifest.h"

#include <cstdint>
#include <vector>

namespace zrt {

/// Local: fills the fp32 masters this rank owns (unless the fp32 params are
/// the masters or the partition is frozen) and its params buffers (full at
/// stages 0-2, the shard at stage 3) from the deterministic initializer, or
/// from `weights` when given (wanted tensor k is parameter k), of which it
/// reads only the elements this rank keeps; zeroes moments and gradients.
void initializeParameters(zrt_ctx &ctx, uint64_t seed, WeightFiles *weights);

/// Collective: the fp32 masters of every parameter in declaration order
/// (a frozen 16-bit one widened exactly), on rank 0 (empty elsewhere).
std::vector<Tensor> gatherParameters(zrt_ctx &ctx);

/// Local: zeroes buffer `kind` of partition `p` (if it has one).
void zeroBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind);
/// Local: copies `bytes` between host memory and buffer `kind` of partition
/// `p` (at `at`), wherever the buffer lives: a buffer in the swap file is
/// read or written from its start (`at` is null) through the swap buffers.
void storeBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind, void *at,
                 const void *src, int64_t bytes);
void loadBuffer(const zrt_ctx &ctx, int32_t p, BufferKind kind, void *dst,
                const void *at, int64_t bytes);
/// Local: casts this rank's owned masters into its params (the owned slice
/// of the full buffer at stages 0-2, the shard at stage 3), unless they are
/// the params or the partition is frozen (it has no masters).
void castOwnedParams(zrt_ctx &ctx, int32_t p);
/// The buffer that holds partition `p`'s owned masters: kMaster, or kParams
/// when the fp32 params are the masters.
BufferKind masterKind(const zrt_ctx &ctx, int32_t p);
/// Local: this rank's owned fp32 values of partition `p` (as many floats as
/// it owns) into `dst`: its masters, or a frozen 16-bit partition's params
/// widened exactly.
void loadOwnedMasters(const zrt_ctx &ctx, int32_t p, float *dst);
/// Local: `count` of those values from the `begin`th on.
void loadOwnedMasterRange(const zrt_ctx &ctx, int32_t p, int64_t begin,
                          int64_t count, float *dst);
/// Collective: the fp32 values of parameters `list` (indices of the
/// manifest's params, not split over expert-parallel ranks), as
/// gatherParameters gives them, on `root` (-1: every rank; elsewhere
/// tensors without data). Only the tensors themselves are allocated.
std::vector<Tensor>
gatherParameterList(zrt_ctx &ctx, const std::vector<int32_t> &list, int root);
/// Local: the reverse: the masters, or a frozen 16-bit partition's owned
/// params rounded from `src` as the cast kernel rounds.
void storeOwnedMasters(zrt_ctx &ctx, int32_t p, const float *src);

} // namespace zrt

#endif // ZERO_RT_STATE_H
