//===- Quantize.cu - Block quantization of weights and gradients ----------===//
//
// Part of the zero-mlir project.
//
// zrt_quantize and zrt_dequantize on the GPU, bit for bit the CPU backend's
// (src/Kernels/Quantize.cpp): the rules and layout of zero_rt/quantize.h, the
// formulas of KernelMath.h, whose device side pins every rounding
// (__fdiv_rn, __fmul_rn, rintf), so no contraction can differ. One thread
// block per quantization block: ZRT_QUANT_BLOCK_INT8 / 8 threads (whole
// warps) of four element pairs each (pair p = thread + k * threads holds
// elements 2p and 2p + 1, one INT4 byte; the pairs past a shorter block,
// INT4's, are idle), the block's largest |x| bits an exact integer maximum.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Kernels/DeviceUtil.cuh"
#include "Support/Support.h"
#include "zero_rt/quantize.h"

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kPairsPerThread = 4;
constexpr int kThreads = ZRT_QUANT_BLOCK_INT8 / (2 * kPairsPerThread);
static_assert(kThreads % 32 == 0 && kThreads <= 1024,
              "a quantization block is whole warps of four pairs a thread");
static_assert(ZRT_QUANT_BLOCK_INT4 <= ZRT_QUANT_BLOCK_INT8 &&
                  ZRT_QUANT_BLOCK_INT4 % 2 == 0,
              "an INT4 block fits the threads of an INT8 one, in whole bytes");

/// The quiet NaN of a storage type, as dequantization writes it.
template <typename T>
__device__ inline T quantNaN();
template <>
__device__ inline float quantNaN<float>() {
  return __uint_as_float(kQuantNaN);
}
template <>
__device__ inline __nv_bfloat16 quantNaN<__nv_bfloat16>() {
  return __ushort_as_bfloat16(0x7fc0);
}
template <>
__device__ inline __half quantNaN<__half>() {
  return __ushort_as_half(0x7e00);
}

struct QuantShape {
  int64_t n;
  int64_t block;  // elements per block
  int64_t blocks; // per chunk
  int64_t bytes;  // per quantized chunk
  int64_t used;   // bytes of a chunk before its padding
  int32_t bits;
  int32_t qmax;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantizeKernel(const T *src, uint8_t *dst, QuantShape s) {
  __shared__ uint32_t warpMaxBits[kThreads / 32];
  int64_t c = int64_t(blockIdx.x) / s.blocks,
          b = int64_t(blockIdx.x) % s.blocks;
  int64_t off = b * s.block;
  int64_t len = s.n - off < s.block ? s.n - off : s.block;
  const T *x = src + c * s.n + off;
  float v[2 * kPairsPerThread];
  uint32_t maxBits = 0;
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    int64_t i = 2 * (int64_t(threadIdx.x) + k * kThreads);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      v[2 * k + e] = i + e < len ? toF32(x[i + e]) : 0.0f;
      maxBits = max(maxBits, quantAbsBits(v[2 * k + e]));
    }
  }
  maxBits = __reduce_max_sync(kFullMask, maxBits);
  if (threadIdx.x % 32 == 0)
    warpMaxBits[threadIdx.x / 32] = maxBits;
  __syncthreads();
  maxBits = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w)
    maxBits = max(maxBits, warpMaxBits[w]);

  float scale = quantScale(maxBits, s.qmax);
  uint8_t *chunk = dst + c * s.bytes;
  uint8_t *payload = chunk + 4 * s.blocks;
  if (threadIdx.x == 0)
    reinterpret_cast<float *>(chunk)[b] = scale;
  bool usable = quantScaleUsable(scale);
  float fmax = float(s.qmax);
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    int64_t i = 2 * (int64_t(threadIdx.x) + k * kThreads);
    if (i >= len)
      continue;
    int32_t q0 = usable ? int32_t(quantizeValue(v[2 * k], scale, fmax)) : 0;
    int32_t q1 = usable && i + 1 < len
                     ? int32_t(quantizeValue(v[2 * k + 1], scale, fmax))
                     : 0;
    if (s.bits == 8) {
      payload[off + i] = uint8_t(int8_t(q0));
      if (i + 1 < len)
        payload[off + i + 1] = uint8_t(int8_t(q1));
    } else {
      payload[(off + i) / 2] =
          uint8_t((uint32_t(q0) & 0xfu) | ((uint32_t(q1) & 0xfu) << 4));
    }
  }
  // The chunk's padding bytes, written by its last block.
  if (b == s.blocks - 1 && threadIdx.x < 4) {
    if (s.used + threadIdx.x < s.bytes)
      chunk[s.used + threadIdx.x] = 0;
  }
}

/// The code of element j of a chunk's payload: a signed byte at 8 bits, a
/// nibble (low first) at 4.
__device__ inline int32_t codeAt(const uint8_t *payload, int64_t j,
                                 int32_t bits) {
  return bits == 8 ? int32_t(int8_t(payload[j]))
                   : quantNibble(uint32_t(payload[j / 2]) >> (4 * (j & 1)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    dequantizeKernel(const uint8_t *src, T *dst, QuantShape s) {
  int64_t c = int64_t(blockIdx.x) / s.blocks,
          b = int64_t(blockIdx.x) % s.blocks;
  int64_t off = b * s.block;
  int64_t len = s.n - off < s.block ? s.n - off : s.block;
  const uint8_t *chunk = src + c * s.bytes;
  const uint8_t *payload = chunk + 4 * s.blocks;
  float scale = reinterpret_cast<const float *>(chunk)[b];
  T *y = dst + c * s.n + off;
  bool nan = scale != scale;
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    int64_t i = 2 * (int64_t(threadIdx.x) + k * kThreads);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (i + e >= len)
        continue;
      int32_t q = codeAt(payload, off + i + e, s.bits);
      y[i + e] = nan ? quantNaN<T>() : fromF32<T>(dequantizeValue(q, scale));
    }
  }
}

/// acc += the dequantization of one chunk, one rounded fp32 addition per
/// element (__fadd_rn, as the CPU's).
__global__ void __launch_bounds__(kThreads)
    dequantizeAddKernel(const uint8_t *src, float *acc, QuantShape s) {
  int64_t b = int64_t(blockIdx.x);
  int64_t off = b * s.block;
  int64_t len = s.n - off < s.block ? s.n - off : s.block;
  const uint8_t *payload = src + 4 * s.blocks;
  float scale = reinterpret_cast<const float *>(src)[b];
  float *y = acc + off;
  bool nan = scale != scale;
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    int64_t i = 2 * (int64_t(threadIdx.x) + k * kThreads);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (i + e >= len)
        continue;
      int32_t q = codeAt(payload, off + i + e, s.bits);
      float v = nan ? quantNaN<float>() : dequantizeValue(q, scale);
      y[i + e] = __fadd_rn(y[i + e], v);
    }
  }
}

QuantShape shapeOf(int64_t n, int32_t bits) {
  int64_t blocks = zrt_quant_blocks(n, bits);
  return QuantShape{n,
                    zrt_quant_block(bits),
                    blocks,
                    zrt_quant_bytes(n, bits),
                    4 * blocks + zrt_quant_payload_bytes(n, bits),
                    bits,
                    zrt_quant_max(bits)};
}

/// Checks a (de)quantization of `chunks` chunks of n elements, sets its
/// shape and returns its grid (one block per quantization block), 0 when
/// there is nothing to do.
unsigned launchGrid(const char *what, int64_t n, int64_t chunks, int32_t bits,
                    QuantShape &s) {
  checkQuantArgs(what, n, chunks, bits);
  s = shapeOf(n, bits);
  int64_t grid = chunks * s.blocks;
  if (grid > int64_t(0x7fffffff))
    fatal("%s: %lld blocks exceed one launch", what, (long long)grid);
  return unsigned(grid);
}

} // namespace

namespace zrt {
namespace cuda {

void quantize(int32_t dtype, const void *src, int64_t n, int64_t chunks,
              int32_t bits, void *dst) {
  QuantShape s;
  unsigned grid = launchGrid("zrt_quantize", n, chunks, bits, s);
  if (grid == 0)
    return;
  dispatch(dtype, "zrt_quantize", [&](auto tag) {
    using T = decltype(tag);
    quantizeKernel<T><<<grid, kThreads, 0, computeStream()>>>(
        static_cast<const T *>(src), static_cast<uint8_t *>(dst), s);
    checkLaunch("zrt_quantize");
  });
}

void dequantize(int32_t dtype, const void *src, int64_t n, int64_t chunks,
                int32_t bits, void *dst) {
  QuantShape s;
  unsigned grid = launchGrid("zrt_dequantize", n, chunks, bits, s);
  if (grid == 0)
    return;
  dispatch(dtype, "zrt_dequantize", [&](auto tag) {
    using T = decltype(tag);
    dequantizeKernel<T><<<grid, kThreads, 0, computeStream()>>>(
        static_cast<const uint8_t *>(src), static_cast<T *>(dst), s);
    checkLaunch("zrt_dequantize");
  });
}

void dequantizeAdd(const void *src, int64_t n, int32_t bits, float *acc) {
  QuantShape s;
  unsigned grid = launchGrid("zrt_dequantize_add", n, 1, bits, s);
  if (grid == 0)
    return;
  dequantizeAddKernel<<<grid, kThreads, 0, computeStream()>>>(
      static_cast<const uint8_t *>(src), acc, s);
  checkLaunch("zrt_dequantize_add");
}

} // namespace cuda
} // namespace zrt
