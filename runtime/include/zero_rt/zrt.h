/*===- zrt.h - zero-mlir runtime C ABI ------------------------------------===*
 *
 * Part of the zero-mlir project.
 *
 * The runtime library's C API: the kernels generated code calls and what the
 * driver, tests and benchmarks use. The functions themselves are listed once,
 * with their documentation, in abi.def. Versioned like a schema: a change
 * that is not backwards compatible bumps ZRT_ABI_VERSION.
 *
 * Conventions: tensors are raw pointers to dense row-major data; element
 * counts and dimensions are int64_t; flags are int32_t (0 or 1). Float
 * buffers carry a zrt_dtype (16-bit values are stored, fp32 is accumulated),
 * id and label buffers a zrt_index_type. Invalid arguments abort the process
 * with a message on stderr. See runtime/README.md for scratch memory and
 * threading of each function.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_ZRT_H
#define ZERO_RT_ZRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZRT_ABI_VERSION 23

typedef enum zrt_dtype { ZRT_F32 = 0, ZRT_BF16 = 1, ZRT_F16 = 2 } zrt_dtype;
typedef enum zrt_index_type { ZRT_I32 = 0, ZRT_I64 = 1 } zrt_index_type;
typedef enum zrt_reduce_op { ZRT_SUM = 0, ZRT_MAX = 1 } zrt_reduce_op;

/* The planned arena (a 64-byte aligned block). */
typedef struct zrt_arena zrt_arena;
/* The data-parallel communicator. */
typedef struct zrt_comm zrt_comm;

/* DeepSpeed's DynamicLossScaler (see runtime/README.md, "Optimizer"). */
typedef struct zrt_loss_scaler {
  double cur_scale;
  double min_scale;
  double scale_factor;
  int64_t cur_iter;
  int64_t last_overflow_iter;
  int64_t scale_window;
  int64_t delayed_shift; /* hysteresis */
  int64_t cur_hysteresis;
  int32_t consecutive_hysteresis;
  int32_t dynamic; /* 0: the scale stays (1 for fp32, bf16) */
} zrt_loss_scaler;

/* DeepSpeed's learning-rate schedulers (deepspeed.runtime.lr_schedules),
 * with their parameter names; see zrt_lr_at. All zero: a constant lr. */
typedef enum zrt_lr_kind {
  ZRT_LR_CONSTANT = 0,
  ZRT_LR_WARMUP = 1,        /* WarmupLR */
  ZRT_LR_WARMUP_DECAY = 2,  /* WarmupDecayLR */
  ZRT_LR_WARMUP_COSINE = 3, /* WarmupCosineLR */
  ZRT_LR_ONE_CYCLE = 4,     /* OneCycle */
  ZRT_LR_RANGE_TEST = 5     /* LRRangeTest */
} zrt_lr_kind;

typedef struct zrt_lr_schedule {
  int32_t kind;        /* zrt_lr_kind */
  int32_t warmup_type; /* 0: log, 1: linear */
  double warmup_min_lr;
  double warmup_max_lr;
  int64_t warmup_num_steps;
  int64_t total_num_steps;
  double warmup_min_ratio;
  double cos_min_ratio;
  double cycle_min_lr;
  double cycle_max_lr;
  double decay_lr_rate;
  int64_t cycle_first_step_size;
  int64_t cycle_second_step_size; /* 0: cycle_first_step_size */
  int64_t decay_step_size;
  int32_t cycle_momentum;
  int32_t lr_range_test_staircase;
  double cycle_min_mom;
  double cycle_max_mom;
  double decay_mom_rate;
  double lr_range_test_min_lr;
  int64_t lr_range_test_step_size;
  double lr_range_test_step_rate;
} zrt_lr_schedule;

/* One attention problem: its shape, knobs and optional operands, the fields
 * of attention.def in its order (zrt_attention_forward and its gradients). */
typedef struct zrt_attention_desc {
#define ZRT_ATTENTION_FIELD(type, name) type name;
#include "zero_rt/attention.def"
} zrt_attention_desc;

/* Every function, documented in abi.def. */
#define ZRT_ENTRY(name, ret, params) ret name params;
#define ZRT_KERNEL(name, impl, ret, params, args) ret name params;
#include "zero_rt/abi.def"

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_ZRT_H */
