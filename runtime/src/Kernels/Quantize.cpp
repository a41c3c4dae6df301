//===- Quantize.cpp - Block quantization of weights and gradients ---------===//
//
// Part of the zero-mlir project.
//
// ZeRO++'s block-symmetric INT8 (qwZ) and INT4 (qgZ) quantization, with the
// rules and the layout of zero_rt/quantize.h and the per-element formulas of
// KernelMath.h: the CUDA backend's kernels (cuda/src/Kernels/Quantize.cu) give
// the same bits. Each block is converted to fp32 once, reduced to its largest
// magnitude as integer bits and quantized in `omp simd` loops; blocks are
// independent (the INT4 payload of a block is whole bytes), so the threads
// split the blocks of every chunk.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/quantize.h"
#include "Driver/Trace.h"
#include "Kernels/Kernels.h"

#include <algorithm>
#include <cstring>

using namespace zrt;

namespace {

/// The largest block: the size of the kernels' per-block buffers.
constexpr int64_t kQuantBlockMax = ZRT_QUANT_BLOCK_INT8 > ZRT_QUANT_BLOCK_INT4
                                       ? ZRT_QUANT_BLOCK_INT8
                                       : ZRT_QUANT_BLOCK_INT4;

/// Quantizes block b of every chunk: block `flat` of the flattened
/// (chunk, block) index space.
template <typename T>
void quantizeBlock(const T *src, int64_t n, int32_t bits, uint8_t *dst,
                   int64_t flat, float *buf, int8_t *q) {
  int64_t blocks = zrt_quant_blocks(n, bits), block = zrt_quant_block(bits);
  int64_t c = flat / blocks, b = flat % blocks;
  int64_t off = b * block, len = std::min(block, n - off);
  uint8_t *chunk = dst + c * zrt_quant_bytes(n, bits);
  uint8_t *payload = chunk + 4 * blocks;
  const float *x = loadF32(src + c * n + off, len, buf);
  uint32_t maxBits = 0;
#pragma omp simd reduction(max : maxBits)
  for (int64_t i = 0; i < len; ++i)
    maxBits = std::max(maxBits, quantAbsBits(x[i]));
  int32_t qmax = zrt_quant_max(bits);
  float scale = quantScale(maxBits, qmax);
  std::memcpy(chunk + 4 * b, &scale, sizeof(scale));
  if (quantScaleUsable(scale)) {
    float fmax = float(qmax);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i)
      q[i] = int8_t(quantizeValue(x[i], scale, fmax));
  } else {
    std::fill(q, q + len, int8_t(0));
  }
  if (bits == 8) {
    std::memcpy(payload + off, q, size_t(len));
    return;
  }
  uint8_t *out = payload + off / 2;
  int64_t pairs = len / 2;
#pragma omp simd
  for (int64_t i = 0; i < pairs; ++i)
    out[i] = uint8_t((uint8_t(q[2 * i]) & 0xfu) |
                     ((uint8_t(q[2 * i + 1]) & 0xfu) << 4));
  if (len % 2)
    out[pairs] = uint8_t(uint8_t(q[len - 1]) & 0xfu);
}

/// Dequantizes block b (elements [off, off + len)) of a chunk of `blocks`
/// blocks into out.
template <typename T>
void dequantizeBlockTo(const uint8_t *chunk, int64_t blocks, int64_t b,
                       int64_t off, int64_t len, int32_t bits, T *out,
                       float *buf) {
  const uint8_t *payload = chunk + 4 * blocks;
  float scale;
  std::memcpy(&scale, chunk + 4 * b, sizeof(scale));
  if (scale != scale) {
    // The type's quiet NaN, written as bits (a conversion of the fp32 NaN
    // would keep or canonicalize its payload differently per backend).
    float *y = outF32(out, buf);
    std::fill(y, y + len, bitsFloat(kQuantNaN));
    storeF32(y, out, len);
    return;
  }
  float *y = outF32(out, buf);
  if (bits == 8) {
    const int8_t *q = reinterpret_cast<const int8_t *>(payload + off);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i)
      y[i] = dequantizeValue(int32_t(q[i]), scale);
  } else {
    const uint8_t *in = payload + off / 2;
    int64_t pairs = len / 2;
#pragma omp simd
    for (int64_t i = 0; i < pairs; ++i) {
      uint32_t byte = in[i];
      y[2 * i] = dequantizeValue(quantNibble(byte), scale);
      y[2 * i + 1] = dequantizeValue(quantNibble(byte >> 4), scale);
    }
    if (len % 2)
      y[len - 1] = dequantizeValue(quantNibble(in[pairs]), scale);
  }
  storeF32(y, out, len);
}

template <typename T>
void dequantizeBlock(const uint8_t *src, int64_t n, int32_t bits, T *dst,
                     int64_t flat, float *buf) {
  int64_t blocks = zrt_quant_blocks(n, bits), block = zrt_quant_block(bits);
  int64_t c = flat / blocks, b = flat % blocks;
  int64_t off = b * block, len = std::min(block, n - off);
  dequantizeBlockTo(src + c * zrt_quant_bytes(n, bits), blocks, b, off, len,
                    bits, dst + c * n + off, buf);
}

} // namespace

extern "C" void zrt_dequantize_add(const void *src, int64_t n, int32_t bits,
                                   float *acc) {
  KernelSpan span("zrt_dequantize_add");
  checkQuantArgs("zrt_dequantize_add", n, 1, bits);
  const uint8_t *in = static_cast<const uint8_t *>(src);
  int64_t blocks = zrt_quant_blocks(n, bits), block = zrt_quant_block(bits);
  parallelFor(blocks, ceilDiv(kGrain, block), [&](int64_t begin, int64_t end) {
    alignas(64) float buf[kQuantBlockMax];
    alignas(64) float y[kQuantBlockMax];
    for (int64_t f = begin; f < end; ++f) {
      int64_t off = f * block;
      int64_t len = std::min(block, n - off);
      dequantizeBlockTo(in, blocks, f, off, len, bits, y, buf);
      float *a = acc + off;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i)
        a[i] += y[i];
    }
  });
}

extern "C" void zrt_quantize(int32_t dtype, const void *src, int64_t n,
                             int64_t chunks, int32_t bits, void *dst) {
  KernelSpan span("zrt_quantize");
  checkQuantArgs("zrt_quantize", n, chunks, bits);
  // Padding bytes are defined (0), so a gathered buffer is reproducible.
  int64_t bytes = zrt_quant_bytes(n, bits);
  int64_t used =
      4 * zrt_quant_blocks(n, bits) + zrt_quant_payload_bytes(n, bits);
  if (bytes > used)
    for (int64_t c = 0; c < chunks; ++c)
      std::memset(static_cast<uint8_t *>(dst) + c * bytes + used, 0,
                  size_t(bytes - used));
  int64_t total = chunks * zrt_quant_blocks(n, bits);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(src);
    uint8_t *out = static_cast<uint8_t *>(dst);
    parallelFor(total, ceilDiv(kGrain, zrt_quant_block(bits)),
                [&](int64_t begin, int64_t end) {
                  alignas(64) float buf[kQuantBlockMax];
                  alignas(64) int8_t q[kQuantBlockMax];
                  for (int64_t f = begin; f < end; ++f)
                    quantizeBlock(in, n, bits, out, f, buf, q);
                });
  });
}

extern "C" void zrt_dequantize(int32_t dtype, const void *src, int64_t n,
                               int64_t chunks, int32_t bits, void *dst) {
  KernelSpan span("zrt_dequantize");
  checkQuantArgs("zrt_dequantize", n, chunks, bits);
  int64_t total = chunks * zrt_quant_blocks(n, bits);
  dispatchFloat(dtype, [&](auto tag) {
    using T = decltype(tag);
    const uint8_t *in = static_cast<const uint8_t *>(src);
    T *out = static_cast<T *>(dst);
    parallelFor(total, ceilDiv(kGrain, zrt_quant_block(bits)),
                [&](int64_t begin, int64_t end) {
                  alignas(64) float buf[kQuantBlockMax];
                  for (int64_t f = begin; f < end; ++f)
                    dequantizeBlock(in, n, bits, out, f, buf);
                });
  });
}
