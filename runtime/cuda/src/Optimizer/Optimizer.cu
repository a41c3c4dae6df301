//===- Optimizer.cu - Overflow check and the optimizer's step on the GPU --===//
//
// Part of the zero-mlir project.
//
// Both kernels are bandwidth bound, so each streams its buffers exactly once
// in one launch over the whole flat shard: the overflow check reads 2 bytes
// per 16-bit gradient (4 for f32); Adam moves 28 bytes per parameter with
// 16-bit gradients and copies (32 for f32 with a separate copy, 28 when the
// copy is the master), with unscaling and clipping in registers and no
// gradient write-back.
//
// Launch shape: a grid that the device holds at once (resident blocks per
// multiprocessor from the occupancy calculator) strides over units of
// 16-byte (or 4-element) accesses. Consecutive threads take consecutive
// units, so every warp-wide load or store covers one contiguous 256- or
// 512-byte span, and each thread issues the loads of several units before
// using any of them, which keeps enough bytes in flight to saturate HBM. A
// few scalar elements before the first aligned unit (the head) and after
// the last one (the tail) are taken by the first threads; Adam falls back
// to a scalar grid-stride loop when its pointers disagree on alignment.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Optimizer/DecayRanges.h"
#include "Optimizer/ElementRules.h"
#include "Optimizer/OptimizerLaunch.cuh"
#include "Optimizer/OptimizerMath.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;
using namespace zrt::cuda::optimizer;

namespace {

bool aligned(const void *p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// Elements of size `elemBytes` from p to the next multiple of `bytes`
/// (p must be element aligned).
int64_t elementsToAlignment(const void *p, uintptr_t bytes,
                            uintptr_t elemBytes) {
  uintptr_t mis = reinterpret_cast<uintptr_t>(p) % bytes;
  return int64_t((bytes - mis) % bytes / elemBytes);
}

//===----------------------------------------------------------------------===//
// Packed 16-bit values: pairs in 32-bit words, the lower address in the low
// half (little endian).
//===----------------------------------------------------------------------===//

__device__ inline float2 unpack(uint32_t w, __nv_bfloat16) {
  // bf16 is the upper half of an fp32: widening is exact bit placement.
  return make_float2(__uint_as_float(w << 16),
                     __uint_as_float(w & 0xffff0000u));
}
__device__ inline float2 unpack(uint32_t w, __half) {
  __half2 h;
  std::memcpy(&h, &w, sizeof(w));
  return __half22float2(h);
}

/// Rounds to nearest even, as fromF32.
__device__ inline uint32_t pack(float lo, float hi, __nv_bfloat16) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t w;
  std::memcpy(&w, &h, sizeof(w));
  return w;
}
__device__ inline uint32_t pack(float lo, float hi, __half) {
  __half2 h = __floats2half2_rn(lo, hi);
  uint32_t w;
  std::memcpy(&w, &h, sizeof(w));
  return w;
}

/// 4 consecutive elements of T as fp32: one 16-byte access for f32, one
/// 8-byte access for 16-bit types.
template <typename T>
__device__ inline float4 load4(const T *p) {
  uint2 u = *reinterpret_cast<const uint2 *>(p);
  float2 a = unpack(u.x, T()), b = unpack(u.y, T());
  return make_float4(a.x, a.y, b.x, b.y);
}
template <>
__device__ inline float4 load4<float>(const float *p) {
  return *reinterpret_cast<const float4 *>(p);
}
template <typename T>
__device__ inline void store4(T *p, float4 x) {
  *reinterpret_cast<uint2 *>(p) =
      make_uint2(pack(x.x, x.y, T()), pack(x.z, x.w, T()));
}
template <>
__device__ inline void store4<float>(float *p, float4 x) {
  *reinterpret_cast<float4 *>(p) = x;
}

__device__ inline float &at(float4 &x, int k) {
  return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}

//===----------------------------------------------------------------------===//
// Overflow check and squared norm
//===----------------------------------------------------------------------===//

/// Units of 16 bytes in flight per thread and loop iteration.
constexpr int kOverflowIlp = 4;
/// Bound of the grid, and so of the partials below: 1024 blocks of 256
/// threads hold 2048 threads on each of 128 multiprocessors, more than an
/// H100 or H200 (132) keeps resident.
constexpr int kMaxOverflowBlocks = 1024;

struct OverflowPartial {
  float sumSquares;
  uint32_t nonFinite;
};

// The per-block partials and the count of finished blocks: static device
// memory of this file (8 KiB + 4 bytes per device, zero at module load),
// not kernel scratch. The last block to finish combines the partials and
// sets the count back to 0, so launches reuse them in stream order (every
// launch is on the compute stream).
__device__ OverflowPartial gOverflowPartials[kMaxOverflowBlocks];
__device__ unsigned int gOverflowBlocksDone;

/// Sums of squares, or (Check) the largest exponent field of the values.
/// The hot pass only sums: squares are >= 0, so an inf or NaN makes a sum
/// inf or NaN, and only a thread whose sums are not finite scans its
/// values again for an all-ones exponent (inf and NaN, and only they,
/// have one; finite values whose squares overflow do not count). That
/// keeps 16-bit gradients at one shift or mask and one FMA per value.
template <bool Check>
struct SquareAcc {
  float sum[kOverflowIlp] = {};
  uint32_t maxExponent = 0;

  __device__ void add(float x, int k) {
    if (Check) {
      uint32_t e = __float_as_uint(x) & 0x7f800000u;
      maxExponent = e > maxExponent ? e : maxExponent;
    } else {
      sum[k] = __fmaf_rn(x, x, sum[k]);
    }
  }
  template <typename T>
  __device__ void addUnit(uint4 u, int k) {
    if constexpr (std::is_same_v<T, float>) {
      add(__uint_as_float(u.x), k);
      add(__uint_as_float(u.y), k);
      add(__uint_as_float(u.z), k);
      add(__uint_as_float(u.w), k);
    } else {
      uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float2 f = unpack(w[i], T());
        add(f.x, k);
        add(f.y, k);
      }
    }
  }
};

/// This thread's share of the pass (see overflowKernel) into acc.
template <typename T, bool Check>
__device__ void overflowScan(const T *grad, int64_t n, int64_t head,
                             int64_t units, int64_t tid, int64_t threads,
                             SquareAcc<Check> &acc) {
  constexpr int64_t kPer = 16 / sizeof(T);
  const int64_t tail = head + units * kPer;
  if (tid < head)
    acc.add(toF32(grad[tid]), 0);
  if (tid < n - tail)
    acc.add(toF32(grad[tail + tid]), 1);

  const uint4 *body = reinterpret_cast<const uint4 *>(grad + head);
  int64_t u = tid;
  for (; u + (kOverflowIlp - 1) * threads < units;
       u += kOverflowIlp * threads) {
    uint4 v[kOverflowIlp];
#pragma unroll
    for (int k = 0; k < kOverflowIlp; ++k)
      v[k] = __ldg(body + u + k * threads);
#pragma unroll
    for (int k = 0; k < kOverflowIlp; ++k)
      acc.template addUnit<T>(v[k], k);
  }
  for (; u < units; u += threads)
    acc.template addUnit<T>(__ldg(body + u), 0);
}

/// The block's sum in a fixed order (warp butterflies, then warp 0 over
/// the warps' sums); valid in thread 0.
template <typename F>
__device__ F blockSum(F x, F *shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    shared[warp] = x;
  __syncthreads();
  if (warp == 0) {
    x = lane < kWarps ? shared[lane] : F(0);
#pragma unroll
    for (int o = kWarps / 2; o > 0; o >>= 1)
      x += __shfl_xor_sync(0xffffffffu, x, o);
  }
  return x;
}

/// One pass over grad: elements [0, head) and [head + units * kPer, n)
/// scalar, the units of 16 bytes between them vectorized. Each block writes
/// its partial (fp32 sum, flag); the last block to finish adds the partials
/// in block order in fp64 (so the result depends on n and the grid only)
/// and updates stats.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    overflowKernel(const T *grad, int64_t n, int64_t head, int64_t units,
                   const float *lossScale, double divisor, int32_t first,
                   float *stats) {
  const int64_t tid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  SquareAcc<false> acc;
  overflowScan(grad, n, head, units, tid, threads, acc);

  __shared__ float sumShared[kWarps];
  __shared__ double totalShared[kWarps];
  __shared__ bool isLast;
  float sum = (acc.sum[0] + acc.sum[1]) + (acc.sum[2] + acc.sum[3]);
  bool threadBad = false;
  if (!isfinite(sum)) {
    SquareAcc<true> check;
    overflowScan(grad, n, head, units, tid, threads, check);
    threadBad = check.maxExponent == 0x7f800000u;
  }
  sum = blockSum(sum, sumShared);
  int bad = __syncthreads_or(threadBad);
  if (threadIdx.x == 0) {
    gOverflowPartials[blockIdx.x] = {sum, uint32_t(bad)};
    // Publishes the partial before the count says it is there.
    __threadfence();
    isLast = atomicAdd(&gOverflowBlocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!isLast)
    return;

  // Every other block's partial is visible now (they fenced before
  // counting); read them from L2, past this multiprocessor's L1.
  __threadfence();
  double total = 0.0;
  uint32_t anyBad = 0;
  for (int64_t b = threadIdx.x; b < gridDim.x; b += kThreads) {
    total += double(__ldcg(&gOverflowPartials[b].sumSquares));
    anyBad |= __ldcg(&gOverflowPartials[b].nonFinite);
  }
  total = blockSum(total, totalShared);
  anyBad = __syncthreads_or(anyBad != 0);
  if (threadIdx.x != 0)
    return;
  // As zrt_check_overflow: the sum of squares over the squared scale, in
  // fp64; the scale is rounded to fp32 first, as the CPU's zrt_ctx_* calls
  // pass float(loss scale * divisor).
  double scale =
      double(float((lossScale ? double(*lossScale) : 1.0) * divisor));
  float sq = float(total / (scale * scale));
  float flag = anyBad ? 1.0f : 0.0f;
  if (first) {
    stats[0] = flag;
    stats[1] = sq;
  } else {
    stats[0] = fmaxf(stats[0], flag);
    stats[1] = stats[1] + sq;
  }
  gOverflowBlocksDone = 0;
}

template <typename T>
void launchOverflow(const T *grad, int64_t n, const float *lossScale,
                    double divisor, int32_t first, float *stats) {
  constexpr int64_t kPer = 16 / sizeof(T);
  int64_t head = elementsToAlignment(grad, 16, sizeof(T));
  if (head > n)
    head = n;
  int64_t units = (n - head) / kPer;
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&overflowKernel<T>));
  unsigned grid =
      residentGrid(perSM, ceilDiv(units, int64_t(kThreads) * kOverflowIlp),
                   kMaxOverflowBlocks);
  overflowKernel<T><<<grid, kThreads, 0, computeStream()>>>(
      grad, n, head, units, lossScale, divisor, first, stats);
  checkLaunch("checkOverflow");
}

//===----------------------------------------------------------------------===//
// Adam
//===----------------------------------------------------------------------===//

/// Units of 4 elements in flight per thread and loop iteration (2: 112
/// bytes of loads per thread with 16-bit gradients).
constexpr int kAdamIlp = 2;

/// One element of torch.optim.Adam/AdamW in fp32, in the CPU's exact
/// operations: the intrinsics forbid contractions other than the FMAs that
/// GCC forms in runtime/src/Optimizer/Optimizer.cpp (seen in its disassembly),
/// so that both backends round identically.
template <bool kAdamW>
__device__ inline void adamElement(float g, float &w, float &m, float &v,
                                   float gs, const AdamArgs &a) {
  float gt =
      kAdamW ? __fmul_rn(g, gs) : __fmaf_rn(g, gs, __fmul_rn(a.weightDecay, w));
  float mt = __fmaf_rn(__fsub_rn(gt, m), a.oneMinusBeta1, m); // lerp_
  float vt =
      __fmaf_rn(v, a.beta2, __fmul_rn(__fmul_rn(a.oneMinusBeta2, gt), gt));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vt), a.bc2Sqrt), a.eps);
  float update = __fdiv_rn(__fmul_rn(a.negStepSize, mt), denom); // addcdiv_
  w = kAdamW ? __fmaf_rn(w, a.decay, update) : __fadd_rn(w, update);
  m = mt;
  v = vt;
}

template <typename T, bool kAdamW>
__device__ inline void adamScalar(int64_t i, const T *grad, float *master,
                                  float *m, float *v, T *param, float gs,
                                  const AdamArgs &a) {
  // master is null when the 16-bit parameter is its own (bf16 masters).
  float w = master ? master[i] : toF32(param[i]), mi = m[i], vi = v[i];
  adamElement<kAdamW>(toF32(grad[i]), w, mi, vi, gs, a);
  if (master)
    master[i] = w;
  m[i] = mi;
  v[i] = vi;
  if (param)
    param[i] = fromF32<T>(w);
}

/// kVector: elements [0, head) and [head + 4 * units, n) scalar, the units
/// of 4 elements between them with 16-byte fp32 and 8- or 16-byte T
/// accesses (every pointer + head is aligned for them). Otherwise a scalar
/// grid-stride loop. param is null when it is the master (f32).
template <typename T, bool kAdamW, bool kVector>
__global__ void __launch_bounds__(kThreads)
    adamKernel(const T *grad, float *master, float *m, float *v, T *param,
               int64_t n, int64_t head, int64_t units, AdamArgs a) {
  const int64_t tid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  const float gs = gradScale(a);
  if constexpr (!kVector) {
    for (int64_t i = tid; i < n; i += threads)
      adamScalar<T, kAdamW>(i, grad, master, m, v, param, gs, a);
    return;
  }
  const int64_t tail = head + 4 * units;
  if (tid < head)
    adamScalar<T, kAdamW>(tid, grad, master, m, v, param, gs, a);
  if (tid < n - tail)
    adamScalar<T, kAdamW>(tail + tid, grad, master, m, v, param, gs, a);

  grad += head;
  master += head;
  m += head;
  v += head;
  if (param)
    param += head;
  auto run = [&](int64_t u0, auto ilp) {
    constexpr int kIlp = decltype(ilp)::value;
    float4 g[kIlp], w[kIlp], mm[kIlp], vv[kIlp];
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      int64_t e = 4 * (u0 + k * threads);
      g[k] = load4(grad + e);
      w[k] = load4(master + e);
      mm[k] = load4(m + e);
      vv[k] = load4(v + e);
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        adamElement<kAdamW>(at(g[k], j), at(w[k], j), at(mm[k], j),
                            at(vv[k], j), gs, a);
      int64_t e = 4 * (u0 + k * threads);
      store4(master + e, w[k]);
      store4(m + e, mm[k]);
      store4(v + e, vv[k]);
      if (param)
        store4(param + e, w[k]);
    }
  };
  int64_t u = tid;
  for (; u + (kAdamIlp - 1) * threads < units; u += kAdamIlp * threads)
    run(u, std::integral_constant<int, kAdamIlp>());
  for (; u < units; u += threads)
    run(u, std::integral_constant<int, 1>());
}

/// The skipped step: param = master rounded to T, same layout as
/// adamKernel.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    copyMasterKernel(const float *master, T *param, int64_t n, int64_t head,
                     int64_t units) {
  const int64_t tid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  if constexpr (!kVector) {
    for (int64_t i = tid; i < n; i += threads)
      param[i] = fromF32<T>(master[i]);
    return;
  }
  const int64_t tail = head + 4 * units;
  if (tid < head)
    param[tid] = fromF32<T>(master[tid]);
  if (tid < n - tail)
    param[tail + tid] = fromF32<T>(master[tail + tid]);
  for (int64_t u = tid; u < units; u += threads)
    store4(param + head + 4 * u, load4(master + head + 4 * u));
}

/// Elements before the first unit at which master and every other pointer
/// are aligned for 4-element accesses, or -1 if there is none.
template <typename T>
int64_t commonHead(const float *master, std::initializer_list<const void *> f32,
                   std::initializer_list<const void *> narrow) {
  if (!aligned(master, sizeof(float)))
    return -1;
  int64_t head = elementsToAlignment(master, 16, sizeof(float));
  for (const void *p : f32)
    if (!aligned(static_cast<const float *>(p) + head, 16))
      return -1;
  for (const void *p : narrow)
    if (!aligned(static_cast<const T *>(p) + head, 4 * sizeof(T)))
      return -1;
  return head;
}

template <typename T, bool kAdamW, bool kVector>
void launchAdam(const T *grad, float *master, float *m, float *v, T *param,
                int64_t n, int64_t head, const AdamArgs &a) {
  int64_t units = kVector ? (n - head) / 4 : 0;
  int64_t work = kVector ? ceilDiv(units, kAdamIlp) : n;
  static const int perSM = residentBlocks(
      reinterpret_cast<const void *>(&adamKernel<T, kAdamW, kVector>));
  unsigned grid = residentGrid(perSM, ceilDiv(work, kThreads));
  adamKernel<T, kAdamW, kVector><<<grid, kThreads, 0, computeStream()>>>(
      grad, master, m, v, param, n, head, units, a);
  checkLaunch("adam");
}

//===----------------------------------------------------------------------===//
// The element-wise rules (ElementRules.h) whose formula both backends share
//===----------------------------------------------------------------------===//

/// The live states of a launch, shifted to its first element.
struct ElementStates {
  float *s[ZRT_MAX_OPTIMIZER_STATES];
};

/// A grid-stride loop of rule R's element, the CPU's formula, over N live
/// states. master is null when the parameter is its own master (bf16
/// masters); param is null when it is the master (f32).
template <class R, int N, typename T>
__global__ void __launch_bounds__(kThreads)
    elementKernel(const T *grad, float *master, ElementStates states, T *param,
                  int64_t n, StepArgs<typename R::Constants> a) {
  constexpr int kSlots = N > 0 ? N : 1;
  const float gs = gradScale(a);
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += threads) {
    float w = master ? master[i] : toF32(param[i]);
    float st[kSlots] = {};
#pragma unroll
    for (int j = 0; j < N; ++j)
      st[j] = states.s[j][i];
    R::element(__fmul_rn(toF32(grad[i]), gs), w, st, a);
#pragma unroll
    for (int j = 0; j < N; ++j)
      states.s[j][i] = st[j];
    if (master)
      master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
  }
}

template <class R, int N, typename T>
void launchElement(const T *grad, float *master, const ElementStates &states,
                   T *param, int64_t n,
                   const StepArgs<typename R::Constants> &a) {
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&elementKernel<R, N, T>));
  unsigned grid = residentGrid(perSM, ceilDiv(n, kThreads));
  elementKernel<R, N, T><<<grid, kThreads, 0, computeStream()>>>(
      grad, master, states, param, n, a);
  checkLaunch(R::kSpan);
}

/// Rule R's step of `u` on the device, one launch per run of equal weight
/// decay.
template <class R>
void elementStep(const zrt_optimizer &o, const zrt_update &u,
                 const float *lossScale, double divisor) {
  using K = typename R::Constants;
  const char *name = R::kSpan;
  if (!checkUpdate(name, u.n, u.step, u.skip, u.max_grad_norm, u.stats))
    return;
  const int live = R::liveStates(o);
  for (int j = 0; j < live; ++j)
    if (!u.states[j])
      fatal("%s: its state %d is null", name, j);
  dispatch(u.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(u.param);
    if (std::is_same<T, float>::value && u.param == u.master)
      p = nullptr;
    if (u.skip) {
      if (p && u.master)
        launchCopyMaster<T, false>(u.master, p, u.n, 0);
      return;
    }
    double lr = 0.0;
    StepArgs<K> a = stepArgs(R::constants(o, u.schedule, u.step, lr),
                             u.max_grad_norm, divisor, u.stats, lossScale);
    auto launch = [&](int64_t b, int64_t e, const StepArgs<K> &args) {
      if (b >= e)
        return;
      const T *g = static_cast<const T *>(u.grad) + b;
      float *w = u.master ? u.master + b : nullptr;
      T *pp = p ? p + b : nullptr;
      ElementStates st{};
      for (int j = 0; j < live; ++j)
        st.s[j] = static_cast<float *>(u.states[j]) + b;
      if (live == 3)
        launchElement<R, 3>(g, w, st, pp, e - b, args);
      else if (live == 2)
        launchElement<R, 2>(g, w, st, pp, e - b, args);
      else if (live == 1)
        launchElement<R, 1>(g, w, st, pp, e - b, args);
      else
        launchElement<R, 0>(g, w, st, pp, e - b, args);
    };
    forDecayRuns(name, u.decay_ranges, u.range_decays, u.num_decay_ranges, u.n,
                 lr, a, launch);
  });
}

/// Kind K's step: Adam's own kernels for Adam and AdamW, the shared
/// formula's launcher for the other rules.
template <optimizers::Kind K>
void kindStep(const zrt_optimizer &o, const zrt_update &u,
              const float *lossScale, double divisor) {
  using Rule = optimizers::ElementRule<K>;
  if constexpr (!Rule::kDefined) {
    fatal("zrt_optimizer_step: %s updates whole tensors, not elements",
          optimizers::kindName(o.kind));
  } else if constexpr (!Rule::kSharedElement) {
    static_assert(K == optimizers::Kind::Adam || K == optimizers::Kind::AdamW,
                  "a rule without a shared element formula needs a kernel");
    optimizers::AdamHyper h = optimizers::adamHyper(o);
    cuda::adam(u.dtype, u.grad, u.master, static_cast<float *>(u.states[0]),
               static_cast<float *>(u.states[1]), u.param, u.n, u.step, h.lr,
               h.beta1, h.beta2, h.eps, h.weightDecay, h.decoupled,
               h.biasCorrection, u.schedule, u.decay_ranges, u.range_decays,
               u.num_decay_ranges, u.max_grad_norm, u.stats, lossScale, divisor,
               u.skip);
  } else {
    elementStep<Rule>(o, u, lossScale, divisor);
  }
}

} // namespace

template <typename T, bool kVector>
void optimizer::launchCopyMaster(const float *master, T *param, int64_t n,
                                 int64_t head) {
  int64_t units = kVector ? (n - head) / 4 : 0;
  static const int perSM = residentBlocks(
      reinterpret_cast<const void *>(&copyMasterKernel<T, kVector>));
  unsigned grid = residentGrid(perSM, ceilDiv(kVector ? units : n, kThreads));
  copyMasterKernel<T, kVector>
      <<<grid, kThreads, 0, computeStream()>>>(master, param, n, head, units);
  checkLaunch("adam (skipped step)");
}

// The instances AdamStates.cu calls besides this file's.
template void optimizer::launchCopyMaster<float, false>(const float *, float *,
                                                        int64_t, int64_t);
template void optimizer::launchCopyMaster<__nv_bfloat16, false>(const float *,
                                                                __nv_bfloat16 *,
                                                                int64_t,
                                                                int64_t);
template void optimizer::launchCopyMaster<__half, false>(const float *,
                                                         __half *, int64_t,
                                                         int64_t);

void zrt::cuda::checkOverflow(int32_t dtype, const void *grad, int64_t n,
                              const float *lossScale, double divisor,
                              int32_t first, float *stats) {
  checkDims("checkOverflow", n);
  if (n == 0) {
    // Nothing to read: the stats only start from {0, 0} (all-zero bits).
    if (first)
      ZRT_CUDA_CHECK(
          cudaMemsetAsync(stats, 0, 2 * sizeof(float), computeStream()));
    return;
  }
  dispatch(dtype, "checkOverflow", [&](auto tag) {
    using T = decltype(tag);
    // The vector loads start where grad + head is 16-byte aligned.
    if (!aligned(grad, sizeof(T)))
      fatal("checkOverflow: the gradient is not aligned to its element size");
    launchOverflow(static_cast<const T *>(grad), n, lossScale, divisor, first,
                   stats);
  });
}

void zrt::cuda::adam(int32_t dtype, const void *grad, float *master,
                     float *expAvg, float *expAvgSq, void *param, int64_t n,
                     int64_t step, double lr, double beta1, double beta2,
                     double eps, double weightDecay, int32_t adamw,
                     int32_t biasCorrection, const zrt_lr_schedule *schedule,
                     const int64_t *decayRanges, const double *rangeDecays,
                     int32_t numDecayRanges, double maxGradNorm,
                     const float *stats, const float *lossScale, double divisor,
                     int32_t skip) {
  if (!checkUpdate("adam", n, step, skip, maxGradNorm, stats))
    return;
  dispatch(dtype, "adam", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    // An f32 copy that is the master is already written.
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      // The step is skipped, but the parameter copy is still a result
      // (without masters it is already the step's).
      if (!p || !master)
        return;
      int64_t head = commonHead<T>(master, {}, {p});
      if (head >= 0 && head <= n)
        launchCopyMaster<T, true>(master, p, n, head);
      else
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    // The same learning rate and fp32 rounding of the step's constants as
    // zrt_optimizer_step (the step counter is the host's).
    AdamArgs a =
        adamArgs(lr, beta1, beta2, eps, weightDecay, biasCorrection, step,
                 schedule, maxGradNorm, divisor, stats, lossScale);
    // Elements [b, e) with the constants of args.
    auto launch = [&](int64_t b, int64_t e, const AdamArgs &args) {
      if (b >= e)
        return;
      const T *g = static_cast<const T *>(grad) + b;
      float *w = master ? master + b : nullptr, *m = expAvg + b,
            *v = expAvgSq + b;
      T *pp = p ? p + b : nullptr;
      int64_t len = e - b;
      // Without masters (bf16 masters) the scalar loop reads the params.
      int64_t head = !w   ? -1
                     : pp ? commonHead<T>(w, {m, v}, {g, pp})
                          : commonHead<T>(w, {m, v}, {g});
      bool vector = head >= 0 && head <= len;
      if (adamw) {
        if (vector)
          launchAdam<T, true, true>(g, w, m, v, pp, len, head, args);
        else
          launchAdam<T, true, false>(g, w, m, v, pp, len, 0, args);
      } else {
        if (vector)
          launchAdam<T, false, true>(g, w, m, v, pp, len, head, args);
        else
          launchAdam<T, false, false>(g, w, m, v, pp, len, 0, args);
      }
    };
    forDecayRuns("adam", decayRanges, rangeDecays, numDecayRanges, n, lr, a,
                 launch);
  });
}

void zrt::cuda::optimizerStep(const zrt_optimizer &o, const zrt_update &u,
                              const float *lossScale, double divisor) {
  using optimizers::Kind;
  using optimizers::StatePrecision;
  StatePrecision precision = optimizers::checkedPrecision(o);
  if (precision != StatePrecision::F32) {
    optimizers::AdamHyper h = optimizers::adamHyper(o);
    if (precision == StatePrecision::Int8)
      adam8bit(u.dtype, u.grad, u.master, static_cast<uint8_t *>(u.states[0]),
               u.absmax[0], static_cast<uint8_t *>(u.states[1]), u.absmax[1],
               u.param, u.n, u.step, h.lr, h.beta1, h.beta2, h.eps,
               h.weightDecay, h.decoupled, h.biasCorrection, u.schedule,
               u.decay_ranges, u.range_decays, u.num_decay_ranges,
               u.max_grad_norm, u.stats, lossScale, divisor, u.skip);
    else
      adamBf16(u.dtype, u.grad, u.master, static_cast<uint16_t *>(u.states[0]),
               static_cast<uint16_t *>(u.states[1]), u.param, u.n, u.step, h.lr,
               h.beta1, h.beta2, h.eps, h.weightDecay, h.decoupled,
               h.biasCorrection, u.schedule, u.decay_ranges, u.range_decays,
               u.num_decay_ranges, u.max_grad_norm, u.stats, lossScale, divisor,
               u.skip);
    return;
  }
  switch (Kind(o.kind)) {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  case Kind::id:                                                               \
    return kindStep<Kind::id>(o, u, lossScale, divisor);
#include "zero_rt/optimizers.def"
  }
}
