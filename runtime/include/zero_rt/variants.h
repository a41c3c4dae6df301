/*===- variants.h - DeepSpeed's rules for the collective variants ----------===*
 *
 * Part of the zero-mlir project.
 *
 * The one home of DeepSpeed's rules for the variants of the ZeRO-3
 * collectives (ZeRO++ hpZ, qwZ and qgZ, and MiCS): which stage each needs,
 * which sizes divide the world, and what each excludes. Each rule is a
 * predicate, written once, with no dependency; each place that enforces the
 * rules asks them in its own order and words its own diagnostic for its
 * input: the ds_config reader (lib/Pipelines, at the key of the file), the
 * passes' option checks (zero-partition, zero-grad-sync, zero-param-gather),
 * the verifier of #zero.schedule (lib/Dialect/Zero/IR) and the runtime's
 * manifest guard (runtime/src/Program/Manifest.cpp).
 *
 * A new variant adds its fields to zrt_variant_config, its rules to
 * zrt_variant_rule and zrt_variant_breaks, and asks them where it is read.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_VARIANTS_H
#define ZERO_RT_VARIANTS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the rules read. Sizes as DeepSpeed spells them: hpz_partition_size 1
 * and mics_shard_size 0 are off (the reader maps DeepSpeed's -1 to 0). */
typedef struct zrt_variant_config {
  int64_t stage;
  int64_t world_size;
  int64_t hpz_partition_size;
  int64_t mics_shard_size;
  int32_t quantized_weights;   /* qwZ */
  int32_t quantized_gradients; /* qgZ */
  int32_t reduce_scatter;      /* DeepSpeed's reduce_scatter (default 1) */
  int32_t offload_param;       /* parameters offloaded (cpu or nvme) */
  int32_t offload_optimizer;   /* optimizer offloaded (cpu or nvme) */
} zrt_variant_config;

typedef enum zrt_variant_rule {
  /* hpz_partition_size is a positive divisor of the world size. */
  ZRT_HPZ_DIVIDES_WORLD,
  /* hpZ (hpz_partition_size > 1) runs at stage 3 only. */
  ZRT_HPZ_NEEDS_STAGE3,
  /* hpZ's secondary shards live on the device: no parameter offload. */
  ZRT_HPZ_EXCLUDES_PARAM_OFFLOAD,
  /* mics_shard_size is 0 (off) or a positive divisor of the world size. */
  ZRT_MICS_DIVIDES_WORLD,
  /* MiCS (mics_shard_size > 0) runs at stage 3 only. */
  ZRT_MICS_NEEDS_STAGE3,
  /* DeepSpeed refuses offload with MiCS. */
  ZRT_MICS_EXCLUDES_OFFLOAD,
  /* hpZ and MiCS exclude each other. */
  ZRT_HPZ_EXCLUDES_MICS,
  /* qwZ quantizes the gathers of stage 3 only. */
  ZRT_QWZ_NEEDS_STAGE3,
  /* qwZ gathers the shards on the device: no parameter offload. */
  ZRT_QWZ_EXCLUDES_PARAM_OFFLOAD,
  /* qgZ quantizes the gradient reduce-scatters of stage 3 only. */
  ZRT_QGZ_NEEDS_STAGE3,
  /* qgZ replaces the reduce-scatter: not with reduce_scatter false. */
  ZRT_QGZ_NEEDS_REDUCE_SCATTER,
  /* DeepSpeed's MiCS reduces with the plain reduce-scatter. */
  ZRT_QGZ_EXCLUDES_MICS,
} zrt_variant_rule;

static inline int32_t zrt_variant_hpz(const zrt_variant_config *c) {
  return c->hpz_partition_size > 1;
}
static inline int32_t zrt_variant_mics(const zrt_variant_config *c) {
  return c->mics_shard_size > 0;
}

/* Whether `c` breaks `rule`. A rule of a variant that is off holds. */
static inline int32_t zrt_variant_breaks(const zrt_variant_config *c,
                                         zrt_variant_rule rule) {
  switch (rule) {
  case ZRT_HPZ_DIVIDES_WORLD:
    return c->hpz_partition_size < 1 ||
           c->world_size % c->hpz_partition_size != 0;
  case ZRT_HPZ_NEEDS_STAGE3:
    return zrt_variant_hpz(c) && c->stage != 3;
  case ZRT_HPZ_EXCLUDES_PARAM_OFFLOAD:
    return zrt_variant_hpz(c) && c->offload_param;
  case ZRT_MICS_DIVIDES_WORLD:
    return c->mics_shard_size < 0 ||
           (c->mics_shard_size > 0 && c->world_size % c->mics_shard_size != 0);
  case ZRT_MICS_NEEDS_STAGE3:
    return zrt_variant_mics(c) && c->stage != 3;
  case ZRT_MICS_EXCLUDES_OFFLOAD:
    return zrt_variant_mics(c) && (c->offload_param || c->offload_optimizer);
  case ZRT_HPZ_EXCLUDES_MICS:
    return zrt_variant_hpz(c) && zrt_variant_mics(c);
  case ZRT_QWZ_NEEDS_STAGE3:
    return c->quantized_weights && c->stage != 3;
  case ZRT_QWZ_EXCLUDES_PARAM_OFFLOAD:
    return c->quantized_weights && c->offload_param;
  case ZRT_QGZ_NEEDS_STAGE3:
    return c->quantized_gradients && c->stage != 3;
  case ZRT_QGZ_NEEDS_REDUCE_SCATTER:
    return c->quantized_gradients && !c->reduce_scatter;
  case ZRT_QGZ_EXCLUDES_MICS:
    return c->quantized_gradients && zrt_variant_mics(c);
  }
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* ZERO_RT_VARIANTS_H */
