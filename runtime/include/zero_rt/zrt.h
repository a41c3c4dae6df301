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

#define ZRT_ABI_VERSION 25

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

/* The most state buffers one optimizer keeps (optimizers.h checks every
 * row). */
#define ZRT_MAX_OPTIMIZER_STATES 3

/* Each optimizer's hyper-parameters, zrt_<name>_params: its
 * ZRT_OPTIMIZER_PARAM rows of optimizers.def in order, each a double (a flag
 * 0 or 1, a count or an enumerator exactly). */
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  typedef struct zrt_##name##_params {
#define ZRT_OPTIMIZER_PARAM(id, name, key, default) double name;
#define ZRT_OPTIMIZER_END(id, name)                                            \
  }                                                                            \
  zrt_##name##_params;
#include "zero_rt/optimizers.def"

/* An optimizer: its kind (optimizers.def's ZRT_OPTIMIZER rows in order),
 * the precision of its states (the ZRT_STATE_PRECISION rows in order) and
 * the hyper-parameters of its kind. */
typedef struct zrt_optimizer {
  int32_t kind;
  int32_t states;
  union {
#define ZRT_OPTIMIZER(id, name, decoupled, bytes, update, staged, host, nvme)  \
  zrt_##name##_params name;
#include "zero_rt/optimizers.def"
  } params;
} zrt_optimizer;

/* The operands of one optimizer step over n elements of a flat shard
 * (zrt_optimizer_step): the gradient and the parameter copy of zrt_dtype
 * `dtype`, the fp32 masters (null: the parameter, widened, is its own
 * master), the optimizer's state buffers in its ZRT_OPTIMIZER_STATE order
 * (fp32, or its precision's elements with one fp32 absmax per block in
 * `absmax`; a gated state that is not kept is null), the optimizer step
 * (1-based) and its learning-rate schedule (null: constant), the elements
 * with a weight decay of their own ([decay_ranges[2k], decay_ranges[2k+1])
 * with range_decays[k], sorted, host memory), and the gradient's unscale:
 * zrt_clip_coefficient(stats, max_grad_norm) / loss_scale. With skip != 0
 * only the parameter copy is written, from the unchanged master. */
typedef struct zrt_update {
  int32_t dtype;
  const void *grad;
  float *master;
  void *param;
  void *states[ZRT_MAX_OPTIMIZER_STATES];
  float *absmax[ZRT_MAX_OPTIMIZER_STATES];
  int64_t n;
  int64_t step;
  const zrt_lr_schedule *schedule;
  const int64_t *decay_ranges;
  const double *range_decays;
  int32_t num_decay_ranges;
  double max_grad_norm;
  const float *stats;
  float loss_scale;
  int32_t skip;
} zrt_update;

/* Every function, documented in abi.def. */
#define ZRT_ENTRY(name, ret, params) ret name params;
#define ZRT_KERNEL(name, impl, ret, params, args) ret name params;
#include "zero_rt/abi.def"

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_ZRT_H */
