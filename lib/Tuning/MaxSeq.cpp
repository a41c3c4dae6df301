//===- MaxSeq.cpp - The longest sequence that fits ------------------------===//
//
// Part of the zero-mlir project.
//
// The peak grows with the sequence (the activations, the logits), so a
// length fits or not monotonically and bisection finds the longest that
// does: the doubling brackets it, each halving of the bracket costs one
// search.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/MaxSeq.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::zero;

FailureOr<MaxSeqResult> mlir::zero::findMaxSequence(MLIRContext *ctx,
                                                    const ModelGenOptions &spec,
                                                    const TuneOptions &options,
                                                    int64_t multiple,
                                                    int64_t limit) {
  MaxSeqResult result;
  result.multiple = multiple;
  // Whether the model fits at `seq`, recorded.
  auto probe = [&](int64_t seq) -> FailureOr<bool> {
    ModelGenOptions at = spec;
    at.seq = seq;
    at.recordSpec = false;
    OwningOpRef<ModuleOp> module = generateModel(ctx, at);
    if (!module)
      return failure();
    FailureOr<TuneResult> tuned = tuneTrainStep(*module, options);
    if (failed(tuned))
      return failure();
    MaxSeqProbe p;
    p.seq = seq;
    p.fits = !tuned->ranked.empty();
    if (p.fits)
      p.peakBytes = tuned->ranked.front().peakBytes;
    else if (tuned->closest)
      p.peakBytes = tuned->closest->peakBytes;
    result.probes.push_back(p);
    if (p.fits && seq > result.maxSeq) {
      result.maxSeq = seq;
      result.best = std::move(*tuned);
    } else if (!p.fits && (!result.firstMissSeq || seq < result.firstMissSeq)) {
      result.firstMissSeq = seq;
      result.firstMiss = std::move(*tuned);
    }
    return p.fits;
  };

  // The model's own length, as a multiple.
  int64_t start =
      std::max<int64_t>(multiple, (spec.seq.value_or(multiple) + multiple - 1) /
                                      multiple * multiple);
  start = std::min(start, limit / multiple * multiple);
  FailureOr<bool> fits = probe(start);
  if (failed(fits))
    return failure();
  // The bracket: lo fits (0: nothing yet), hi does not (0: unknown).
  int64_t lo = 0, hi = 0;
  if (*fits) {
    lo = start;
    while (!hi) {
      if (lo > limit / 2) {
        result.reachedLimit = true;
        return result;
      }
      FailureOr<bool> f = probe(lo * 2);
      if (failed(f))
        return failure();
      (*f ? lo : hi) = lo * 2;
    }
  } else {
    hi = start;
    while (!lo) {
      int64_t half = hi / 2 / multiple * multiple;
      if (half < multiple)
        return result;
      FailureOr<bool> f = probe(half);
      if (failed(f))
        return failure();
      (*f ? lo : hi) = half;
    }
  }
  while (hi - lo > multiple) {
    int64_t mid = lo + (hi - lo) / multiple / 2 * multiple;
    FailureOr<bool> f = probe(mid);
    if (failed(f))
      return failure();
    (*f ? lo : hi) = mid;
  }
  return result;
}

std::string mlir::zero::describeSpecMismatch(ModuleOp file, ModuleOp built) {
  struct Model {
    SmallVector<std::pair<StringRef, Type>> params;
    int64_t elements = 0;
    SmallVector<Type> inputs;
  };
  auto read = [](ModuleOp m) {
    Model model;
    for (ParamOp p : m.getOps<ParamOp>()) {
      model.params.push_back({p.getSymName(), p.getTensorType()});
      model.elements += p.getTensorType().getNumElements();
    }
    for (TrainStepOp step : m.getOps<TrainStepOp>())
      llvm::append_range(model.inputs, step.getBodyBlock().getArgumentTypes());
    return model;
  };
  Model have = read(file), spec = read(built);
  if (have.params == spec.params && have.inputs == spec.inputs)
    return "";
  auto typeText = [](Type t) {
    std::string text;
    llvm::raw_string_ostream os(text);
    t.print(os);
    return text;
  };
  std::string first;
  for (size_t i = 0; first.empty(); ++i) {
    if (i >= have.params.size() || i >= spec.params.size()) {
      if (have.params.size() != spec.params.size()) {
        bool fileLonger = have.params.size() > spec.params.size();
        first = llvm::formatv("parameter '{0}' is the {1}'s only",
                              (fileLonger ? have : spec).params[i].first,
                              fileLonger ? "file" : "spec")
                    .str();
      } else {
        first = "the train step's inputs are " +
                llvm::join(llvm::map_range(have.inputs, typeText), ", ") +
                ", the spec's " +
                llvm::join(llvm::map_range(spec.inputs, typeText), ", ");
      }
    } else if (have.params[i] != spec.params[i]) {
      first = llvm::formatv(
                  "parameter {0} is '{1}' {2} in the file, '{3}' {4} in "
                  "the spec's model",
                  i, have.params[i].first, typeText(have.params[i].second),
                  spec.params[i].first, typeText(spec.params[i].second))
                  .str();
    }
  }
  return llvm::formatv(
             "its spec builds {0} parameters of {1} elements, its train "
             "step has {2} parameters of {3} elements; {4}",
             spec.params.size(), spec.elements, have.params.size(),
             have.elements, first)
      .str();
}
