//===- Optimizer.cu - Overflow check, fused Adam and Lion on the GPU ------===//
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

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

/// Blocks of kThreads of `kernel` one multiprocessor holds at once.
int residentBlocks(const void *kernel) {
  int blocks = 0;
  ZRT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel,
                                                               kThreads, 0));
  return blocks < 1 ? 1 : blocks;
}

/// Blocks for a kernel of which each multiprocessor holds `perSM`: enough
/// to fill the device once, at most `want` (and at most `cap` when
/// positive).
unsigned residentGrid(int perSM, int64_t want, int64_t cap = 0) {
  int64_t sms = multiprocessorCount();
  int64_t perDevice = sms * perSM;
  // A multiple of the multiprocessor count under the cap, so that every
  // multiprocessor gets the same number of blocks.
  if (cap > 0 && perDevice > cap)
    perDevice = cap >= sms ? cap / sms * sms : cap;
  int64_t blocks = want < perDevice ? want : perDevice;
  return unsigned(blocks < 1 ? 1 : blocks);
}

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

/// zrt_adam's step constants, rounded to fp32 on the host as the CPU does;
/// the gradient's factor is computed on the device from stats and
/// lossScale.
struct AdamArgs : AdamConstants {
  double maxGradNorm;
  double divisor;
  const float *stats;
  const float *lossScale;
};

/// zrt_clip_coefficient(stats, maxGradNorm) / ((*lossScale) * divisor),
/// in fp64 as the CPU (device fp64 division and sqrt round correctly).
__device__ inline float gradScale(const AdamArgs &a) {
  double clip = 1.0;
  if (a.maxGradNorm > 0) {
    double coef = a.maxGradNorm / (sqrt(double(a.stats[1])) + 1e-6);
    // As torch's clamp(max=1): a NaN norm stays NaN.
    clip = coef >= 1.0 ? 1.0 : double(float(coef));
  }
  // Rounded to fp32 first, as the CPU's zrt_ctx_adam passes
  // float(loss scale * divisor) to zrt_adam.
  double scale =
      double(float((a.lossScale ? double(*a.lossScale) : 1.0) * a.divisor));
  return float(clip / scale);
}

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

template <typename T, bool kVector>
void launchCopyMaster(const float *master, T *param, int64_t n, int64_t head) {
  int64_t units = kVector ? (n - head) / 4 : 0;
  static const int perSM = residentBlocks(
      reinterpret_cast<const void *>(&copyMasterKernel<T, kVector>));
  unsigned grid = residentGrid(perSM, ceilDiv(kVector ? units : n, kThreads));
  copyMasterKernel<T, kVector>
      <<<grid, kThreads, 0, computeStream()>>>(master, param, n, head, units);
  checkLaunch("adam (skipped step)");
}

//===----------------------------------------------------------------------===//
// Lion
//===----------------------------------------------------------------------===//

/// zrt_lion's step constants (rounded on the host as the CPU's) and the
/// gradient factor's inputs, as AdamArgs.
struct LionArgs : LionConstants {
  double maxGradNorm;
  double divisor;
  const float *stats;
  const float *lossScale;
};

/// A grid-stride loop of OptimizerMath.h's lionElement, the CPU's formula.
/// param is null when it is the master (f32).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lionKernel(const T *grad, float *master, float *m, T *param, int64_t n,
               LionArgs a) {
  AdamArgs scale;
  scale.maxGradNorm = a.maxGradNorm;
  scale.divisor = a.divisor;
  scale.stats = a.stats;
  scale.lossScale = a.lossScale;
  const float gs = gradScale(scale);
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += threads) {
    float w = master[i], mi = m[i];
    lionElement(__fmul_rn(toF32(grad[i]), gs), w, mi, a);
    master[i] = w;
    m[i] = mi;
    if (param)
      param[i] = fromF32<T>(w);
  }
}

template <typename T>
void launchLion(const T *grad, float *master, float *m, T *param, int64_t n,
                const LionArgs &a) {
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&lionKernel<T>));
  unsigned grid = residentGrid(perSM, ceilDiv(n, kThreads));
  lionKernel<T>
      <<<grid, kThreads, 0, computeStream()>>>(grad, master, m, param, n, a);
  checkLaunch("lion");
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

/// zrt_sgd's step constants (rounded on the host as the CPU's) and the
/// gradient factor's inputs, as AdamArgs.
struct SgdArgs : SgdConstants {
  double maxGradNorm;
  double divisor;
  const float *stats;
  const float *lossScale;
};

/// A grid-stride loop of OptimizerMath.h's sgdElement, the CPU's formula.
/// param is null when it is the master (f32); m is null without momentum.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sgdKernel(const T *grad, float *master, float *m, T *param, int64_t n,
              SgdArgs a) {
  AdamArgs scale;
  scale.maxGradNorm = a.maxGradNorm;
  scale.divisor = a.divisor;
  scale.stats = a.stats;
  scale.lossScale = a.lossScale;
  const float gs = gradScale(scale);
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += threads) {
    float w = master[i], mi = m ? m[i] : 0.0f;
    sgdElement(__fmul_rn(toF32(grad[i]), gs), w, mi, a);
    master[i] = w;
    if (m)
      m[i] = mi;
    if (param)
      param[i] = fromF32<T>(w);
  }
}

template <typename T>
void launchSgd(const T *grad, float *master, float *m, T *param, int64_t n,
               const SgdArgs &a) {
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&sgdKernel<T>));
  unsigned grid = residentGrid(perSM, ceilDiv(n, kThreads));
  sgdKernel<T>
      <<<grid, kThreads, 0, computeStream()>>>(grad, master, m, param, n, a);
  checkLaunch("sgd");
}

} // namespace

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
  checkDims("adam", n);
  if (!skip && step < 1)
    fatal("adam: step %lld must be >= 1", (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("adam: gradient clipping needs the stats");
  if (n == 0)
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
    // zrt_adam (the step counter is the host's).
    if (schedule)
      lr = lrAt(*schedule, lr, beta1, beta2, step);
    AdamArgs a;
    static_cast<AdamConstants &>(a) = adamConstants(
        lr, beta1, beta2, eps, weightDecay, step, biasCorrection != 0);
    a.maxGradNorm = maxGradNorm;
    a.divisor = divisor;
    a.stats = stats;
    a.lossScale = lossScale;
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
    checkDecayRanges("adam", decayRanges, rangeDecays, numDecayRanges, n);
    int64_t at = 0;
    for (int32_t r = 0; r < numDecayRanges; ++r) {
      int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
      launch(at, b, a);
      AdamArgs own = a;
      static_cast<AdamConstants &>(own) = withDecay(a, lr, rangeDecays[r]);
      launch(b, e, own);
      at = e;
    }
    launch(at, n, a);
  });
}

void zrt::cuda::lion(int32_t dtype, const void *grad, float *master,
                     float *expAvg, void *param, int64_t n, int64_t step,
                     double lr, double beta1, double beta2, double weightDecay,
                     const zrt_lr_schedule *schedule,
                     const int64_t *decayRanges, const double *rangeDecays,
                     int32_t numDecayRanges, double maxGradNorm,
                     const float *stats, const float *lossScale, double divisor,
                     int32_t skip) {
  checkDims("lion", n);
  if (!skip && step < 1)
    fatal("lion: step %lld must be >= 1", (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("lion: gradient clipping needs the stats");
  if (n == 0)
    return;
  dispatch(dtype, "lion", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      if (p)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    if (schedule)
      lr = lrAt(*schedule, lr, beta1, beta2, step);
    LionArgs a;
    static_cast<LionConstants &>(a) =
        lionConstants(lr, beta1, beta2, weightDecay);
    a.maxGradNorm = maxGradNorm;
    a.divisor = divisor;
    a.stats = stats;
    a.lossScale = lossScale;
    auto launch = [&](int64_t b, int64_t e, const LionArgs &args) {
      if (b < e)
        launchLion<T>(static_cast<const T *>(grad) + b, master + b, expAvg + b,
                      p ? p + b : nullptr, e - b, args);
    };
    checkDecayRanges("lion", decayRanges, rangeDecays, numDecayRanges, n);
    int64_t at = 0;
    for (int32_t r = 0; r < numDecayRanges; ++r) {
      int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
      launch(at, b, a);
      LionArgs own = a;
      static_cast<LionConstants &>(own) = withDecay(a, lr, rangeDecays[r]);
      launch(b, e, own);
      at = e;
    }
    launch(at, n, a);
  });
}

void zrt::cuda::sgd(int32_t dtype, const void *grad, float *master,
                    float *momentumBuffer, void *param, int64_t n, int64_t step,
                    double lr, double momentum, double dampening,
                    double weightDecay, int32_t nesterov,
                    const zrt_lr_schedule *schedule, const int64_t *decayRanges,
                    const double *rangeDecays, int32_t numDecayRanges,
                    double maxGradNorm, const float *stats,
                    const float *lossScale, double divisor, int32_t skip) {
  checkDims("sgd", n);
  if (!skip && step < 1)
    fatal("sgd: step %lld must be >= 1", (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("sgd: gradient clipping needs the stats");
  if (momentum != 0.0 && !momentumBuffer && n > 0)
    fatal("sgd: momentum %g without a momentum buffer", momentum);
  if (n == 0)
    return;
  dispatch(dtype, "sgd", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      if (p)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    // A cycled momentum (OneCycle) is SGD's momentum, as on the CPU.
    if (schedule && momentum != 0.0) {
      double unused = 0.0;
      lr = lrAt(*schedule, lr, momentum, unused, step);
    } else if (schedule) {
      double b1 = 0.0, b2 = 0.0;
      lr = lrAt(*schedule, lr, b1, b2, step);
    }
    float *m = momentum != 0.0 ? momentumBuffer : nullptr;
    SgdArgs a;
    static_cast<SgdConstants &>(a) =
        sgdConstants(lr, momentum, dampening, weightDecay, nesterov != 0, step);
    a.maxGradNorm = maxGradNorm;
    a.divisor = divisor;
    a.stats = stats;
    a.lossScale = lossScale;
    auto launch = [&](int64_t b, int64_t e, const SgdArgs &args) {
      if (b < e)
        launchSgd<T>(static_cast<const T *>(grad) + b, master + b,
                     m ? m + b : nullptr, p ? p + b : nullptr, e - b, args);
    };
    checkDecayRanges("sgd", decayRanges, rangeDecays, numDecayRanges, n);
    int64_t at = 0;
    for (int32_t r = 0; r < numDecayRanges; ++r) {
      int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
      launch(at, b, a);
      SgdArgs own = a;
      static_cast<SgdConstants &>(own) = withDecay(a, lr, rangeDecays[r]);
      launch(b, e, own);
      at = e;
    }
    launch(at, n, a);
  });
}

//===----------------------------------------------------------------------===//
// Adam with block-wise 8-bit states
//===----------------------------------------------------------------------===//

namespace {

/// Decay ranges one launch of adam8bitKernel can see: a launch covers the
/// quantisation blocks that meet at most this many.
constexpr int kMaxAdam8bitSpans = 8;
/// Elements of a quantisation block each thread updates.
constexpr int kAdam8bitPerThread = int(kQuantBlock) / kThreads;
static_assert(kAdam8bitPerThread * kThreads == kQuantBlock,
              "a block of threads covers one quantisation block");

/// zrt_adam8bit's step constants, the gradient factor's inputs (as
/// AdamArgs), the two maps and the decay ranges that meet the launch's
/// blocks (their decay and L2 coefficients replace the step's).
struct Adam8bitArgs : AdamArgs {
  float signedMap[kQuantCodes];
  float unsignedMap[kQuantCodes];
  int32_t numSpans;
  int64_t spanBegin[kMaxAdam8bitSpans], spanEnd[kMaxAdam8bitSpans];
  float spanDecay[kMaxAdam8bitSpans], spanWeightDecay[kMaxAdam8bitSpans];
};

/// One block of threads per quantisation block [b*2048, min(n, (b+1)*2048)),
/// b = firstBlock + blockIdx.x: OptimizerMath.h's formulas, as the CPU's
/// adam8bitBlock. param is null when it is the master (f32).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam8bitKernel(const T *grad, float *master, uint8_t *qm, float *absmaxM,
                   uint8_t *qv, float *absmaxV, T *param, int64_t n,
                   int64_t firstBlock, bool decoupled, Adam8bitArgs a) {
  __shared__ float smap[kQuantCodes], umap[kQuantCodes];
  __shared__ float warpM[kWarps], warpV[kWarps];
  for (int c = threadIdx.x; c < kQuantCodes; c += kThreads) {
    smap[c] = a.signedMap[c];
    umap[c] = a.unsignedMap[c];
  }
  __syncthreads();
  const int64_t block = firstBlock + blockIdx.x;
  const int64_t begin = block * kQuantBlock;
  const int64_t end = begin + kQuantBlock < n ? begin + kQuantBlock : n;
  const float am = absmaxM[block], av = absmaxV[block];
  const float gs = gradScale(a);
  float m[kAdam8bitPerThread], v[kAdam8bitPerThread];
  float maxM = 0.0f, maxV = 0.0f;
  for (int r = 0; r < kAdam8bitPerThread; ++r) {
    int64_t i = begin + threadIdx.x + int64_t(r) * kThreads;
    if (i >= end)
      continue;
    AdamConstants k = a;
    for (int s = 0; s < a.numSpans; ++s)
      if (a.spanBegin[s] <= i && i < a.spanEnd[s]) {
        k.decay = a.spanDecay[s];
        k.weightDecay = a.spanWeightDecay[s];
      }
    float w = master[i];
    float mt = dequantizeState(smap, qm[i], am);
    float vt = dequantizeState(umap, qv[i], av);
    adam8bitElement(mulRn(toF32(grad[i]), gs), w, mt, vt, k, decoupled);
    master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
    m[r] = mt;
    v[r] = vt;
    maxM = fmaxf(maxM, fabsf(mt));
    maxV = fmaxf(maxV, vt);
  }
  // The block's new absmax: max is exact, so its order does not matter.
  for (int off = 16; off > 0; off /= 2) {
    maxM = fmaxf(maxM, __shfl_xor_sync(0xffffffffu, maxM, off));
    maxV = fmaxf(maxV, __shfl_xor_sync(0xffffffffu, maxV, off));
  }
  if (threadIdx.x % 32 == 0) {
    warpM[threadIdx.x / 32] = maxM;
    warpV[threadIdx.x / 32] = maxV;
  }
  __syncthreads();
  float newM = 0.0f, newV = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    newM = fmaxf(newM, warpM[w]);
    newV = fmaxf(newV, warpV[w]);
  }
  if (threadIdx.x == 0) {
    absmaxM[block] = newM;
    absmaxV[block] = newV;
  }
  for (int r = 0; r < kAdam8bitPerThread; ++r) {
    int64_t i = begin + threadIdx.x + int64_t(r) * kThreads;
    if (i >= end)
      continue;
    qm[i] = quantizeState(smap, m[r], newM);
    qv[i] = quantizeState(umap, v[r], newV);
  }
}

} // namespace

void zrt::cuda::adam8bit(
    int32_t dtype, const void *grad, float *master, uint8_t *expAvg,
    float *expAvgAbsmax, uint8_t *expAvgSq, float *expAvgSqAbsmax, void *param,
    int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
    double weightDecay, int32_t adamw, int32_t biasCorrection,
    const zrt_lr_schedule *schedule, const int64_t *decayRanges,
    const double *rangeDecays, int32_t numDecayRanges, double maxGradNorm,
    const float *stats, const float *lossScale, double divisor, int32_t skip) {
  checkDims("adam8bit", n);
  if (!skip && step < 1)
    fatal("adam8bit: step %lld must be >= 1", (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("adam8bit: gradient clipping needs the stats");
  if (n == 0)
    return;
  dispatch(dtype, "adam8bit", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      if (p)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    if (schedule)
      lr = lrAt(*schedule, lr, beta1, beta2, step);
    Adam8bitArgs a;
    static_cast<AdamConstants &>(a) = adamConstants(
        lr, beta1, beta2, eps, weightDecay, step, biasCorrection != 0);
    a.maxGradNorm = maxGradNorm;
    a.divisor = divisor;
    a.stats = stats;
    a.lossScale = lossScale;
    dynamicQuantMap(true, a.signedMap);
    dynamicQuantMap(false, a.unsignedMap);
    checkDecayRanges("adam8bit", decayRanges, rangeDecays, numDecayRanges, n);
    // Launches over runs of whole blocks (a block's absmax needs all its
    // elements), each run meeting at most kMaxAdam8bitSpans decay ranges; a
    // single block that meets more is refused.
    const int64_t blocks = ceilDiv(n, kQuantBlock);
    int32_t r = 0;
    int64_t first = 0;
    while (first < blocks) {
      a.numSpans = 0;
      int64_t last = first; // exclusive
      int32_t rr = r;
      while (last < blocks) {
        int64_t bEnd = std::min(n, (last + 1) * kQuantBlock);
        // The ranges that begin before this block's end.
        int32_t take = rr;
        while (take < numDecayRanges && decayRanges[2 * take] < bEnd)
          ++take;
        if (take - r > kMaxAdam8bitSpans) {
          if (last == first)
            fatal("adam8bit: more than %d decay ranges meet one block of %lld "
                  "elements",
                  kMaxAdam8bitSpans, (long long)kQuantBlock);
          break;
        }
        rr = take;
        ++last;
      }
      for (int32_t s = r; s < rr; ++s) {
        AdamConstants own = withDecay(a, lr, rangeDecays[s]);
        a.spanBegin[a.numSpans] = decayRanges[2 * s];
        a.spanEnd[a.numSpans] = decayRanges[2 * s + 1];
        a.spanDecay[a.numSpans] = own.decay;
        a.spanWeightDecay[a.numSpans] = own.weightDecay;
        ++a.numSpans;
      }
      adam8bitKernel<T>
          <<<unsigned(last - first), kThreads, 0, computeStream()>>>(
              static_cast<const T *>(grad), master, expAvg, expAvgAbsmax,
              expAvgSq, expAvgSqAbsmax, p, n, first, adamw != 0, a);
      checkLaunch("adam8bit");
      // The next launch starts with the ranges that reach past its first
      // block.
      int64_t nextBegin = last * kQuantBlock;
      while (r < rr && decayRanges[2 * r + 1] <= nextBegin)
        ++r;
      first = last;
    }
  });
}

//===----------------------------------------------------------------------===//
// Adam with bf16 states
//===----------------------------------------------------------------------===//

namespace {

/// A grid-stride loop of hostAdamBf16's element: the bf16 moments widened,
/// OptimizerMath.h's adam8bitElement (every operation rounded once, as the CPU
/// file built without contractions), the moments rounded back to nearest
/// even. param is null when it is the master (f32); master is null when the
/// parameter is its own master.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    adamBf16Kernel(const T *grad, float *master, uint16_t *m, uint16_t *v,
                   T *param, int64_t n, bool decoupled, AdamArgs a) {
  const float gs = gradScale(a);
  const AdamConstants &k = a;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += threads) {
    float w = master ? master[i] : toF32(param[i]);
    float mi = bf16ToFloat(m[i]), vi = bf16ToFloat(v[i]);
    adam8bitElement(mulRn(toF32(grad[i]), gs), w, mi, vi, k, decoupled);
    m[i] = floatToBf16(mi);
    v[i] = floatToBf16(vi);
    if (master)
      master[i] = w;
    if (param)
      param[i] = fromF32<T>(w);
  }
}

template <typename T>
void launchAdamBf16(const T *grad, float *master, uint16_t *m, uint16_t *v,
                    T *param, int64_t n, bool decoupled, const AdamArgs &a) {
  static const int perSM =
      residentBlocks(reinterpret_cast<const void *>(&adamBf16Kernel<T>));
  unsigned grid = residentGrid(perSM, ceilDiv(n, kThreads));
  adamBf16Kernel<T><<<grid, kThreads, 0, computeStream()>>>(
      grad, master, m, v, param, n, decoupled, a);
  checkLaunch("adam (bf16 states)");
}

} // namespace

void zrt::cuda::adamBf16(int32_t dtype, const void *grad, float *master,
                         uint16_t *expAvg, uint16_t *expAvgSq, void *param,
                         int64_t n, int64_t step, double lr, double beta1,
                         double beta2, double eps, double weightDecay,
                         int32_t adamw, int32_t biasCorrection,
                         const zrt_lr_schedule *schedule,
                         const int64_t *decayRanges, const double *rangeDecays,
                         int32_t numDecayRanges, double maxGradNorm,
                         const float *stats, const float *lossScale,
                         double divisor, int32_t skip) {
  checkDims("adam (bf16 states)", n);
  if (!skip && step < 1)
    fatal("adam (bf16 states): step %lld must be >= 1", (long long)step);
  if (!skip && maxGradNorm > 0 && !stats)
    fatal("adam (bf16 states): gradient clipping needs the stats");
  if (n == 0)
    return;
  dispatch(dtype, "adam (bf16 states)", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    if (skip) {
      // Without masters the parameters are already the step's.
      if (p && master)
        launchCopyMaster<T, false>(master, p, n, 0);
      return;
    }
    if (schedule)
      lr = lrAt(*schedule, lr, beta1, beta2, step);
    AdamArgs a;
    static_cast<AdamConstants &>(a) = adamConstants(
        lr, beta1, beta2, eps, weightDecay, step, biasCorrection != 0);
    a.maxGradNorm = maxGradNorm;
    a.divisor = divisor;
    a.stats = stats;
    a.lossScale = lossScale;
    auto launch = [&](int64_t b, int64_t e, const AdamArgs &args) {
      if (b < e)
        launchAdamBf16<T>(static_cast<const T *>(grad) + b,
                          master ? master + b : nullptr, expAvg + b,
                          expAvgSq + b, p ? p + b : nullptr, e - b, adamw != 0,
                          args);
    };
    checkDecayRanges("adam (bf16 states)", decayRanges, rangeDecays,
                     numDecayRanges, n);
    int64_t at = 0;
    for (int32_t r = 0; r < numDecayRanges; ++r) {
      int64_t b = decayRanges[2 * r], e = decayRanges[2 * r + 1];
      launch(at, b, a);
      AdamArgs own = a;
      static_cast<AdamConstants &>(own) = withDecay(a, lr, rangeDecays[r]);
      launch(b, e, own);
      at = e;
    }
    launch(at, n, a);
  });
}
