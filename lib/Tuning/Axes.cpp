//===- Axes.cpp - zero-tune's search axes as a table ----------------------===//
//
// Part of the zero-mlir project.
//
// One parser per row of Axes.def: each turns an option's value into the
// TuneOptions field that restricts the search.
//
//===----------------------------------------------------------------------===//

#include "zero/Tuning/Axes.h"

#include "llvm/ADT/Twine.h"

using namespace mlir;
using namespace mlir::zero;

namespace {

/// A count of at least `min`.
std::optional<int64_t> parseCount(StringRef text, int64_t min) {
  int64_t n = 0;
  if (text.getAsInteger(10, n) || n < min)
    return std::nullopt;
  return n;
}

/// A divisor of the world size.
std::optional<int64_t> parseDivisor(StringRef text, const TuneOptions &o) {
  std::optional<int64_t> p = parseCount(text, 1);
  if (!p || o.worldSize % *p != 0)
    return std::nullopt;
  return p;
}

bool parseTuneAxisRemat(StringRef text, TuneOptions &o) {
  o.remat = parseTuneRemat(text);
  return o.remat.has_value();
}

bool parseTuneAxisLossChunk(StringRef text, TuneOptions &o) {
  o.lossChunk = parseCount(text, 0);
  return o.lossChunk.has_value();
}

bool parseTuneAxisSpSize(StringRef text, TuneOptions &o) {
  o.spSize = parseDivisor(text, o);
  return o.spSize.has_value();
}

bool parseTuneAxisEpSize(StringRef text, TuneOptions &o) {
  o.epSize = parseDivisor(text, o);
  return o.epSize.has_value();
}

bool parseTuneAxisTiledMlp(StringRef text, TuneOptions &o) {
  o.tiledMlp = parseCount(text, 0);
  return o.tiledMlp.has_value();
}

bool parseTuneAxisOffloadActivations(StringRef text, TuneOptions &o) {
  if (text != "none" && text != "cpu")
    return false;
  o.offloadActivations = text == "cpu";
  return true;
}

bool parseTuneAxisOffload(StringRef text, TuneOptions &o) {
  std::optional<OffloadDevice> tier = symbolizeOffloadDevice(text);
  if (!tier)
    return false;
  o.offload = *tier;
  return true;
}

bool parseTuneAxisOptimizerStates(StringRef text, TuneOptions &o) {
  // f32 is every step's own, not a lower precision.
  std::optional<StatePrecision> p = symbolizeStatePrecision(text);
  if (!p || *p == StatePrecision::f32)
    return false;
  o.optimizerStates = p;
  return true;
}

const TuneAxis kAxes[] = {
#define TUNE_AXIS(Id, Flag, Init, Expected, Help)                              \
  {Flag, Init, Expected, parseTuneAxis##Id},
#include "zero/Tuning/Axes.def"
};

} // namespace

ArrayRef<TuneAxis> mlir::zero::getTuneAxes() { return kAxes; }

LogicalResult mlir::zero::parseTuneAxis(const TuneAxis &axis, StringRef text,
                                        bool given, TuneOptions &options,
                                        std::string &error) {
  if ((axis.init.empty() && !given) || (axis.init == "auto" && text == "auto"))
    return success();
  if (axis.parse(text, options))
    return success();
  std::string expected = axis.expected.str();
  if (size_t at = expected.find("{0}"); at != std::string::npos)
    expected.replace(at, 3, std::to_string(options.worldSize));
  error = ("--" + axis.flag + " must be " + expected + ", got '" + text + "'")
              .str();
  return failure();
}
