//===- Values.cpp - Reading and checking the step's input values ----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Data/Values.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

using namespace zrt;

bool zrt::isIndexType(const std::string &dtype) {
  return dtype == "i32" || dtype == "i64";
}

void zrt::storeIndex(const InputInfo &in, char *base, int64_t i, int64_t v) {
  if (in.dtype == "i32") {
    int32_t x = int32_t(v);
    std::memcpy(base + i * 4, &x, 4);
  } else {
    std::memcpy(base + i * 8, &v, 8);
  }
}

TokenInputs::TokenInputs(const Manifest &m) {
  int n = int(m.inputs.size());
  std::vector<bool> taken(size_t(n), false);
  for (int i = 0; i < n; ++i) {
    if (!m.inputs[i].role)
      continue;
    int &slot = *m.inputs[i].role == manifest::IndexRole::Tokens   ? ids
                : *m.inputs[i].role == manifest::IndexRole::Labels ? labels
                                                                   : positions;
    if (slot < 0) {
      slot = i;
      taken[size_t(i)] = true;
    }
  }
  for (int *slot : {&ids, &labels})
    for (int i = 0; *slot < 0 && i < n; ++i)
      if (!taken[size_t(i)]) {
        *slot = i;
        taken[size_t(i)] = true;
      }
}

bool TokenInputs::fits(const Manifest &m) const {
  int count = 2 + (positions >= 0 ? 1 : 0);
  if (ids < 0 || labels < 0 || int(m.inputs.size()) != count)
    return false;
  for (int i : {ids, labels, positions})
    if (i >= 0 && !isIndexType(m.inputs[i].dtype))
      return false;
  const InputInfo &x = m.inputs[ids], &y = m.inputs[labels];
  if (x.shape.size() < 2 || y.shape.empty() || x.shape[0] != y.shape[0])
    return false;
  if (positions < 0)
    return true;
  // The ids' shape, or their whole rows under sequence parallelism.
  const std::vector<int64_t> &p = m.inputs[positions].shape;
  return p.size() == 2 && x.shape.size() == 2 && p[0] == x.shape[0] &&
         (p[1] == x.shape[1] || p[1] == x.shape[1] * m.sequenceParallel);
}

bool zrt::holdsWholeRows(const InputInfo &in, int64_t rowSize) {
  return in.numel() / std::max<int64_t>(in.shape[0], 1) == rowSize;
}

std::string zrt::indexProblem(const InputInfo &in, int64_t v,
                              const char *values, const char *range) {
  if (in.ignoredIndex && v == *in.ignoredIndex)
    return "";
  if (in.dtype == "i32" && (v < INT32_MIN || v > INT32_MAX))
    return std::string("does not fit the model's i32 ") + values;
  if (in.indexBound > 0 && (v < 0 || v >= in.indexBound))
    return std::string("is outside the model's ") + range + " [0, " +
           std::to_string(in.indexBound) + ")";
  if (v < 0)
    return std::string("is negative; ") + values + " are indices >= 0";
  return "";
}

const TokenType zrt::kTokenTypes[4] = {{"uint16", "<u2", 2, false},
                                       {"uint32", "<u4", 4, false},
                                       {"int32", "<i4", 4, true},
                                       {"int64", "<i8", 8, true}};

int64_t zrt::tokenAt(const char *p, const TokenType &type) {
  switch (type.bytes) {
  case 2: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 4:
    if (type.isSigned) {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    } else {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  default: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  }
}

const TokenType *zrt::tokenTypeOf(const std::string &descr) {
  for (const TokenType &t : kTokenTypes)
    if (descr == t.descr)
      return &t;
  return nullptr;
}
