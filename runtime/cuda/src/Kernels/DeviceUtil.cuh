//===- DeviceUtil.cuh - Device helpers of the CUDA kernels ------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Packed 16-byte accesses and reductions whose order depends on the problem
// shape only: results are bitwise reproducible and do not change with
// pointer alignment (aligned rows are only loaded differently, not split
// differently). The per-element formulas shared with the CPU backend are in
// src/Kernels/KernelMath.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CUDA_DEVICE_UTIL_CUH
#define ZERO_RT_CUDA_DEVICE_UTIL_CUH

#include "Kernels/KernelMath.h"
#include "Support/CudaSupport.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace zrt {
namespace cuda {

constexpr unsigned kFullMask = 0xffffffffu;

inline bool isAligned(const void *p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) == 0;
}

/// Elements of T in 16 bytes.
template <typename T>
__host__ __device__ constexpr int vecWidth() {
  return int(16 / sizeof(T));
}

/// Bytes per element of a zrt_dtype; aborts on an unknown one.
inline int64_t elementSize(int32_t dtype, const char *kernel) {
  int64_t size = 0;
  dispatch(dtype, kernel, [&](auto tag) { size = int64_t(sizeof(tag)); });
  return size;
}

/// Smallest power of two >= n (n >= 1).
inline int64_t nextPow2(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

/// Threads of a block that reduces one row of `packs` packs: about four
/// packs per thread, a power of two in [32, 1024]. A function of the shape
/// only, so the reduction order is too.
inline int rowThreads(int64_t packs) {
  int64_t t = nextPow2((packs + 3) / 4);
  return int(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

__device__ inline int64_t globalThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t globalThreads() {
  return int64_t(gridDim.x) * blockDim.x;
}

//===----------------------------------------------------------------------===//
// Packed accesses: W elements at p, converted to or from fp32. W * sizeof(T)
// is a multiple of 16 (one or two uint4 accesses) and p is 16-byte aligned.
//===----------------------------------------------------------------------===//

template <int W, typename T>
__device__ inline void loadPack(const T *p, float *out) {
  if constexpr (W == 1) {
    out[0] = toF32(*p);
  } else {
    static_assert((W * sizeof(T)) % 16 == 0, "packs are whole uint4s");
    constexpr int kWords = int(W * sizeof(T) / 16);
    uint4 raw[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w)
      raw[w] = reinterpret_cast<const uint4 *>(p)[w];
    // memcpy, not a pointer cast, to reinterpret the words: it stays in
    // registers and keeps type-based alias analysis out of it.
    T e[W];
    memcpy(e, raw, sizeof(raw));
#pragma unroll
    for (int i = 0; i < W; ++i)
      out[i] = toF32(e[i]);
  }
}

template <int W, typename T>
__device__ inline void storePack(T *p, const float *in) {
  if constexpr (W == 1) {
    *p = fromF32<T>(in[0]);
  } else {
    static_assert((W * sizeof(T)) % 16 == 0, "packs are whole uint4s");
    constexpr int kWords = int(W * sizeof(T) / 16);
    T e[W];
#pragma unroll
    for (int i = 0; i < W; ++i)
      e[i] = fromF32<T>(in[i]);
    uint4 raw[kWords];
    memcpy(raw, e, sizeof(raw));
#pragma unroll
    for (int w = 0; w < kWords; ++w)
      reinterpret_cast<uint4 *>(p)[w] = raw[w];
  }
}

/// Elements [c, c + W) of a row of n elements, zero past the end. kAligned:
/// the row is 16-byte aligned and n a multiple of W, so a span is all in or
/// all out and loads as one pack.
template <int W, bool kAligned, typename T>
__device__ inline void loadSpan(const T *row, int64_t c, int64_t n,
                                float *out) {
  if (kAligned) {
    if (c < n) {
      loadPack<W>(row + c, out);
    } else {
#pragma unroll
      for (int i = 0; i < W; ++i)
        out[i] = 0.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i)
      out[i] = c + i < n ? toF32(row[c + i]) : 0.0f;
  }
}

template <int W, bool kAligned, typename T>
__device__ inline void storeSpan(T *row, int64_t c, int64_t n,
                                 const float *in) {
  if (kAligned) {
    if (c < n)
      storePack<W>(row + c, in);
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i)
      if (c + i < n)
        row[c + i] = fromF32<T>(in[i]);
  }
}

//===----------------------------------------------------------------------===//
// Reductions: fixed butterfly and tree shapes, no atomics
//===----------------------------------------------------------------------===//

/// Every lane gets the sum (the butterfly adds the same pairs on both
/// sides, and addition is commutative, so all lanes agree bitwise).
template <typename V>
__device__ inline V warpSum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

/// Maximum as the CPU backend takes it (a select that skips NaN).
__device__ inline float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(kFullMask, v, o);
    v = other > v ? other : v;
  }
  return v;
}

/// Sum over a 1-D block (blockDim.x a multiple of 32) that every thread
/// gets; `shared` holds 32 values. Safe to call repeatedly.
template <typename V>
__device__ inline V blockSum(V v, V *shared) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int warps = blockDim.x / 32;
  v = warpSum(v);
  __syncthreads(); // The previous call's readers are done with `shared`.
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  return warpSum(lane < warps ? shared[lane] : V(0));
}

__device__ inline float blockMax(float v, float *shared) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int warps = blockDim.x / 32;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  return warpMax(lane < warps ? shared[lane] : -INFINITY);
}

/// Column sums of [rows, cols] data into kOuts fp32 results per column,
/// deterministically and without scratch: a block of (kColTile, kRowLanes)
/// threads owns kColTile columns, thread row ty adds rows ty, ty +
/// kRowLanes, ... in order, and a fixed shared-memory tree combines the
/// row lanes. term(r, c, acc) adds element (r, c); store(c, sums) writes.
/// Without scratch the grid is one block per 16 columns (48 for GPT-2's
/// 768), so each block is as wide as a block goes: 64 row lanes keep twice
/// the loads in flight of 32 (docs/benchmarks.md, GPU, has the times).
constexpr int kColTile = 16;
constexpr int kRowLanes = 64;
constexpr int kColumnThreads = kColTile * kRowLanes;

template <int kOuts, typename Term, typename Store>
__device__ inline void columnReduce(int64_t rows, int64_t cols,
                                    const Term &term, const Store &store) {
  __shared__ float part[kOuts][kRowLanes][kColTile + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tiles = (cols + kColTile - 1) / kColTile;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t c = tile * kColTile + tx;
    float acc[kOuts];
#pragma unroll
    for (int o = 0; o < kOuts; ++o)
      acc[o] = 0.0f;
    if (c < cols) {
#pragma unroll 4
      for (int64_t r = ty; r < rows; r += kRowLanes)
        term(r, c, acc);
    }
#pragma unroll
    for (int o = 0; o < kOuts; ++o)
      part[o][ty][tx] = acc[o];
    __syncthreads();
#pragma unroll
    for (int s = kRowLanes / 2; s > 0; s >>= 1) {
      if (ty < s) {
#pragma unroll
        for (int o = 0; o < kOuts; ++o)
          part[o][ty][tx] += part[o][ty + s][tx];
      }
      __syncthreads();
    }
    if (ty == 0 && c < cols) {
      float sums[kOuts];
#pragma unroll
      for (int o = 0; o < kOuts; ++o)
        sums[o] = part[o][0][tx];
      store(c, sums);
    }
    __syncthreads(); // `part` is rewritten by the next tile.
  }
}

//===----------------------------------------------------------------------===//
// Row kernels. Elements are dealt to threads in packs of vecWidth<T>()
// whether or not the row is aligned (aligned rows load each pack at once),
// so the order of every reduction depends on the row length only.
//===----------------------------------------------------------------------===//

/// Rows up to this long take one warp each, held in registers.
constexpr int64_t kWarpCols = 1024;

template <int N>
using IntC = std::integral_constant<int, N>;

/// Calls fn(IntC<kIters>()) for a warp-per-row kernel over rows of 1 to
/// kWarpCols elements: kIters packs per lane, a power of two.
template <typename T, typename Fn>
void dispatchWarpIters(int64_t cols, Fn &&fn) {
  constexpr int64_t kPackCols = 32 * vecWidth<T>();
  switch (nextPow2((cols + kPackCols - 1) / kPackCols)) {
  case 1:
    fn(IntC<1>());
    return;
  case 2:
    fn(IntC<2>());
    return;
  case 4:
    fn(IntC<4>());
    return;
  default:
    if constexpr (8 * kPackCols <= kWarpCols)
      fn(IntC<8>());
    return;
  }
}

/// Threads of a warp-per-row kernel's block (four rows), and the most of a
/// block-per-row kernel's.
constexpr int kRowWarpThreads = 128;
constexpr int kRowBlockThreads = 1024;

/// Threads of a block-per-row kernel over rows of `cols` elements of T.
template <typename T>
int blockThreadsFor(int64_t cols) {
  return rowThreads((cols + vecWidth<T>() - 1) / vecWidth<T>());
}

/// Launches a row kernel over `rows` rows of `cols` elements of T: calls
/// launch(IntC<kIters>(), kAligned, grid, threads) with kAligned a
/// std::bool_constant of `aligned` and kIters > 0 for a warp-per-row kernel
/// (rows up to kWarpCols long), 0 for a block-per-row kernel.
template <typename T, typename Launch>
void launchRows(int64_t rows, int64_t cols, bool aligned,
                const Launch &launch) {
  auto withAlignment = [&](auto iters, unsigned grid, int threads) {
    if (aligned)
      launch(iters, std::true_type(), grid, threads);
    else
      launch(iters, std::false_type(), grid, threads);
  };
  if (cols <= kWarpCols) {
    unsigned grid = gridFor(rows, kRowWarpThreads / 32);
    dispatchWarpIters<T>(
        cols, [&](auto iters) { withAlignment(iters, grid, kRowWarpThreads); });
  } else {
    int threads = blockThreadsFor<T>(cols);
    withAlignment(IntC<0>(), gridFor(rows, 1), threads);
  }
}

/// Whether every row of `cols` elements at these pointers is 16-byte
/// aligned and made of whole packs.
template <typename T>
bool rowsAligned(int64_t cols, std::initializer_list<const void *> ptrs) {
  bool ok = cols % vecWidth<T>() == 0;
  for (const void *p : ptrs)
    ok = ok && isAligned(p, 16);
  return ok;
}

/// Column of element e of the lane's pack k in a warp-held row.
template <typename T>
__device__ inline int64_t warpCol(int k, int lane, int e) {
  return (int64_t(k) * 32 + lane) * vecWidth<T>() + e;
}

template <int kIters, bool kAligned, typename T>
__device__ inline void warpLoadRow(const T *row, int64_t cols, int lane,
                                   float *v) {
  constexpr int kVec = vecWidth<T>();
#pragma unroll
  for (int k = 0; k < kIters; ++k)
    loadSpan<kVec, kAligned>(row, warpCol<T>(k, lane, 0), cols, v + k * kVec);
}

template <int kIters, bool kAligned, typename T>
__device__ inline void warpStoreRow(T *row, int64_t cols, int lane,
                                    const float *v) {
  constexpr int kVec = vecWidth<T>();
#pragma unroll
  for (int k = 0; k < kIters; ++k)
    storeSpan<kVec, kAligned>(row, warpCol<T>(k, lane, 0), cols, v + k * kVec);
}

/// Calls fn(c, v) on the packs of a row that this thread of a 1-D block
/// owns: v holds elements [c, c + vecWidth<T>()), zero past the end.
template <bool kAligned, typename T, typename Fn>
__device__ inline void forBlockRow(const T *row, int64_t cols, const Fn &fn) {
  constexpr int kVec = vecWidth<T>();
  for (int64_t c = int64_t(threadIdx.x) * kVec; c < cols;
       c += int64_t(blockDim.x) * kVec) {
    float v[kVec];
    loadSpan<kVec, kAligned>(row, c, cols, v);
    fn(c, v);
  }
}

} // namespace cuda
} // namespace zrt

#endif // ZERO_RT_CUDA_DEVICE_UTIL_CUH
