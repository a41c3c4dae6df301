//===- Labels.cpp - Micro-steps, labels and counts ------------------------===//
//
// Part of the zero-mlir project.
//
// Where the step is among its micro-steps, and the counts behind the
// token mean: labels per micro-batch summed over the world, and a router's
// expert counts.
//
//===----------------------------------------------------------------------===//

#include "Program/Calls.h"

#include <mpi.h>

#include <vector>

using namespace zrt;
using namespace zrt::program;

extern "C" int32_t zrt_ctx_last_micro_step(zrt_ctx *ctx) {
  return ctx->micro + 1 >= ctx->manifest->accumulationSteps ? 1 : 0;
}

extern "C" int32_t zrt_ctx_first_micro_step(zrt_ctx *ctx) {
  return ctx->micro == 0 ? 1 : 0;
}

extern "C" void zrt_ctx_count_labels(zrt_ctx *ctx, int32_t labelType,
                                     const void *labels, int64_t n,
                                     int64_t ignoreIndex) {
  if (n < 0)
    fatal("zrt_ctx_count_labels: %lld labels", (long long)n);
  // The labels are small; a GPU backend counts a host copy.
  int64_t bytes = n * (labelType == ZRT_I32 ? 4 : 8);
  std::vector<char> host(static_cast<size_t>(bytes));
  {
    WaitScope watched(ctx->waitState, "the labels to count");
    device::download(host.data(), labels, bytes);
  }
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t label =
        labelType == ZRT_I32
            ? int64_t(reinterpret_cast<const int32_t *>(host.data())[i])
            : reinterpret_cast<const int64_t *>(host.data())[i];
    count += ignoredLabel(label, 1, ignoreIndex) ? 0 : 1;
  }
  if (ctx->micro < 0 ||
      ctx->micro >= static_cast<int32_t>(ctx->microLabels.size()))
    fatal("zrt_ctx_count_labels: micro batch %d of %zu", int(ctx->micro),
          ctx->microLabels.size());
  ctx->microLabels[ctx->micro] = count;
  ctx->countsLabels = true;
}

void program::allReduceLabels(zrt_ctx *ctx, int64_t *count) {
  int64_t local = 0;
  for (int64_t c : ctx->microLabels)
    local += c;
  {
    const char *what = "the label count all-reduce";
    int64_t seq = record(ctx, what, kAllReduce, ZRT_RANKS_WORLD,
                         zrt_rank_set{0, 1, ctx->world}, sizeof(int64_t));
    WaitScope watched(ctx->waitState, what);
    ctx->flight.waited(seq);
    MPI_Allreduce(&local, &ctx->stepLabels, 1, MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    ctx->flight.done(seq);
  }
  ctx->noLabels = ctx->stepLabels == 0;
  device::upload(count, &ctx->stepLabels, sizeof(int64_t));
}

/// A few int64 values (a router's expert counts) summed over the world
/// through the host, as the label count: exact, and small.
void program::allReduceCounts(zrt_ctx *ctx, const int64_t *in, int64_t *out,
                              int64_t n, int32_t slot) {
  if (n < 0 || slot >= 0)
    fatal("zrt_ctx_all_reduce_counts: %lld values, slot %d", (long long)n,
          int(slot));
  std::vector<int64_t> local(static_cast<size_t>(n)),
      total(static_cast<size_t>(n));
  int64_t bytes = n * int64_t(sizeof(int64_t));
  const char *what = "the expert count all-reduce";
  {
    WaitScope watched(ctx->waitState, "the expert counts");
    device::download(local.data(), in, bytes);
  }
  {
    int64_t seq = record(ctx, what, kAllReduce, ZRT_RANKS_WORLD,
                         zrt_rank_set{0, 1, ctx->world}, bytes);
    // Counted as the plan counts zero.all_reduce over the world.
    countAllReduce(groupOf(ctx->comm, ZRT_RANKS_WORLD), n,
                   int64_t(sizeof(int64_t)));
    WaitScope watched(ctx->waitState, what);
    ctx->flight.waited(seq);
    MPI_Allreduce(local.data(), total.data(), int(n), MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    ctx->flight.done(seq);
  }
  device::upload(out, total.data(), bytes);
}

extern "C" void zrt_ctx_label_share(zrt_ctx *ctx, double divisor, float *out) {
  float share = 1.0f;
  if (!ctx->evaluating) {
    if (ctx->micro < 0 ||
        ctx->micro >= static_cast<int32_t>(ctx->microLabels.size()))
      fatal("zrt_ctx_label_share: micro batch %d of %zu", int(ctx->micro),
            ctx->microLabels.size());
    int64_t c = ctx->microLabels[ctx->micro];
    share = ctx->stepLabels
                ? float(double(c) * divisor / double(ctx->stepLabels))
                : 0.0f;
  }
  device::storeF32(out, share);
}

extern "C" void zrt_ctx_count_sum(zrt_ctx *ctx, const float *value,
                                  int32_t index) {
  int32_t micros = ctx->manifest->accumulationSteps;
  if (index < 0 || ctx->micro < 0 || ctx->micro >= micros)
    fatal("zrt_ctx_count_sum: sum %d of micro batch %d of %d", int(index),
          int(ctx->micro), int(micros));
  float v = 0.0f;
  {
    WaitScope watched(ctx->waitState, "the sum to count");
    device::download(&v, value, sizeof(float));
  }
  if (ctx->microSums.size() <= size_t(index))
    ctx->microSums.resize(size_t(index) + 1);
  std::vector<double> &sums = ctx->microSums[size_t(index)];
  sums.resize(size_t(micros), 0.0);
  sums[size_t(ctx->micro)] = double(v);
}

void program::allReduceSum(zrt_ctx *ctx, int32_t index, float *out) {
  if (index < 0 || size_t(index) >= ctx->microSums.size())
    fatal("zrt_ctx_all_reduce_sum: sum %d of %zu counted", int(index),
          ctx->microSums.size());
  // In the micro batches' order, so that every run adds the same way.
  double local = 0.0;
  for (double v : ctx->microSums[size_t(index)])
    local += v;
  if (ctx->stepSums.size() <= size_t(index))
    ctx->stepSums.resize(size_t(index) + 1, 0.0);
  {
    const char *what = "the sum all-reduce";
    int64_t seq = record(ctx, what, kAllReduce, ZRT_RANKS_WORLD,
                         zrt_rank_set{0, 1, ctx->world}, sizeof(double));
    WaitScope watched(ctx->waitState, what);
    ctx->flight.waited(seq);
    MPI_Allreduce(&local, &ctx->stepSums[size_t(index)], 1, MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    ctx->flight.done(seq);
  }
  device::storeF32(out, float(ctx->stepSums[size_t(index)]));
}

extern "C" void zrt_ctx_step_sum(zrt_ctx *ctx, int32_t index, float *out) {
  // The evaluation step's count function records its batch as micro batch
  // 0.
  const std::vector<double> *sums = ctx->evaluating
                                        ? (size_t(index) < ctx->microSums.size()
                                               ? &ctx->microSums[size_t(index)]
                                               : nullptr)
                                        : &ctx->stepSums;
  size_t at = ctx->evaluating ? 0 : size_t(index);
  if (index < 0 || !sums || at >= sums->size())
    fatal("zrt_ctx_step_sum: sum %d was not counted", int(index));
  device::storeF32(out, float((*sums)[at]));
}

extern "C" void zrt_ctx_micro_share(zrt_ctx *ctx, double divisor, float *out) {
  device::storeF32(out, ctx->evaluating ? 1.0f : float(1.0 / divisor));
}
