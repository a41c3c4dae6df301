/*===- program.h - zero-mlir runtime: compiled training programs ---------===*
 *
 * Part of the zero-mlir project.
 *
 * The contract between code emitted by zero-compile (convert-zero-to-runtime)
 * and the runtime's training driver. The compiler emits one `zrt_program`
 * named `zero_program`; the runtime's `main` (libzero_runtime_main) calls
 * zrt_train_main with it. Generated step functions receive a `zrt_ctx` and
 * address every buffer through it by the offsets of the compiler's memory
 * plan, so the runtime allocates exactly the planned arenas.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_PROGRAM_H
#define ZERO_RT_PROGRAM_H

#include "zero_rt/zrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of zrt_program or the zrt_ctx_* calls.
 * 2: fp32 programs have no master buffer (the params are the masters).
 * 3: eval_step, the forward-only step.
 * 4: the manifest's token-label convention (labels), a schedule's
 *    total_num_steps "auto" (absent), which older runtimes would misread;
 *    count_labels, the label count of a mean over the global batch; each
 *    partition's own compute dtype (no program-wide compute_dtype).
 * 5: the optimizer kind lion (optimizers.def) and its zrt_ctx_lion* calls.
 * 6: the optimizer kind sgd, its zrt_ctx_sgd* calls and hyper-parameters
 *    (momentum, dampening, nesterov), and the buffer momentum_buffer; the
 *    manifest's sequence_parallel and its label convention shifted (Ulysses);
 *    zrt_ctx_copy_activation (activation offload).
 * 7: Muon runs (the manifest's optimizer.muon and its parameters' muon
 *    marks, which older runtimes would ignore and run AdamW on); bf16
 *    master weights (optimizer.bf16_masters: bf16 partitions without a
 *    master buffer); the optimizer kind adafactor (which this runtime
 *    refuses to run until its update is lowered).
 * 8: Adafactor runs (the manifest's optimizer.adafactor; its exp_avg_sq
 *    holds the factored statistics of the rank's shard, sized by
 *    zero_rt/adafactor.h).
 * 9: strided expert-parallel sets (the manifest's expert_placement, which
 *    older runtimes would ignore and run with consecutive sets).
 * 10: every optimizer's update is zrt_ctx_optimizer_step and its _staged,
 *    _host and _nvme variants (the zrt_ctx_adam*, zrt_ctx_lion* and
 *    zrt_ctx_sgd* calls are gone).
 * 11: the manifest's optimizer carries every hyper-parameter of
 *    optimizers.def's ZRT_HYPER_PARAM rows flat, under its row's name
 *    (optimizer.muon_lr, optimizer.beta2_decay): the optimizer.muon and
 *    optimizer.adafactor objects are gone, so older runtimes would miss
 *    Muon's and Adafactor's parameters.
 * 12: optimizer kind nadam (torch.optim.NAdam), which older runtimes do not
 *    know. */
#define ZRT_PROGRAM_VERSION 12

typedef struct zrt_ctx zrt_ctx;

typedef struct zrt_program {
  /* ZRT_PROGRAM_VERSION of the compiler that emitted it. */
  int32_t version;
  /* JSON describing the program, every key listed in manifest.def:
   * schedule hash, stage, world size, accumulation steps, precision and loss
   * scaler, optimizer, gradient clipping, inputs (shapes, dtypes, arena
   * offsets), parameters (name, shape, initializer, partition, offset),
   * partitions (numel, padded numel, compute dtype, persistent buffer
   * offsets), the plan
   * (persistent bytes, arena bytes, planned peak) and its memory timeline. */
  const char *manifest;
  /* One micro-step: forward, backward and the collectives of every micro
   * step. */
  void (*micro_step)(zrt_ctx *ctx);
  /* The ops that run once per optimizer step (stage 0-1 gradient
   * reductions, the optimizer, post-step gathers). */
  void (*boundary)(zrt_ctx *ctx);
  /* The forward only, cut at the loss (--eval-data): the ops the loss
   * depends on, with their parameter gathers and waits, at the offsets of
   * the training step's plan; records the loss with zrt_ctx_set_loss and
   * writes no gradient, optimizer state or loss scale. */
  void (*eval_step)(zrt_ctx *ctx);
  /* Null unless the step's loss is a mean over the valid labels of the
   * global batch (zero.count_labels): the ops that compute the counted
   * labels from the inputs, at the offsets of the training step's plan,
   * and zrt_ctx_count_labels. The driver runs it on each micro batch of an
   * optimizer step before the first micro step. */
  void (*count_labels)(zrt_ctx *ctx);
} zrt_program;

/* The driver: parses the command line (--steps, --seed, data, --log-json,
 * --init-from, --export, --save/--save-every/--resume, --trace, ...), sets up
 * MPI, checks the schedule hash and world size on every rank, allocates the
 * planned arenas, initializes or loads the parameters, and trains. Returns
 * the process exit code. */
int zrt_train_main(int argc, char **argv, const zrt_program *program);

/* The calls generated code makes on its context, documented in abi.def. */
#define ZRT_CTX(name, ret, params) ret name params;
#include "zero_rt/abi.def"

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_PROGRAM_H */
