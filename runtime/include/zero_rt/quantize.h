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
 * Values are quantized in blocks of zrt_quant_block(bits) consecutive
 * elements (the last block of a chunk may be shorter), each with one fp32
 * scale:
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
 * Blocks: 256 INT8 weights (ZRT_QUANT_BLOCK_INT8): DeepSpeed targets groups
 * of fewer than 8,000 elements; smaller blocks follow the weights' local
 * range more closely for scales of 1.6% of the INT8 payload. 128 INT4
 * gradients (ZRT_QUANT_BLOCK_INT4): DeepSpeed's qgZ splits a matrix into
 * max(rows, columns, world) groups, 128 values for every matrix of a GPT-2
 * of width 128. There, blocks of 256 mix the q and k columns of c_attn's
 * gradient with its v columns, 100 times larger, and round half of the q
 * and k values to 0; the loss then falls behind unquantized training. A
 * block starts at its part's start (a parameter's, unless a shard boundary
 * cuts the parameter). The scales cost 6.25% of the INT4 payload.
 * The CUDA kernel maps one block onto whole warps.
 * A chunk of n elements is quantized into zrt_quant_bytes(n, bits) bytes:
 *   [ceil(n / zrt_quant_block(bits)) fp32 scales][payload][0-3 zero bytes]
 * where the INT8 payload is n signed bytes, and the INT4 payload ceil(n / 2)
 * bytes, element 2i in the low nibble of byte i and element 2i + 1 in the
 * high nibble (two's complement; an odd n leaves the last high nibble 0).
 * The padding keeps each chunk a multiple of 4 bytes, so that the chunks of
 * several ranks lie back to back with aligned scales: a rank's shard is one
 * contiguous chunk and an all-gather of equal chunks gathers the quantized
 * buffer of the whole partition.
 *
 * Segmented shards (qwZ): a block must never mix parameters. A layer's
 * parameters lie back to back in its partition, so a layer norm's bias
 * (values near 0.005) can share a block with its gains of 1, whose scale of
 * 1/127 rounds the bias to 0 or +-0.008: 30-85% error, against the 0.7% of
 * every parameter quantized on its own. A rank's shard is therefore cut at
 * every parameter start inside it, and each piece is a chunk of its own,
 * laid back to back; the rank's slot is that, padded with zero bytes to the
 * largest slot of any rank, so that an all-gather of equal slots moves them
 * (zrt_quant_slot_bytes).
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_QUANTIZE_H
#define ZERO_RT_QUANTIZE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per quantization block (one fp32 scale each): of INT8 values
 * (qwZ's weights) and of INT4 values (qgZ's gradients). */
#define ZRT_QUANT_BLOCK_INT8 256
#define ZRT_QUANT_BLOCK_INT4 128

/* Whether `bits` is a supported quantization width (8 or 4). */
static inline int32_t zrt_quant_bits_valid(int32_t bits) {
  return bits == 8 || bits == 4;
}

/* The largest quantized magnitude of a `bits`-wide value. */
static inline int32_t zrt_quant_max(int32_t bits) {
  return bits == 4 ? 7 : 127;
}

/* Elements per block of `bits`-wide values. */
static inline int64_t zrt_quant_block(int32_t bits) {
  return bits == 4 ? ZRT_QUANT_BLOCK_INT4 : ZRT_QUANT_BLOCK_INT8;
}

/* Blocks (and scales) of a chunk of n `bits`-wide elements. */
static inline int64_t zrt_quant_blocks(int64_t n, int32_t bits) {
  int64_t block = zrt_quant_block(bits);
  return n > 0 ? (n + block - 1) / block : 0;
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
  int64_t bytes =
      4 * zrt_quant_blocks(n, bits) + zrt_quant_payload_bytes(n, bits);
  return (bytes + 3) / 4 * 4;
}

/* Bytes of the quantized slot of each of `ranks` shards of `shard` elements
 * (rank r's is [r * shard, (r + 1) * shard) of the partition) whose
 * parameters start at the ascending element offsets `starts[0..nstarts)`:
 * the largest, over the ranks, of the sum of zrt_quant_bytes over the
 * pieces of its shard between consecutive cuts. O(ranks + nstarts). */
static inline int64_t zrt_quant_slot_bytes(const int64_t *starts,
                                           int64_t nstarts, int64_t shard,
                                           int64_t ranks, int32_t bits) {
  int64_t most = 0, k = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t lo = r * shard, hi = lo + shard, begin = lo, bytes = 0;
    while (k < nstarts && starts[k] <= lo)
      ++k;
    for (int64_t j = k; j < nstarts && starts[j] < hi; ++j) {
      bytes += zrt_quant_bytes(starts[j] - begin, bits);
      begin = starts[j];
    }
    bytes += zrt_quant_bytes(hi - begin, bits);
    if (bytes > most)
      most = bytes;
  }
  return most;
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_QUANTIZE_H */
