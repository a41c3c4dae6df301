/*===- quantize.h - Block-quantized buffers: layout and bytes ------------===*
 *
 * Part of the zero-mlir project.
 *
 * The layout of a block-quantized buffer (ZeRO++'s qwZ weights, INT8, and
 * qgZ gradients, INT4), as inline functions with no dependency: the kernels
 * of both backends write and read it (zrt_quantize, zrt_dequantize), and the
 * compiler's memory planner and report size the staging buffers and the
 * collectives' bytes with the same functions.
 *
 * Values are quantized in blocks of ZRT_QUANT_BLOCK consecutive elements
 * (the last block of a chunk may be shorter), each with one fp32 scale:
 *   m     = the largest |x| of the block, every x widened to fp32 exactly
 *           (bf16 by its bits, never through fp16);
 *   scale = m / qmax in fp32 (qmax = 127 for 8 bits, 7 for 4 bits), a
 *           correctly rounded division;
 *   q     = clamp(round_half_even(x / scale), -qmax, qmax), again a correctly
 *           rounded fp32 division (the clamp catches a quotient a subnormal
 *           scale pushes past qmax);
 *   y     = float(q) * scale, one rounded fp32 product, then rounded to
 *           nearest even into the target type.
 * Special blocks: a block whose m is 0, or whose scale underflows to 0,
 * stores scale 0 and q = 0 and dequantizes to +0. A block holding a NaN or
 * an infinity stores the scale NaN (bits 0x7fc00000) and q = 0, and every
 * element of it dequantizes to the target type's quiet NaN (0x7fc00000,
 * bf16 0x7fc0, f16 0x7e00): a non-finite weight poisons its block loudly
 * instead of silently zeroing its neighbours.
 *
 * ZRT_QUANT_BLOCK = 256: DeepSpeed's qwZ quantizes groups of fewer than
 * 8,000 elements of the concatenated shards, so a block may mix tensors of
 * different magnitudes (a layer norm's gains of 1 beside weights of 0.02),
 * and the largest one sets the step of all. Training gpt2-tiny in bf16 on
 * 4 ranks with qwZ, blocks of 2048 lagged plain ZeRO-3's losses by up to
 * 10% within 200 steps, blocks of 256 by up to 6% and of 64 by 5%: 256
 * keeps most of the gain for scales of 1.6% of the INT8 payload. A power of
 * two keeps block boundaries on the power-of-two shard alignments of
 * padded partitions, and the CUDA kernel maps one block onto one warp of 8
 * elements per thread.
 * A chunk of n elements is quantized into zrt_quant_bytes(n, bits) bytes:
 *   [ceil(n / ZRT_QUANT_BLOCK) fp32 scales][payload][0-3 zero bytes]
 * where the INT8 payload is n signed bytes, and the INT4 payload ceil(n / 2)
 * bytes, element 2i in the low nibble of byte i and element 2i + 1 in the
 * high nibble (two's complement; an odd n leaves the last high nibble 0).
 * The padding keeps each chunk a multiple of 4 bytes, so that the chunks of
 * several ranks lie back to back with aligned scales: a rank's shard is one
 * contiguous chunk and an all-gather of equal chunks gathers the quantized
 * buffer of the whole partition.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_QUANTIZE_H
#define ZERO_RT_QUANTIZE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per quantization block (one fp32 scale each). */
#define ZRT_QUANT_BLOCK 256

/* Whether `bits` is a supported quantization width (8 or 4). */
static inline int32_t zrt_quant_bits_valid(int32_t bits) {
  return bits == 8 || bits == 4;
}

/* The largest quantized magnitude of a `bits`-wide value. */
static inline int32_t zrt_quant_max(int32_t bits) {
  return bits == 4 ? 7 : 127;
}

/* Blocks (and scales) of a chunk of n elements. */
static inline int64_t zrt_quant_blocks(int64_t n) {
  return n > 0 ? (n + ZRT_QUANT_BLOCK - 1) / ZRT_QUANT_BLOCK : 0;
}

/* Bytes of the payload of a chunk of n elements. */
static inline int64_t zrt_quant_payload_bytes(int64_t n, int32_t bits) {
  if (n <= 0)
    return 0;
  return bits == 4 ? (n + 1) / 2 : n;
}

/* Bytes of the quantized form of a chunk of n elements (scales, payload and
 * padding to a multiple of 4). */
static inline int64_t zrt_quant_bytes(int64_t n, int32_t bits) {
  int64_t bytes = 4 * zrt_quant_blocks(n) + zrt_quant_payload_bytes(n, bits);
  return (bytes + 3) / 4 * 4;
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_QUANTIZE_H */
