//===- DeepSpeedEstimators.cpp - DeepSpeed's model-state estimators -------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/DeepSpeedEstimators.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>
#include <cstdlib>

using namespace llvm;

namespace zero::estimate {
namespace {

using u128 = unsigned __int128;

int bitLength(u128 x) {
  int n = 0;
  for (; x; x >>= 1)
    ++n;
  return n;
}

/// The double nearest to m * 2^exp (ties to even), where the bits of m below
/// the top 53 are the rounding bits and `sticky` says whether anything
/// nonzero lies below m.
double roundToDouble(u128 m, int exp, bool sticky) {
  int extra = bitLength(m) - 53;
  if (extra > 0) {
    u128 rest = m & ((u128(1) << extra) - 1);
    u128 half = u128(1) << (extra - 1);
    m >>= extra;
    exp += extra;
    if (rest > half || (rest == half && (sticky || (m & 1))))
      ++m;
  }
  // m <= 2^53 is exact in a double and the scaling is exact.
  return std::ldexp(double(static_cast<uint64_t>(m)), exp);
}

/// The exact quotient a / b (a >= 0, b > 0) rounded once to a double, as
/// CPython's long true division does.
double correctlyRoundedDiv(u128 a, u128 b) {
  constexpr u128 exact = u128(1) << 53;
  if (a <= exact && b <= exact)
    return double(static_cast<uint64_t>(a)) / double(static_cast<uint64_t>(b));
  if (a == 0)
    return 0.0;
  // Scale so that the integer quotient has 55 or 56 bits: 53 kept, at
  // least two for rounding, and the remainder as the sticky bit.
  int shift = 55 - (bitLength(a) - bitLength(b));
  assert(bitLength(a) <= 64 && bitLength(b) <= 64 &&
         "the estimators divide 64-bit integers");
  u128 num = shift >= 0 ? a << shift : a;
  u128 den = shift >= 0 ? b : b << -shift;
  return roundToDouble(num / den, -shift, num % den != 0);
}

} // namespace

std::optional<PyNumber> PyNumber::parse(StringRef text) {
  if (!text.empty() && llvm::all_of(text, [](char c) { return isDigit(c); })) {
    uint64_t value;
    if (text.getAsInteger(10, value) || value > uint64_t(INT64_MAX))
      return std::nullopt;
    return integer(value);
  }
  double value;
  if (text.getAsDouble(value))
    return std::nullopt;
  return real(value);
}

double PyNumber::toDouble() const {
  if (!isInteger)
    return floatValue;
  assert(intValue >= 0 && "the estimators' numbers are not negative");
  return roundToDouble(u128(intValue), 0, false);
}

std::string PyNumber::str() const {
  if (isInteger)
    return std::to_string(static_cast<int64_t>(intValue));
  assert(std::isfinite(floatValue) && floatValue >= 0);
  // Python's repr: the fewest significant digits that read back as the
  // same double, in positional notation for decimal exponents -4 to 15 and
  // in scientific notation (two exponent digits at least) otherwise.
  std::string sci;
  for (int precision = 0; precision <= 16; ++precision) {
    sci.clear();
    raw_string_ostream(sci) << format("%.*e", precision, floatValue);
    if (std::strtod(sci.c_str(), nullptr) == floatValue)
      break;
  }
  StringRef mantissa = StringRef(sci).split('e').first;
  int exponent = std::atoi(StringRef(sci).split('e').second.str().c_str());
  std::string digits = mantissa.take_front(1).str();
  if (mantissa.size() > 2)
    digits += mantissa.drop_front(2).str(); // past the '.'
  // %e keeps trailing zeros where a shorter precision read back differently
  // only by them; repr drops them.
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    std::string text = digits.substr(0, 1);
    if (digits.size() > 1)
      text += "." + digits.substr(1);
    std::string e = std::to_string(exponent < 0 ? -exponent : exponent);
    return text + (exponent < 0 ? "e-" : "e+") + (e.size() < 2 ? "0" + e : e);
  }
  int point = exponent + 1; // digits before the decimal point
  if (point <= 0)
    return "0." + std::string(-point, '0') + digits;
  if (point >= int(digits.size()))
    return digits + std::string(point - digits.size(), '0') + ".0";
  return digits.substr(0, point) + "." + digits.substr(point);
}

Expected<PyNumber> mul(PyNumber a, PyNumber b) {
  if (a.isInt() && b.isInt()) {
    __int128 product;
    if (__builtin_mul_overflow(a.getInt(), b.getInt(), &product))
      return createStringError("an integer product passes 2^127");
    return PyNumber::integer(product);
  }
  return PyNumber::real(a.toDouble() * b.toDouble());
}

PyNumber trueDiv(PyNumber a, PyNumber b) {
  if (a.isInt() && b.isInt()) {
    assert(a.getInt() >= 0 && b.getInt() > 0);
    return PyNumber::real(correctlyRoundedDiv(a.getInt(), b.getInt()));
  }
  return PyNumber::real(a.toDouble() / b.toDouble());
}

PyNumber max(PyNumber a, PyNumber b) {
  bool bLarger;
  if (a.isInt() && b.isInt())
    bLarger = b.getInt() > a.getInt();
  else if (!a.isInt() && !b.isInt())
    bLarger = b.getFloat() > a.getFloat();
  else if (std::isnan(a.isInt() ? b.getFloat() : a.getFloat()))
    bLarger = false; // every comparison with nan is false
  else {
    // Python compares an int and a float exactly, not after rounding the
    // int: by the float's integer part, then by its fraction.
    double x = a.isInt() ? b.getFloat() : a.getFloat();
    __int128 i = a.isInt() ? a.getInt() : b.getInt();
    int cmp; // the sign of x - i
    if (std::fabs(x) >= 0x1p127) {
      cmp = x > 0 ? 1 : -1;
    } else {
      double whole = std::trunc(x);
      __int128 w = static_cast<__int128>(whole);
      if (w != i)
        cmp = w > i ? 1 : -1;
      else
        cmp = x > whole ? 1 : (x < whole ? -1 : 0);
    }
    bLarger = a.isInt() ? cmp > 0 : cmp < 0;
  }
  return bLarger ? b : a;
}

Expected<int64_t> toInt(PyNumber x) {
  if (x.isInt()) {
    if (x.getInt() > INT64_MAX)
      return createStringError("int() passes 2^63 - 1");
    return static_cast<int64_t>(x.getInt());
  }
  double f = x.getFloat();
  if (!std::isfinite(f))
    return createStringError("int() of a float that is not finite");
  if (f >= 0x1p63)
    return createStringError("int() passes 2^63 - 1");
  return static_cast<int64_t>(f);
}

namespace {

PyNumber pyInt(int64_t v) { return PyNumber::integer(v); }

/// x0 * x1 * ...: Python's left-to-right product.
Expected<PyNumber> product(std::initializer_list<PyNumber> factors) {
  PyNumber result = *factors.begin();
  for (const PyNumber &f : ArrayRef(factors).drop_front()) {
    Expected<PyNumber> next = mul(result, f);
    if (!next)
      return next.takeError();
    result = *next;
  }
  return result;
}

/// int(k * S / total_gpus): k * S is an exact int, the division rounds.
int64_t truncatedShare(int64_t k, int64_t s, int64_t totalGpus) {
  // k * S fits: S <= 2^58 and k <= 18.
  return static_cast<int64_t>(
      trueDiv(pyInt(k * s), pyInt(totalGpus)).getFloat());
}

} // namespace

FrozenModelStates modelStatesWithFrozen(int64_t stage, int64_t trainableParams,
                                        int64_t frozenParams, int64_t ranks) {
  assert(stage >= 0 && stage <= 3 && ranks >= 1 && "a stage and ranks");
  // S <= 2^58 (kMaxParams): 16 S and 14 St fit int64.
  int64_t s = trainableParams + frozenParams, t = trainableParams;
  switch (stage) {
  case 0:
    return {2 * s + 14 * t, "2S + 2St + 12St"};
  case 1:
    return {2 * s + 2 * t + 12 * t / ranks, "2S + 2St + 12St/n"};
  case 2:
    return {2 * s + 14 * t / ranks, "2S + 14St/n"};
  default:
    return {(2 * s + 14 * t) / ranks, "(2S + 14St)/n"};
  }
}

int64_t olderZero2GpuBytes(int64_t totalParams, int64_t totalGpus) {
  return 4 * totalParams + truncatedShare(16, totalParams, totalGpus);
}

Expected<DeepSpeedEstimate>
estimateDeepSpeed(int64_t stage, int64_t totalParams,
                  int64_t largestLayerParams, int64_t gpusPerNode,
                  int64_t nodes, const DeepSpeedOptions &o) {
  assert((stage == 2 || stage == 3) && "DeepSpeed estimates stages 2 and 3");
  DeepSpeedEstimate e;
  PyNumber s = pyInt(totalParams), factor = o.additionalBufferFactor;
  int64_t totalGpus = nodes * gpusPerNode;
  Expected<PyNumber> cpu = PyNumber::integer(0);
  if (stage == 2) {
    if (o.cpuOffload) {
      e.gpuBytes = 2 * totalParams;
      e.gpuFormula = "2S";
      cpu = product({s, max(pyInt(4 * totalGpus), pyInt(16)), factor});
      e.cpuFormula = "int(S x max(4 x total_gpus, 16) x factor)";
    } else {
      e.gpuBytes = 2 * totalParams + truncatedShare(18, totalParams, totalGpus);
      e.gpuFormula = "2S + int(18S/n)";
      cpu = product({s, pyInt(4), pyInt(gpusPerNode), factor});
      e.cpuFormula = "int(S x 4 x gpus_per_node x factor)";
    }
  } else {
    PyNumber gpusFactor = trueDiv(pyInt(1), pyInt(nodes));
    int64_t largestLayerMemory = 4 * largestLayerParams;
    e.largestLayerMemory = largestLayerMemory;
    // The multiplier of S in host memory with offload: 18 bytes with the
    // parameters there too, 16 without.
    int64_t hostBytes = o.cpuOffloadParams ? 18 : 16;
    if (o.cpuOffload) {
      if (o.cpuOffloadParams) {
        e.gpuBytes = largestLayerMemory;
        e.gpuFormula = "4L";
      } else {
        e.gpuBytes =
            largestLayerMemory + truncatedShare(2, totalParams, totalGpus);
        e.gpuFormula = "4L + int(2S/n)";
      }
      std::string k = std::to_string(hostBytes);
      if (o.zeroInit) {
        cpu = product({s, pyInt(hostBytes), gpusFactor, factor});
        e.cpuFormula = "int(S x " + k + " x (1/nodes) x factor)";
      } else {
        Expected<PyNumber> perGpu = mul(pyInt(hostBytes), gpusFactor);
        if (!perGpu)
          return perGpu.takeError();
        cpu = product({s, max(pyInt(4 * gpusPerNode), *perGpu), factor});
        e.cpuFormula =
            "int(S x max(4 x gpus_per_node, " + k + " x (1/nodes)) x factor)";
      }
    } else {
      e.gpuBytes =
          largestLayerMemory + truncatedShare(18, totalParams, totalGpus);
      e.gpuFormula = "4L + int(18S/n)";
      if (o.zeroInit) {
        cpu = product(
            {pyInt(largestLayerParams), pyInt(4), pyInt(gpusPerNode), factor});
        e.cpuFormula = "int(L x 4 x gpus_per_node x factor)";
      } else {
        cpu = product({s, pyInt(4), pyInt(gpusPerNode), factor});
        e.cpuFormula = "int(S x 4 x gpus_per_node x factor)";
      }
    }
  }
  if (!cpu)
    return cpu.takeError();
  Expected<int64_t> cpuBytes = toInt(*cpu);
  if (!cpuBytes)
    return cpuBytes.takeError();
  e.cpuBytes = *cpuBytes;
  return e;
}

std::string deepspeedOptionsText(int64_t stage, const DeepSpeedOptions &o) {
  // DeepSpeed formats the device as f'{OffloadDeviceEnum.cpu:4}', "cpu "
  // up to Python 3.10 (3.11 and later print "OffloadDeviceEnum.cpu").
  auto device = [](bool on) { return on ? "cpu " : "none"; };
  if (stage == 2)
    return std::string("offload_optimizer=") + device(o.cpuOffload);
  return std::string("offload_param=") + device(o.cpuOffloadParams) +
         ", offload_optimizer=" + device(o.cpuOffload) +
         ", zero_init=" + (o.zeroInit ? "1" : "0");
}

SmallVector<std::string> deepspeedTableHeader(int64_t stage,
                                              int64_t totalParams,
                                              int64_t largestLayerParams,
                                              int64_t gpusPerNode,
                                              int64_t nodes) {
  auto millions = [](int64_t x) {
    return std::to_string(static_cast<int64_t>(double(x) / 1e6));
  };
  std::string sw = "SW: Model with " + millions(totalParams) + "M total params";
  if (stage == 3)
    sw += ", " + millions(largestLayerParams) + "M largest layer params";
  return {"Estimated memory needed for params, optim states and gradients "
          "for a:",
          "HW: Setup with " + std::to_string(nodes) +
              (nodes > 1 ? " nodes, " : " node, ") +
              std::to_string(gpusPerNode) +
              (gpusPerNode > 1 ? " GPUs" : " GPU") + " per node.",
          sw + ".", "  per CPU  |  per GPU |   Options"};
}

namespace {

/// f" {cpu_mem/2**30:7.2f}GB | {gpu_mem/2**30:6.2f}GB | {options}"
std::string rowLine(int64_t cpuBytes, int64_t gpuBytes, StringRef options) {
  PyNumber gib = pyInt(int64_t(1) << 30);
  std::string line;
  raw_string_ostream os(line);
  os << format(" %7.2fGB | %6.2fGB | ",
               trueDiv(pyInt(cpuBytes), gib).getFloat(),
               trueDiv(pyInt(gpuBytes), gib).getFloat())
     << options;
  return line;
}

} // namespace

Expected<SmallVector<DeepSpeedRow>>
deepspeedTableRows(int64_t stage, int64_t totalParams,
                   int64_t largestLayerParams, int64_t gpusPerNode,
                   int64_t nodes, PyNumber factor) {
  SmallVector<DeepSpeedRow> rows;
  for (bool cpuOffload : {true, false})
    for (bool cpuOffloadParams : {true, false}) {
      if (stage == 2 && cpuOffloadParams)
        continue;
      if (!cpuOffload && cpuOffloadParams)
        continue;
      for (bool zeroInit : {true, false}) {
        if (stage == 2 && !zeroInit)
          continue;
        DeepSpeedRow row;
        row.options = {cpuOffload, cpuOffloadParams, zeroInit, factor};
        Expected<DeepSpeedEstimate> e =
            estimateDeepSpeed(stage, totalParams, largestLayerParams,
                              gpusPerNode, nodes, row.options);
        if (!e)
          return createStringError(
              "DeepSpeed's host-memory estimate for " +
              StringRef(deepspeedOptionsText(stage, row.options)).rtrim() +
              " has no 64-bit byte count at these sizes (" +
              toString(e.takeError()) + "; Python would give a larger int)");
        row.estimate = *e;
        row.line = rowLine(e->cpuBytes, e->gpuBytes,
                           deepspeedOptionsText(stage, row.options));
        rows.push_back(std::move(row));
      }
    }
  if (stage == 2) {
    // Before PR #5099 only the GPU bytes without offload differed.
    DeepSpeedRow older = rows.back();
    older.older = true;
    older.estimate.gpuBytes =
        olderZero2GpuBytes(totalParams, nodes * gpusPerNode);
    older.estimate.gpuFormula = "4S + int(16S/n)";
    older.line = rowLine(older.estimate.cpuBytes, older.estimate.gpuBytes,
                         deepspeedOptionsText(stage, older.options));
    rows.push_back(std::move(older));
  }
  return rows;
}

DeepSpeedOptimizerCost
estimateDeepSpeedZero3Optimizer(const DeepSpeedOptimizerInputs &in) {
  assert(in.ranks >= 1 && in.matrixParams <= in.totalParams &&
         "ranks and Muon's matrices within the parameters");
  DeepSpeedOptimizerCost c;
  int64_t s = in.totalParams, sm = in.matrixParams, n = in.ranks;
  // Bytes per parameter besides the states: 16-bit parameter, gradient
  // partition and master.
  int64_t fixed = in.sixteenBitMasters ? 2 + 2 : 2 + 4 + 4;
  int64_t k = fixed + in.stateBytes,
          km = in.muon ? fixed + in.matrixStateBytes : k;
  // S <= 2^58 and k <= 18: the products fit int64 (as truncatedShare's).
  int64_t perParam = k * s - (k - km) * sm;
  c.modelStateBytes =
      4 * in.largestLayerParams +
      static_cast<int64_t>(trueDiv(pyInt(perParam), pyInt(n)).getFloat());
  c.modelStateFormula =
      sm == 0 || k == km
          ? "4L+" + std::to_string(k) + "S/n"
          : "4L+(" + std::to_string(k) + "S" + (k > km ? "-" : "+") +
                std::to_string(k > km ? k - km : km - k) + "Sm)/n";
  // Elements-times-bytes of the arrays, then the (n-1)/n a ring sends.
  __int128 arrayBytes = !in.muon ? __int128(3) * s * in.elementBytes
                                 : __int128(4) * s * in.elementBytes +
                                       __int128(sm) * (4 + in.elementBytes);
  c.bytesPerRank = static_cast<int64_t>(arrayBytes * (n - 1) / n);
  return c;
}

} // namespace zero::estimate
