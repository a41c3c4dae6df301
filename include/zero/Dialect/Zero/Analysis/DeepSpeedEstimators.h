//===- DeepSpeedEstimators.h - DeepSpeed's memory estimators ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// DeepSpeed's estimate_zero2_model_states_mem_needs and
// estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/
// stage_1_and_2.py and stage3.py), every offload branch, computed with
// Python's arithmetic so that the bytes are the integers DeepSpeed returns:
// Python ints are exact, `/` is true division rounded once to a double,
// an int meets a float by being rounded to a double, `max` keeps its first
// argument unless the second is larger, and `int()` truncates. Also the
// rows of the *_all_cold printers in DeepSpeed's own format. zero-estimate
// prints them beside our accounting, and zero-report beside a step's plan.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_DEEPSPEEDESTIMATORS_H
#define ZERO_DIALECT_ZERO_ANALYSIS_DEEPSPEEDESTIMATORS_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zero::estimate {

/// A non-negative Python number as the estimators compute with it: an int
/// (exact; 128 bits hold every product the estimators form from the tool's
/// inputs, and a larger one is an error rather than a wrong answer) or a
/// float.
class PyNumber {
public:
  static PyNumber integer(__int128 value) { return PyNumber(true, value, 0); }
  static PyNumber real(double value) { return PyNumber(false, 0, value); }

  /// Parses a Python literal: digits only make an int ("2"), anything else
  /// strtod reads whole makes a float ("1.5", "2.0", "1e0"), as in
  /// `additional_buffer_factor=2` against `=2.0`.
  static std::optional<PyNumber> parse(llvm::StringRef text);

  bool isInt() const { return isInteger; }
  __int128 getInt() const { return intValue; }
  double getFloat() const { return floatValue; }
  /// float(x): an int rounded to the nearest double (ties to even).
  double toDouble() const;
  /// repr(x) for the values the tool prints: "2", "1.5", "2.0".
  std::string str() const;

private:
  PyNumber(bool isInteger, __int128 i, double f)
      : isInteger(isInteger), intValue(i), floatValue(f) {}
  bool isInteger;
  __int128 intValue;
  double floatValue;
};

/// a * b: exact for two ints (an error past 128 bits), else in doubles.
llvm::Expected<PyNumber> mul(PyNumber a, PyNumber b);
/// a / b, Python's true division: for two ints the exact quotient rounded
/// once to a double (not double(a) / double(b), which rounds up to three
/// times once a passes 2^53).
PyNumber trueDiv(PyNumber a, PyNumber b);
/// max(a, b): `a` unless `b > a`, compared exactly (an int stays an int).
PyNumber max(PyNumber a, PyNumber b);
/// int(x): truncation toward zero; an error past 2^63 - 1 bytes, which
/// Python would give as a larger int.
llvm::Expected<int64_t> toInt(PyNumber x);

/// The offload options of DeepSpeed's estimators.
struct DeepSpeedOptions {
  bool cpuOffload = false;
  /// Stage 3 only.
  bool cpuOffloadParams = false;
  /// Stage 3 only.
  bool zeroInit = true;
  PyNumber additionalBufferFactor = PyNumber::real(1.5);
};

/// What estimate_zero{2,3}_model_states_mem_needs returns, with the formula
/// of the branch taken.
struct DeepSpeedEstimate {
  int64_t cpuBytes = 0, gpuBytes = 0;
  /// Stage 3: 4 * largest_layer_params, the third value DeepSpeed returns.
  std::optional<int64_t> largestLayerMemory;
  std::string cpuFormula, gpuFormula;
};

/// DeepSpeed's estimate at `stage` (2 or 3) for S = `totalParams` and L =
/// `largestLayerParams` (stage 3), both Python ints.
llvm::Expected<DeepSpeedEstimate>
estimateDeepSpeed(int64_t stage, int64_t totalParams,
                  int64_t largestLayerParams, int64_t gpusPerNode,
                  int64_t nodes, const DeepSpeedOptions &options);

/// DeepSpeed's stage-2 GPU estimate without offload before PR #5099 (the
/// formula memory.rst and the seeds' worked examples still show):
/// 4 * S + int(16 * S / total_gpus).
int64_t olderZero2GpuBytes(int64_t totalParams, int64_t totalGpus);

/// The model states per rank of mixed-precision Adam as the ZeRO paper and
/// DeepSpeed's memory.rst count them (16S, 4S + 12S/n, 2S + 14S/n, 16S/n at
/// stages 0-3), with frozen parameters apart: every parameter is held in 16
/// bits (2S, S = St + Sf), and only the St trainable ones carry 16-bit
/// gradients (2St) and an fp32 master and Adam moments (12St). Stage 0:
/// 2S + 2St + 12St; stage 1: 2S + 2St + 12St/n; stage 2: 2S + 14St/n;
/// stage 3: (2S + 14St)/n. With Sf = 0 these are the formulas above.
struct FrozenModelStates {
  int64_t bytes = 0;
  std::string formula;
};
FrozenModelStates modelStatesWithFrozen(int64_t stage, int64_t trainableParams,
                                        int64_t frozenParams, int64_t ranks);

/// One row of DeepSpeed's *_all_cold table.
struct DeepSpeedRow {
  DeepSpeedOptions options;
  DeepSpeedEstimate estimate;
  /// The stage-2 row of the formula before PR #5099 that this tool adds
  /// after DeepSpeed's rows.
  bool older = false;
  /// DeepSpeed's line, e.g. "   71.69GB |   0.12GB | offload_param=cpu ,
  /// offload_optimizer=cpu , zero_init=1".
  std::string line;
};

/// The lines *_all_cold prints before its rows (the title, HW:, SW: and the
/// column header).
llvm::SmallVector<std::string> deepspeedTableHeader(int64_t stage,
                                                    int64_t totalParams,
                                                    int64_t largestLayerParams,
                                                    int64_t gpusPerNode,
                                                    int64_t nodes);

/// The rows *_all_cold prints, in its order (stage 3: offload_optimizer cpu
/// then none, offload_param cpu then none, zero_init 1 then 0, skipping
/// parameter offload without optimizer offload; stage 2: offload_optimizer
/// cpu then none), with `factor`; at stage 2 followed by the older row.
llvm::Expected<llvm::SmallVector<DeepSpeedRow>>
deepspeedTableRows(int64_t stage, int64_t totalParams,
                   int64_t largestLayerParams, int64_t gpusPerNode,
                   int64_t nodes, PyNumber factor);

/// DeepSpeed's option text of a row: "offload_optimizer=cpu " at stage 2,
/// "offload_param=none, offload_optimizer=cpu , zero_init=1" at stage 3.
std::string deepspeedOptionsText(int64_t stage,
                                 const DeepSpeedOptions &options);

/// What DeepSpeed's ZeRO-3 keeps and sends per rank with an optimizer other
/// than its estimators' Adam, from the sizes of the states DeepSpeed
/// allocates (its estimators know Adam only). The model states are the
/// stage-3 estimator's 4L + int(18S/n) with Adam's 8 bytes of moments
/// replaced by the optimizer's state bytes: per parameter a 16-bit
/// parameter (2), the fp32 gradient partition (4), the fp32 master (4) and
/// the states (`stateBytes`; Muon's matrices `matrixStateBytes`). With 16-bit
/// masters and gradients (`bf16_master_weights_and_grads`, which DeepSpeed
/// requires for bf16 states) there is no fp32 master and the gradient
/// partition is 16-bit: 2 + 2 + the states. The bytes a rank sends per step
/// are ring collectives' ((n-1)/n of each array, at `elementBytes` for the
/// 16-bit parameters and gradients): every parameter all-gathered in the
/// forward and again in the backward and every gradient reduce-scattered
/// (3S); with Muon DeepSpeed refuses the reduce-scatter (`reduce_scatter`
/// false), so every gradient is all-reduced (2S), and each matrix's fp32
/// momentum (4 bytes) and its update (`elementBytes`) are all-gathered.
struct DeepSpeedOptimizerInputs {
  int64_t totalParams = 0, largestLayerParams = 0, ranks = 1;
  int64_t stateBytes = 8;
  /// Muon: its matrices and their state bytes.
  bool muon = false;
  int64_t matrixParams = 0, matrixStateBytes = 0;
  bool sixteenBitMasters = false;
  int64_t elementBytes = 2;
};
struct DeepSpeedOptimizerCost {
  int64_t modelStateBytes = 0, bytesPerRank = 0;
  /// "4L+18S/n", "4L+(18S-4Sm)/n" (Sm: Muon's matrices).
  std::string modelStateFormula;
};
DeepSpeedOptimizerCost
estimateDeepSpeedZero3Optimizer(const DeepSpeedOptimizerInputs &in);

} // namespace zero::estimate

#endif // ZERO_DIALECT_ZERO_ANALYSIS_DEEPSPEEDESTIMATORS_H
