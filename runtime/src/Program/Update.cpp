//===- Update.cpp - The optimizer's step on the device --------------------===//
//
// Part of the zero-mlir project.
//
// The overflow check and the loss scale, and the update of a partition
// whose optimizer runs on the device: an element-wise optimizer's
// (zrt_optimizer_step by the manifest's kind), Muon's and Adafactor's.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/optimizers.h"

#include "Optimizer/Adafactor.h"
#include "Optimizer/ElementRules.h"
#include "Program/Calls.h"

#include <algorithm>
#include <optional>
#include <vector>

using namespace zrt;
using namespace zrt::program;

extern "C" void zrt_ctx_check_overflow(zrt_ctx *ctx, int32_t p, int32_t first,
                                       const float *lossScale, double divisor,
                                       float *stats) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_check_overflow");
  auto [grads, n] = ownedGrads(ctx, p, part);
  // Each partition's gradients in its own dtype, into one set of stats: a
  // non-finite value anywhere skips the whole step.
  device::checkOverflow(part.computeDtype, grads, n, lossScale, divisor, first,
                        stats);
}

void program::allReduceOverflowNorm(zrt_ctx *ctx, int32_t ranks,
                                    const float *in, float *out, int32_t slot) {
  // The group, or the set the program names: the expert-parallel set for
  // the expert partitions' stats at stage 0 under expert parallelism.
  Group &group = groupOf(ctx->comm, ranks);
  int64_t seq = record(ctx, "all_reduce stats", kAllReduce, group,
                       2 * int64_t(sizeof(float)));
  launch(ctx, slot, "all_reduce stats", allReduceStats(group, in, out), nullptr,
         seq);
}

extern "C" int32_t zrt_ctx_update_loss_scale(zrt_ctx *ctx, const float *stats) {
  float host[2];
  {
    WaitScope watched(ctx->waitState, "the overflow flag");
    device::download(host, stats, sizeof(host));
  }
  return updateLossScale(ctx, host);
}

zrt_optimizer program::optimizerOf(const Manifest &m) {
  using optimizers::Kind;
  zrt_optimizer o{};
  o.kind = int32_t(m.optimizer);
  o.states = int32_t(m.statePrecision);
  // Each of the kind's rows, by name: `lr` or a ZRT_HYPER_PARAM row, as
  // optimizers.h asserts (Muon's and Adafactor's bodies read the manifest
  // themselves, but their rows are filled all the same).
  auto value = [&](const char *name) {
    std::optional<double> v = m.optimizerParam(name);
    if (!v)
      fatal("the manifest's optimizer has no '%s'", name);
    return *v;
  };
#define ZRT_OPTIMIZER_PARAM(id, name, key, default)                            \
  if (m.optimizer == Kind::id)                                                 \
    optimizers::ParamsOf<Kind::id>::get(o).name = value(#name);
#include "zero_rt/optimizers.def"
  return o;
}

zrt_update program::updateOf(const zrt_ctx &ctx, const PartitionInfo &part,
                             const float *stats, int32_t skip,
                             const DecayRanges &decay) {
  const Manifest &m = *ctx.manifest;
  zrt_update u{};
  u.dtype = part.computeDtype;
  u.step = ctx.optimizerSteps;
  u.schedule = lrSchedule(m);
  u.decay_ranges = decay.ranges.data();
  u.range_decays = decay.decays.data();
  u.num_decay_ranges = int32_t(decay.decays.size());
  u.max_grad_norm = m.gradientClipping;
  u.stats = stats;
  u.loss_scale = 1.0f;
  u.skip = skip;
  return u;
}

void program::setStates(const zrt_ctx &ctx, int32_t p, zrt_update &u) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  int j = 0;
  for (const optimizers::State &st : optimizers::kStates) {
    if (st.kind != m.optimizer)
      continue;
    if (!part.hasBuffer(st.buffer)) {
      u.states[j] = nullptr;
    } else if (m.int8States()) {
      Int8State q = int8State(ctx, p, st.buffer);
      u.states[j] = q.codes;
      u.absmax[j] = q.absmax;
    } else {
      u.states[j] = ctx.buffer(p, st.buffer);
    }
    ++j;
  }
}

namespace {
/// The device update of partition p, writing the new parameters to
/// `params`.
void deviceStep(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params);
} // namespace

extern "C" void zrt_ctx_optimizer_step(zrt_ctx *ctx, int32_t p,
                                       const float *stats,
                                       const float *lossScale, int32_t skip,
                                       double divisor) {
  const PartitionInfo &part = partition(ctx, p, "zrt_ctx_optimizer_step");
  if (part.paramsOffloaded())
    fatal("zrt_ctx_optimizer_step: partition '%s' keeps its params shard on "
          "the host: its device update writes a staged buffer "
          "(zrt_ctx_optimizer_step_staged)",
          part.name.c_str());
  deviceStep(ctx, p, part, stats, lossScale, skip, divisor,
             ownedParams(*ctx, p));
}

extern "C" void zrt_ctx_optimizer_step_staged(zrt_ctx *ctx, int32_t p,
                                              const float *stats,
                                              const float *lossScale,
                                              int32_t skip, double divisor,
                                              void *newParams) {
  const PartitionInfo &part =
      partition(ctx, p, "zrt_ctx_optimizer_step_staged");
  if (!part.paramsOffloaded() || part.offloaded())
    fatal("zrt_ctx_optimizer_step_staged: partition '%s' needs offloaded "
          "parameters and a device optimizer",
          part.name.c_str());
  deviceStep(ctx, p, part, stats, lossScale, skip, divisor, newParams);
}

namespace {
/// A Muon matrix of a rank's owned range: its place there and its param.
struct OwnedMatrix {
  Range range;
  const ParamInfo *param;
};

/// The parameters of partition p in the rank's owned range, in layout
/// order: each Muon matrix (`param` set), which must lie whole in it
/// (Newton-Schulz needs the whole matrix), and each run of AdamW's
/// parameters (`param` null; adjacent ones merged). Elements of no
/// parameter (owner-computes' gaps) are in neither.
std::vector<OwnedMatrix> ownedMatrices(const zrt_ctx &ctx, int32_t p,
                                       const PartitionInfo &part) {
  const Manifest &m = *ctx.manifest;
  Range owned = m.owned(part, ctx.rank);
  std::vector<OwnedMatrix> out;
  for (const ParamInfo &info : m.params) {
    if (info.partition != p)
      continue;
    int64_t lo = std::max(info.offset, owned.begin),
            hi = std::min(info.offset + info.numel, owned.end);
    if (lo >= hi)
      continue;
    if (!info.muon) {
      out.push_back({{lo - owned.begin, hi - owned.begin}, nullptr});
      continue;
    }
    if (lo != info.offset || hi != info.offset + info.numel)
      fatal("zrt_ctx_optimizer_step: Muon matrix '%s' of partition '%s' "
            "crosses rank "
            "%d's owned elements [%lld, %lld): its Newton-Schulz needs it "
            "whole on one rank",
            info.name.c_str(), part.name.c_str(), int(ctx.rank),
            (long long)owned.begin, (long long)owned.end);
    out.push_back({{lo - owned.begin, hi - owned.begin}, &info});
  }
  std::sort(out.begin(), out.end(), [](const auto &x, const auto &y) {
    return x.range.begin < y.range.begin;
  });
  std::vector<OwnedMatrix> merged;
  for (const OwnedMatrix &x : out)
    if (!x.param && !merged.empty() && !merged.back().param &&
        merged.back().range.end == x.range.begin)
      merged.back().range.end = x.range.end;
    else
      merged.push_back(x);
  return merged;
}

/// Muon's step of partition p: zrt_muon on each Muon matrix (whole in the
/// owned range), AdamW on each run of AdamW's parameters, with the same
/// weight-decay runs, schedule and clipping as zrt_ctx_optimizer_step. The
/// momentum holds the matrices' elements and Adam's moments the AdamW
/// parameters', each packed in layout order (the plan sizes them so, by part);
/// the gaps of owner-computes' enlarged slots have neither and stay zero.
void deviceMuon(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  auto hp = [&](optimizers::HyperParam p) { return m.hyperParam(p); };
  using HP = optimizers::HyperParam;
  auto grads = ownedGrads(ctx, p, part).first;
  int64_t cb = part.computeBytes;
  float *masters = ownedMasters(*ctx, p);
  float *expAvg = ctx->buffer<float>(p, kExpAvg),
        *expAvgSq = ctx->buffer<float>(p, kExpAvgSq);
  DecayRanges decay = decayRanges(*ctx, p, part);
  auto at = [&](void *base, int64_t i) -> void * {
    return base ? static_cast<char *>(base) + i * cb : nullptr;
  };
  // The other parameters' AdamW: Muon's rows' hyper-parameters.
  zrt_optimizer others{};
  others.kind = int32_t(optimizers::Kind::AdamW);
  others.params.adamw.lr = m.lr;
  others.params.adamw.beta1 = hp(HP::beta1);
  others.params.adamw.beta2 = hp(HP::beta2);
  others.params.adamw.eps = hp(HP::eps);
  others.params.adamw.weight_decay = hp(HP::weight_decay);
  others.params.adamw.bias_correction = hp(HP::bias_correction);
  // The next packed element of Adam's moments and of the momentum.
  int64_t adamAt = 0, momentumAt = 0;
  auto adamw = [&](int64_t begin, int64_t end) {
    if (begin >= end)
      return;
    DecayRanges own;
    for (size_t r = 0; r < decay.decays.size(); ++r) {
      int64_t lo = std::max(decay.ranges[2 * r], begin),
              hi = std::min(decay.ranges[2 * r + 1], end);
      if (lo < hi) {
        own.ranges.insert(own.ranges.end(), {lo - begin, hi - begin});
        own.decays.push_back(decay.decays[r]);
      }
    }
    zrt_update u = updateOf(*ctx, part, stats, skip, own);
    u.grad = grads + begin * cb;
    u.master = masters + begin;
    u.param = at(params, begin);
    u.n = end - begin;
    u.states[0] = expAvg + adamAt;
    u.states[1] = expAvgSq + adamAt;
    device::optimizerStep(others, u, lossScale, divisor);
    adamAt += end - begin;
  };
  for (const OwnedMatrix &mat : ownedMatrices(*ctx, p, part)) {
    if (!mat.param) {
      adamw(mat.range.begin, mat.range.end);
      continue;
    }
    const ParamInfo &info = *mat.param;
    int64_t begin = mat.range.begin, rows = info.shape[0];
    int64_t matrix[3] = {0, rows, info.numel / rows};
    double wd = info.weightDecay >= 0 ? info.weightDecay : hp(HP::weight_decay);
    device::muon(part.computeDtype, grads + begin * cb, masters + begin,
                 momentumBuffer(*ctx, p) + momentumAt, at(params, begin),
                 matrix, ctx->optimizerSteps, hp(HP::muon_lr),
                 hp(HP::muon_momentum), wd, int32_t(hp(HP::muon_nesterov)),
                 hp(HP::ns_a), hp(HP::ns_b), hp(HP::ns_c), hp(HP::ns_eps),
                 int32_t(hp(HP::ns_steps)), int32_t(hp(HP::adjust_lr_fn)),
                 lrSchedule(m), m.gradientClipping, stats, lossScale, divisor,
                 skip);
    momentumAt += info.numel;
  }
}

/// The trainable tensors of partition p, by offset, as Adafactor sees
/// them (every rank lists all of them: the sums' layout is the same on
/// each), and each one's weight decay.
std::vector<AdafactorTensor> adafactorTensors(const zrt_ctx &ctx, int32_t p,
                                              const PartitionInfo &part,
                                              std::vector<double> &decays) {
  const Manifest &m = *ctx.manifest;
  std::vector<const ParamInfo *> infos;
  for (const ParamInfo &info : m.params)
    if (info.partition == p && !info.frozen)
      infos.push_back(&info);
  std::sort(infos.begin(), infos.end(),
            [](const auto *x, const auto *y) { return x->offset < y->offset; });
  std::vector<AdafactorTensor> tensors;
  decays.clear();
  for (const ParamInfo *info : infos) {
    // Padding rows would count in the means of the columns and the RMS.
    if (info->rows >= 0 && !info->shape.empty() && info->rows != info->shape[0])
      fatal(
          "zrt_ctx_optimizer_step: Adafactor's statistics of parameter '%s' of "
          "partition '%s' would count its %lld padding rows",
          info->name.c_str(), part.name.c_str(),
          (long long)(info->shape[0] - info->rows));
    tensors.push_back(
        {info->offset,
         adafactorShape(info->shape.data(), int32_t(info->shape.size()))});
    decays.push_back(info->weightDecay >= 0
                         ? info->weightDecay
                         : m.hyperParam(optimizers::HyperParam::weight_decay));
  }
  return tensors;
}

/// Sums `n` doubles of host memory in place over the ranks that share
/// partition `part`, counted as the plan counts the step's all-reduces of
/// Adafactor's sums (an even split, two passes).
void allReduceSums(zrt_ctx *ctx, const PartitionInfo &part, double *sums,
                   int64_t n, const char *what) {
  Group &group = partitionGroup(ctx, part);
  int64_t seq =
      record(ctx, what, kAllReduce, group, n * int64_t(sizeof(double)));
  countAllReduce(group, n, int64_t(sizeof(double)));
  WaitScope watched(ctx->waitState, what);
  ctx->flight.waited(seq);
  MPI_Allreduce(MPI_IN_PLACE, sums, mpiInt(n, "zrt_ctx_optimizer_step"),
                MPI_DOUBLE, MPI_SUM, group.members->comm);
  ctx->flight.done(seq);
}

/// torch.optim.Adafactor's step of the rank's owned elements of partition
/// p: Adafactor.h's phases on each tensor it holds a piece of, with the
/// sums of the pieces all-reduced among the ranks sharing the partition
/// (stages 1-3; at stage 0 every rank holds every tensor whole). The state
/// buffer holds, tensor by tensor, the factors or the held variance
/// (zero_rt/adafactor.h); the sums live in accounted scratch.
void deviceAdafactor(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                     const float *stats, const float *lossScale, int32_t skip,
                     double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  auto [grads, n] = ownedGrads(ctx, p, part);
  float *masters = ownedMasters(*ctx, p);
  if (skip) {
    // A skipped step (fp16 overflow) changes nothing but gives the params
    // their masters back; every element-wise step's skip path does only
    // that, so SGD's with no state is that copy.
    zrt_optimizer copy{};
    copy.kind = int32_t(optimizers::Kind::SGD);
    zrt_update u = updateOf(*ctx, part, stats, 1, DecayRanges());
    u.grad = grads;
    u.master = masters;
    u.param = params;
    u.n = n;
    device::optimizerStep(copy, u, lossScale, divisor);
    return;
  }
  if (part.expert || m.micsShardSize > 0)
    fatal("zrt_ctx_optimizer_step: partition '%s': Adafactor reduces its sums "
          "over the "
          "world, not over %s",
          part.name.c_str(),
          part.expert ? "an expert replica set" : "a MiCS shard group");
  using HP = optimizers::HyperParam;
  double beta2Decay = m.hyperParam(HP::beta2_decay),
         eps1 = m.hyperParam(HP::eps1), eps2 = m.hyperParam(HP::eps2),
         d = m.hyperParam(HP::d);
  bool maximize = m.hyperParam(HP::maximize) != 0;
  std::vector<double> decays;
  std::vector<AdafactorTensor> tensors =
      adafactorTensors(*ctx, p, part, decays);
  int32_t num = int32_t(tensors.size());
  Range owned = m.owned(part, ctx->rank);
  float hostStats[2], scale;
  device::download(hostStats, stats, sizeof(hostStats));
  device::download(&scale, lossScale, sizeof(scale));
  float gradScale =
      float(double(zrt_clip_coefficient(hostStats, m.gradientClipping)) /
            double(float(double(scale) * divisor)));
  double lr =
      zrt_lr_at(lrSchedule(m), m.lr, nullptr, nullptr, ctx->optimizerSteps);
  int64_t total = adafactorShardSumsCount(tensors.data(), num),
          first = adafactorFirstReduceCount(tensors.data(), num);
  if (adafactorStateCount(tensors.data(), num, owned.begin, owned.end) >
      part.counts[kExpAvgSq])
    fatal("zrt_ctx_optimizer_step: partition '%s': Adafactor's state of rank "
          "%d's "
          "shard exceeds its exp_avg_sq buffer of %lld elements",
          part.name.c_str(), int(ctx->rank), (long long)part.counts[kExpAvgSq]);
  bool shared = m.stage > 0 && m.shardGroupSize(part) > 1;
  int64_t bytes = total * int64_t(sizeof(double));
  auto *sums = static_cast<double *>(device::allocateScratch(bytes));
  device::zero(sums, bytes);
  std::vector<double> host(static_cast<size_t>(total));
  int64_t cb = part.computeBytes;
  // Calls fn(i, lo, hi, at, state, k) for each tensor the shard holds a
  // piece [lo, hi) of: `at` its place in the owned range, `state` its
  // state, k its constants; sums + offsets[i] its sums.
  std::vector<int64_t> offsets(size_t(num) + 1, 0);
  for (int32_t i = 0; i < num; ++i)
    offsets[size_t(i) + 1] =
        offsets[size_t(i)] + adafactorSumsCount(tensors[size_t(i)].shape);
  auto forPieces = [&](const auto &fn) {
    float *state = ctx->buffer<float>(p, kExpAvgSq);
    for (int32_t i = 0; i < num; ++i) {
      int64_t lo, hi;
      const AdafactorTensor &t = tensors[size_t(i)];
      adafactorPiece(t, owned.begin, owned.end, lo, hi);
      if (lo == hi)
        continue;
      AdafactorConstants k =
          adafactorConstants(lr, beta2Decay, eps1, eps2, d, decays[size_t(i)],
                             maximize, ctx->optimizerSteps);
      fn(i, lo, hi, t.offset + lo - owned.begin, state, k);
      state += t.shape.factored ? t.shape.factorCount() : hi - lo;
    }
  };
  auto reduce = [&](int64_t begin, int64_t count, const char *what) {
    if (!shared || count == 0)
      return;
    device::download(host.data(), sums + begin, count * 8);
    allReduceSums(ctx, part, host.data(), count, what);
    device::upload(sums + begin, host.data(), count * 8);
  };
  auto at = [&](void *base, int64_t i) -> char * {
    return base ? static_cast<char *>(base) + i * cb : nullptr;
  };
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *,
                const AdafactorConstants &) {
    device::adafactorSums(part.computeDtype, at(grads, off), masters + off,
                          tensors[size_t(i)].shape, lo, hi, gradScale,
                          sums + offsets[size_t(i)]);
  });
  reduce(0, first, "all_reduce adafactor sums");
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *state,
                const AdafactorConstants &k) {
    const AdafactorShape &sh = tensors[size_t(i)].shape;
    double *s = sums + offsets[size_t(i)];
    float *colVar = state + (sh.factored ? sh.batch * sh.rows : 0);
    device::adafactorFactors(sh, k, state, colVar, s);
    device::adafactorUpdateSums(part.computeDtype, at(grads, off), sh, lo, hi,
                                gradScale, k, state, colVar, state, s);
    device::move(sums + first + i, s + 1, sizeof(double));
  });
  reduce(first, num, "all_reduce adafactor update sums");
  forPieces([&](int32_t i, int64_t lo, int64_t hi, int64_t off, float *state,
                const AdafactorConstants &k) {
    const AdafactorShape &sh = tensors[size_t(i)].shape;
    double *s = sums + offsets[size_t(i)];
    float *colVar = state + (sh.factored ? sh.batch * sh.rows : 0);
    device::move(s + 1, sums + first + i, sizeof(double));
    device::adafactorApply(part.computeDtype, at(grads, off), masters + off,
                           at(params, off), sh, lo, hi, gradScale, k, state,
                           colVar, state, s);
  });
  device::releaseScratch(sums, bytes);
}

void deviceStep(zrt_ctx *ctx, int32_t p, const PartitionInfo &part,
                const float *stats, const float *lossScale, int32_t skip,
                double divisor, void *params) {
  const Manifest &m = *ctx->manifest;
  if (m.optimizer == optimizers::Kind::Muon) {
    deviceMuon(ctx, p, part, stats, lossScale, skip, divisor, params);
  } else if (m.optimizer == optimizers::Kind::Adafactor) {
    deviceAdafactor(ctx, p, part, stats, lossScale, skip, divisor, params);
  } else {
    // Masters and states hold the owned range: at offset 0 of the full
    // buffers at stage 0 (everything is owned) and of the shards
    // otherwise. fp32 params are their own masters, updated in place (the
    // kernels allow the alias).
    auto [grads, n] = ownedGrads(ctx, p, part);
    DecayRanges decay = decayRanges(*ctx, p, part);
    zrt_update u = updateOf(*ctx, part, stats, skip, decay);
    u.grad = grads;
    u.master = ownedMasters(*ctx, p);
    u.param = params;
    u.n = n;
    setStates(*ctx, p, u);
    device::optimizerStep(optimizerOf(m), u, lossScale, divisor);
  }
  // Stage 2-3 shards accumulate; stage 0-1 slots are overwritten by the
  // next step, but an unused parameter's slot must not keep stale values.
  zrt_fill(part.computeDtype, ctx->buffer(p, kGrads), part.counts[kGrads], 0.0);
}
} // namespace
