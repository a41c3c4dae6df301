//===- LrSchedule.h - DeepSpeed scheduler settings to IR --------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// One reader of DeepSpeed's scheduler settings (a type and its parameters,
// by DeepSpeed's names) for the ds_config `scheduler` section and for the
// `lr-schedule` option of zero-optimizer / zero-pipeline / zero-compile.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_TRANSFORMS_LRSCHEDULE_H
#define ZERO_DIALECT_ZERO_TRANSFORMS_LRSCHEDULE_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include <string>
#include <utility>

namespace mlir::zero {

/// A scheduler parameter: its DeepSpeed name and its value as text (a
/// number, true/false or a word).
using LrScheduleParam = std::pair<std::string, std::string>;

/// `#zero.lr_schedule` for DeepSpeed scheduler `type` (WarmupLR,
/// WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest, or the attribute's
/// kind names) with `params`; null after reporting an unknown type or
/// parameter, a malformed value or one the attribute's verifier rejects.
/// `emitError(i)` reports a problem with params[i], `emitError(-1)` one with
/// the type or the parameters together, so that a caller can place each.
LrScheduleAttr
buildLrSchedule(MLIRContext *ctx, StringRef type,
                ArrayRef<LrScheduleParam> params,
                function_ref<InFlightDiagnostic(int64_t param)> emitError);

/// The `lr-schedule` option: `TYPE[:name=value[,name=value...]]`, e.g.
/// `WarmupDecayLR:warmup_max_lr=6e-4,warmup_num_steps=100,total_num_steps=1000`.
LrScheduleAttr
parseLrScheduleSpec(MLIRContext *ctx, StringRef spec,
                    function_ref<InFlightDiagnostic()> emitError);

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_TRANSFORMS_LRSCHEDULE_H
