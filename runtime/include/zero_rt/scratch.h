/*===- scratch.h - Heap scratch of the runtime's kernels -----------------===*
 *
 * Part of the zero-mlir project.
 *
 * The exact bytes of heap scratch each kernel allocates, as inline functions
 * with no dependency: the one home of each formula. The kernels of both
 * backends allocate by them, the tests compare the measured scratch with
 * them, and the compiler's kernel models (which the memory planner adds to
 * the planned peak) return them, so all compute the same numbers. A kernel
 * with scratch adds its zrt_scratch_<kernel> here; kernels not listed
 * allocate none.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_SCRATCH_H
#define ZERO_RT_SCRATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 16-bit matmuls convert fp32 panels of at most this many rows/columns. */
#define ZRT_MATMUL_PANEL 512

static inline int64_t zrt_scratch_min(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* zrt_matmul: 0 for f32 (dtype 0); for 16-bit types the fp32 panels of
 * op(A) [mb, k], op(B) [k, nb] and C [mb, nb]. Rows of A fold across the
 * batch when A is not transposed and B is shared. */
static inline int64_t zrt_scratch_matmul(int32_t dtype, int64_t batch,
                                         int64_t m, int64_t n, int64_t k,
                                         int32_t transpose_a,
                                         int32_t b_is_batched) {
  if (dtype == 0 || batch == 0 || m == 0 || n == 0 || k == 0)
    return 0;
  int64_t rows = (!transpose_a && !b_is_batched) ? batch * m : m;
  int64_t mb = zrt_scratch_min(rows, ZRT_MATMUL_PANEL);
  int64_t nb = zrt_scratch_min(n, ZRT_MATMUL_PANEL);
  return 4 * (mb * k + k * nb + mb * nb);
}

/* zrt_layer_norm_grad: the per-row mean and rstd (two floats). */
static inline int64_t zrt_scratch_layer_norm_grad(int64_t rows, int64_t cols) {
  return cols > 0 ? rows * 8 : 0;
}

/* zrt_rms_norm_grad: the per-row rsqrt(mean(x^2) + eps) (one float). */
static inline int64_t zrt_scratch_rms_norm_grad(int64_t rows, int64_t cols) {
  return cols > 0 ? rows * 4 : 0;
}

/* zrt_attention_backward without sinks: log-sum-exp and delta, one float
 * each per query row. */
static inline int64_t zrt_scratch_attention_grad(int64_t batch, int64_t heads,
                                                 int64_t seq,
                                                 int64_t head_dim) {
  return head_dim > 0 ? 2 * batch * heads * seq * 4 : 0;
}

/* zrt_embedding_grad: positions grouped by id (a counting sort): vocab + 1
 * bucket ends and num_ids positions, int64 each. */
static inline int64_t zrt_scratch_embedding_grad(int64_t num_ids,
                                                 int64_t vocab, int64_t dim) {
  (void)dim;
  return (vocab + 1 + num_ids) * 8;
}

/* zrt_linear_cross_entropy (grad 0) and its gradient (grad 1) over rows x
 * hidden inputs and a vocab x hidden weight, `chunk` rows at a time. f32:
 * one chunk of fp32 logits, min(chunk, rows) x vocab. 16-bit (dtype 1 or
 * 2), which computes as the unchunked 16-bit matmuls and loss do: one
 * chunk of 16-bit logits and, at a time, one 16-bit matmul's scratch
 * (zrt_scratch_matmul: the chunk's logits, and for the gradient its rows
 * of dx); the gradient also the chunk's logits gradient and input rows in
 * fp32 and the weight's gradient summed over chunks in fp32, vocab x hidden,
 * rounded once at the end as the unchunked product rounds it. */
static inline int64_t zrt_scratch_linear_cross_entropy(int32_t dtype,
                                                       int64_t rows,
                                                       int64_t hidden,
                                                       int64_t vocab,
                                                       int64_t chunk,
                                                       int32_t grad) {
  int64_t n = zrt_scratch_min(chunk, rows);
  if (dtype == 0 || n == 0)
    return n * vocab * 4;
  int64_t matmul = zrt_scratch_matmul(dtype, 1, n, vocab, hidden, 0, 0);
  if (!grad)
    return n * vocab * 2 + matmul;
  int64_t dx = zrt_scratch_matmul(dtype, 1, n, hidden, vocab, 0, 0);
  return n * vocab * 2 + n * vocab * 4 + n * hidden * 4 + vocab * hidden * 4 +
         (matmul > dx ? matmul : dx);
}

/* The rows of one tile of zrt_tiled_mlp: ceil(rows / tiles), at most rows. */
static inline int64_t zrt_tiled_mlp_tile_rows(int64_t rows, int64_t tiles) {
  return tiles < 1 ? rows : zrt_scratch_min((rows + tiles - 1) / tiles, rows);
}

/* zrt_tiled_mlp: one tile's fp32 gate and up (the activation is written
 * over the gate), 2 x tile rows x inter (the kernel is f32 only). */
static inline int64_t zrt_scratch_tiled_mlp(int64_t rows, int64_t inter,
                                            int64_t tiles) {
  return 2 * zrt_tiled_mlp_tile_rows(rows, tiles) * inter * 4;
}

/* zrt_tiled_mlp_grad: one tile's gate, up and activation (then the
 * activation's gradient over it), 3 x tile rows x inter. */
static inline int64_t zrt_scratch_tiled_mlp_grad(int64_t rows, int64_t inter,
                                                 int64_t tiles) {
  return 3 * zrt_tiled_mlp_tile_rows(rows, tiles) * inter * 4;
}

/* zrt_moe_router: a row's (score, expert) selection queue, 16 bytes an
 * expert (torch.topk's pairs), and its fp32 scores. */
static inline int64_t zrt_scratch_moe_router(int64_t experts) {
  return experts * (16 + 4);
}

/* zrt_moe_router with groups: the row's scratch, then the groups' (score,
 * group) queue and a kept flag per group. */
static inline int64_t zrt_scratch_moe_router_grouped(int64_t experts,
                                                     int64_t groups) {
  return zrt_scratch_moe_router(experts) + groups * (16 + 1);
}

/* zrt_moe_aux_loss and its gradient: the router's row scratch, then the
 * experts' counts and probability sums (double each). */
static inline int64_t zrt_scratch_moe_aux_loss(int64_t experts) {
  return zrt_scratch_moe_router(experts) + experts * 16;
}

/* zrt_grouped_matmul: 0 for f32; 16-bit types run each expert's product
 * through zrt_matmul's fp32 panels, sized once for the worst expert (all
 * `rows` rows), so the scratch does not depend on the routing. */
static inline int64_t zrt_scratch_grouped_matmul(int32_t dtype, int64_t rows,
                                                 int64_t in_dim,
                                                 int64_t out_dim) {
  return zrt_scratch_matmul(dtype, 1, rows, out_dim, in_dim, 0, 0);
}

/* zrt_grouped_matmul_weight_grad: as above, each expert's [in, out] (or
 * [out, in]) gradient contracting at most `rows` rows; the panels' size is
 * the same for both layouts. */
static inline int64_t zrt_scratch_grouped_matmul_weight_grad(int32_t dtype,
                                                             int64_t rows,
                                                             int64_t in_dim,
                                                             int64_t out_dim) {
  return zrt_scratch_matmul(dtype, 1, in_dim, out_dim, rows, 1, 0);
}

/* Muon's step of one whole [rows, cols] matrix (src/Optimizer/Muon.h), on
 * either backend: with m = min(rows, cols) and n = max, Newton-Schulz's X and
 * its product sum [m, n] and the Gram matrix and its update [m, m], in fp32.
 * The step takes it from its caller: the planner counts it as the update's
 * workspace, that of the largest matrix the rank owns. */
static inline int64_t zrt_scratch_muon(int64_t rows, int64_t cols) {
  int64_t m = zrt_scratch_min(rows, cols);
  int64_t n = rows < cols ? cols : rows;
  return 4 * (2 * m * n + 2 * m * m);
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_SCRATCH_H */
