//===- Init.cpp - Deterministic initialization ----------------------------===//
//
// Part of the zero-mlir project.
//
// The initial value of every element of a parameter, from the seed, the
// parameter's index and the element's: the same on every rank and every
// backend, whatever the partitioning.
//
//===----------------------------------------------------------------------===//

#include "Program/Manifest.h"

#include <cmath>
#include <cstdint>

using namespace zrt;

namespace {

uint64_t splitMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

double zrt::counterNormal(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t key =
      splitMix(splitMix(seed) ^ splitMix(stream + 0x5851f42d4c957f2dull));
  uint64_t h1 = splitMix(key + (2 * counter) * 0x9e3779b97f4a7c15ull);
  uint64_t h2 = splitMix(key + (2 * counter + 1) * 0x9e3779b97f4a7c15ull);
  // u1 in (0, 1] keeps the log finite; 53 random bits each.
  double u1 = (double(h1 >> 11) + 1.0) * 0x1p-53;
  double u2 = double(h2 >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

float zrt::initValue(const ParamInfo &p, uint64_t seed, uint64_t param,
                     uint64_t element) {
  switch (p.init) {
  case InitKind::Normal:
    return float(p.std * counterNormal(seed, param, element));
  case InitKind::Zeros:
    return 0.0f;
  case InitKind::Ones:
    return 1.0f;
  }
  return 0.0f;
}
