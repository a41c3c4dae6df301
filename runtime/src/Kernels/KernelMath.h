//===- KernelMath.h - Scalar formulas of the kernels ------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The fp32 formulas both backends' kernels apply per element, written once
// and compiled for the host (the CPU kernels' `omp simd` loops) and the
// device (the CUDA functors), so the two agree to the bit up to how each
// compiler contracts multiply-adds. Each takes and returns fp32; a
// pointwise op adds its forward formula `op(x)` and its derivative
// `opGrad(x, dy)` (dx from the forward input or result and the incoming
// gradient) next to the others.
//
// Formulas stay out of here where a backend computes differently on
// purpose: the CUDA attention's exp2 on the SFU and pinned roundings
// (__fmul_rn, fmaf), reductions whose order is backend-specific. The
// optimizers' constants and per-element updates are in
// Optimizer/OptimizerMath.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_KERNEL_MATH_H
#define ZERO_RT_KERNEL_MATH_H

#include "Kernels/HostDevice.h"
#include "Support/Half.h"
#include "zero_rt/zrt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace zrt {

/// exp(x) in plain arithmetic so that `omp simd` loops vectorize it (libm
/// calls do not): 2^n * p(r) with |r| <= ln2/2 and the Cephes polynomial,
/// about 2 ulp. NaN propagates (the clamps are selects, not fminf/fmaxf,
/// which would drop it), x < -87.3 gives 0, large x inf.
ZRT_HOST_DEVICE inline float expApprox(float x) {
  constexpr float kLo = -87.33654f, kHi = 88.72283f;
  // The same clamp and rounding on both sides, each in the form its code
  // was tuned with (GCC vectorizes std::min/max; nvcc keeps selects).
#ifdef __CUDA_ARCH__
  float xc = x < kLo ? kLo : x;
  xc = kHi < xc ? kHi : xc;
  float n = rintf(xc * 1.44269504088896341f);
#else
  float xc = std::min(std::max(x, kLo), kHi);
  // nearbyint, not floor(x + 0.5): GCC 12 does not vectorize floor when
  // AVX512-FP16 is enabled.
  float n = std::nearbyint(xc * 1.44269504088896341f);
#endif
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // A NaN input keeps n NaN; converting that to int is undefined, and the
  // polynomial already carries the NaN to the result.
  int32_t ni = n == n ? int32_t(n) : 0;
  float scale = bitsFloat(uint32_t(ni + 127) << 23);
  return x < kLo ? 0.0f : p * scale;
}

//===----------------------------------------------------------------------===//
// Pointwise ops: op(x) and opGrad(x or y, dy)
//===----------------------------------------------------------------------===//

// GELU with the tanh approximation, written as x * sigmoid(2u) because
// 0.5 * (1 + tanh(u)) == sigmoid(2u) and the sigmoid form has no
// cancellation in either tail.
constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

ZRT_HOST_DEVICE inline float gelu(float x) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  return x / (1.0f + expApprox(-2.0f * u));
}

/// From the forward input x.
ZRT_HOST_DEVICE inline float geluGrad(float x, float dy) {
  float u = kGeluC * (x + kGeluA * x * x * x);
  float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  float s = 1.0f / (1.0f + expApprox(-2.0f * u));
  return (s + 2.0f * x * s * (1.0f - s) * du) * dy;
}

/// GELU, exact form: 0.5 * x * (1 + erf(x / sqrt(2))), PyTorch's
/// approximate='none'. erff is libm's on the host and CUDA's on the device
/// (both within 2 ulp).
constexpr float kSqrtHalf = 0.7071067811865476f;   // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 * pi)

ZRT_HOST_DEVICE inline float geluErf(float x) {
  return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
}

/// From the forward input x: Phi(x) + x * phi(x).
ZRT_HOST_DEVICE inline float geluErfGrad(float x, float dy) {
  float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
  float pdf = kInvSqrt2Pi * expApprox(-0.5f * x * x);
  return (cdf + x * pdf) * dy;
}

/// SiLU (swish): x * sigmoid(x), written as a quotient so that no product
/// overflows for large |x|.
ZRT_HOST_DEVICE inline float silu(float x) {
  return x / (1.0f + expApprox(-x));
}
/// From the forward input x: sigmoid(x) * (1 + x * (1 - sigmoid(x))).
ZRT_HOST_DEVICE inline float siluGrad(float x, float dy) {
  float s = 1.0f / (1.0f + expApprox(-x));
  return s * (1.0f + x * (1.0f - s)) * dy;
}

/// SwiGLU: silu(gate) * up, rounded once.
ZRT_HOST_DEVICE inline float swiglu(float gate, float up) {
  return silu(gate) * up;
}
/// From the forward operands: dgate = dy * up * silu'(gate), dup = dy *
/// silu(gate), sharing one exponential.
ZRT_HOST_DEVICE inline void swigluGrad(float gate, float up, float dy,
                                       float &dgate, float &dup) {
  float d = 1.0f + expApprox(-gate);
  float s = 1.0f / d;
  dgate = s * (1.0f + gate * (1.0f - s)) * (dy * up);
  dup = gate / d * dy;
}

/// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit,
/// limit), (u + 1) * g * sigmoid(alpha * g). The comparisons keep NaN (as
/// torch's clamp).
ZRT_HOST_DEVICE inline float clampedSwiglu(float gate, float up, float alpha,
                                           float limit) {
  float g = gate > limit ? limit : gate;
  float u = up > limit ? limit : (up < -limit ? -limit : up);
  return (u + 1.0f) * (g / (1.0f + expApprox(-alpha * g)));
}
/// Its gradients; zero where an input lies outside its limits, as torch's
/// clamp (whose gradient passes at the limits themselves).
ZRT_HOST_DEVICE inline void clampedSwigluGrad(float gate, float up, float dy,
                                              float alpha, float limit,
                                              float &dgate, float &dup) {
  float g = gate > limit ? limit : gate;
  float u = up > limit ? limit : (up < -limit ? -limit : up);
  float s = 1.0f / (1.0f + expApprox(-alpha * g));
  float dglu = s * (1.0f + alpha * g * (1.0f - s));
  dgate = gate <= limit ? dy * (u + 1.0f) * dglu : 0.0f;
  dup = up >= -limit && up <= limit ? dy * g * s : 0.0f;
}

// Written so that NaN propagates (as torch.relu) and overflow checks see it.
ZRT_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

/// From the forward result y.
ZRT_HOST_DEVICE inline float reluGrad(float y, float dy) {
  return y <= 0.0f ? 0.0f : dy;
}

/// tanh as Cephes' tanhf, with expApprox so that `omp simd` loops vectorize
/// it: an odd polynomial for |x| < 0.625, 1 - 2 / (exp(2|x|) + 1) with x's
/// sign beyond (1 when the exponential overflows), about 2 ulp. NaN
/// propagates through the polynomial.
ZRT_HOST_DEVICE inline float tanh(float x) {
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float a = x < 0.0f ? -x : x;
  float big = 1.0f - 2.0f / (expApprox(2.0f * a) + 1.0f);
  big = x < 0.0f ? -big : big;
  return a > 0.625f ? big : small;
}

/// From the forward result y, as PyTorch's tanh_backward.
ZRT_HOST_DEVICE inline float tanhGrad(float y, float dy) {
  return (1.0f - y * y) * dy;
}

/// min(x, eps) as torch.minimum: NaN propagates.
ZRT_HOST_DEVICE inline float xieluMin(float x, float eps) {
  return x != x ? x : (x < eps ? x : eps);
}
/// Apertus's xIELU in torch's operation order (transformers'
/// XIELUActivation, Python path) with the effective coefficients ap =
/// softplus(alpha_p) and an = beta + softplus(alpha_n). Both branches are
/// computed, as torch.where's; expm1f is exact, as torch's.
ZRT_HOST_DEVICE inline float xielu(float x, float ap, float an, float beta,
                                   float eps) {
  float pos = ap * x * x + beta * x;
  float neg = (expm1f(xieluMin(x, eps)) - x) * an + beta * x;
  return x > 0.0f ? pos : neg;
}
/// Its gradients as autograd computes them: where's backward masks dy into
/// each branch (so NaN or inf in the branch not taken still poisons the
/// coefficients' terms, as in torch), expm1's is dy * (result + 1), and
/// minimum's gives x all of it below eps, half at a tie, none above.
/// pp and pn are the per-element terms of ap's and an's gradients.
ZRT_HOST_DEVICE inline void xieluGrad(float x, float ap, float an, float beta,
                                      float eps, float dy, float &dx, float &pp,
                                      float &pn) {
  float gp = x > 0.0f ? dy : 0.0f;
  float gn = x > 0.0f ? 0.0f : dy;
  float e = expm1f(xieluMin(x, eps));
  float ga = gn * an;
  float dm = ga * (e + 1.0f);
  float dmx = x > eps ? 0.0f : (x == eps ? dm * 0.5f : dm);
  float dxPos = gp * (ap * x) + (gp * x) * ap + gp * beta;
  float dxNeg = (dmx - ga) + gn * beta;
  dx = dxPos + dxNeg;
  pp = (gp * x) * x;
  pn = gn * (e - x);
}

/// 1 / x (a division: exact to the rounding), and its gradient from the
/// forward result as PyTorch's reciprocal backward: -(y * y) * dy.
ZRT_HOST_DEVICE inline float reciprocal(float x) { return 1.0f / x; }
ZRT_HOST_DEVICE inline float reciprocalGrad(float y, float dy) {
  return -(y * y) * dy;
}
/// torch.clamp(x, lo, hi) (an infinite bound for one left out): NaN
/// propagates, and with lo > hi every element is hi, as torch's
/// min(max(x, lo), hi).
ZRT_HOST_DEVICE inline float clamp(float x, float lo, float hi) {
  float y = x < lo ? lo : x;
  return y > hi ? hi : y;
}
/// Its backward from the forward input: dy where lo <= x <= hi (both
/// inclusive, as torch's clamp_backward; NaN gets 0).
ZRT_HOST_DEVICE inline float clampGrad(float x, float lo, float hi, float dy) {
  return x >= lo && x <= hi ? dy : 0.0f;
}
/// torch.minimum and torch.maximum: NaN where either operand is, else the
/// smaller (larger), `a` at a tie.
ZRT_HOST_DEVICE inline float minimum(float a, float b) {
  return a != a ? a : (b != b ? b : (b < a ? b : a));
}
ZRT_HOST_DEVICE inline float maximum(float a, float b) {
  return a != a ? a : (b != b ? b : (b > a ? b : a));
}
/// Their gradients as autograd's (derivatives.yaml):
/// where(a == b, dy / 2, dy).masked_fill_(a > b, 0) for minimum's `a` and
/// (a < b) for its `b`, the other way around for maximum. A NaN operand
/// makes every comparison false: both get dy.
ZRT_HOST_DEVICE inline void minimumGrad(float a, float b, float dy, float &da,
                                        float &db) {
  float half = dy * 0.5f;
  da = a == b ? half : (a > b ? 0.0f : dy);
  db = a == b ? half : (a < b ? 0.0f : dy);
}
ZRT_HOST_DEVICE inline void maximumGrad(float a, float b, float dy, float &da,
                                        float &db) {
  float half = dy * 0.5f;
  da = a == b ? half : (a < b ? 0.0f : dy);
  db = a == b ? half : (a > b ? 0.0f : dy);
}
/// torch.where with a float mask: `a` where the mask is nonzero (NaN
/// included, as bool(nan)), else `b`; the backward masks dy into each.
ZRT_HOST_DEVICE inline float where(float cond, float a, float b) {
  return cond != 0.0f ? a : b;
}
ZRT_HOST_DEVICE inline void whereGrad(float cond, float dy, float &dt,
                                      float &df) {
  dt = cond != 0.0f ? dy : 0.0f;
  df = cond != 0.0f ? 0.0f : dy;
}

/// One row of nn.gather_grad, on both backends: for each distinct index of
/// `ir` (k of them, at its first place j), the fp32 sum of `load(p)` over
/// the places p with that index, in order of p, handed to `store(index,
/// sum)`. No atomics: the sum's order is fixed, so both backends agree
/// bitwise. The indices are in range (checked by the caller).
template <typename I, typename Load, typename Store>
ZRT_HOST_DEVICE inline void gatherGradRow(const I *ir, int64_t k, Load load,
                                          Store store) {
  for (int64_t j = 0; j < k; ++j) {
    bool seen = false;
    for (int64_t p = 0; p < j && !seen; ++p)
      seen = ir[p] == ir[j];
    if (seen)
      continue;
    float sum = 0.0f;
    for (int64_t p = j; p < k; ++p)
      if (ir[p] == ir[j])
        sum += load(p);
    store(int64_t(ir[j]), sum);
  }
}

/// exp(x) as expApprox (about 2 ulp, so that `omp simd` loops vectorize it).
ZRT_HOST_DEVICE inline float exp(float x) { return expApprox(x); }
/// From the forward result y, as PyTorch's exp backward: dy * y.
ZRT_HOST_DEVICE inline float expGrad(float y, float dy) { return dy * y; }

/// log(x): libm's logf on the host, CUDA's on the device (both within 1 ulp).
ZRT_HOST_DEVICE inline float log(float x) { return logf(x); }
/// From the forward input x, as PyTorch's log backward: dy / x.
ZRT_HOST_DEVICE inline float logGrad(float x, float dy) { return dy / x; }

/// PyTorch's softplus in its operation order: x where x * beta > threshold,
/// else log1p(exp(x * beta)) / beta (log1pf as logf above).
ZRT_HOST_DEVICE inline float softplus(float x, float beta, float threshold) {
  float bx = x * beta;
  return bx > threshold ? x : log1pf(expApprox(bx)) / beta;
}
/// From the forward input x, as PyTorch's softplus_backward: z = exp(x *
/// beta), dy where x * beta > threshold, else dy * z / (z + 1).
ZRT_HOST_DEVICE inline float softplusGrad(float x, float dy, float beta,
                                          float threshold) {
  float bx = x * beta;
  float z = expApprox(bx);
  return bx > threshold ? dy : dy * z / (z + 1.0f);
}

//===----------------------------------------------------------------------===//
// Reductions over the last dimension: the per-row and per-element steps
//===----------------------------------------------------------------------===//

/// What logsumexp subtracts from a row of maximum m before the
/// exponentials: m, or 0 when m is infinite (as torch.logsumexp), so that a
/// row of -inf gives -inf and a row holding +inf gives inf, not NaN.
ZRT_HOST_DEVICE inline float logsumexpShift(float m) {
  return m == INFINITY || m == -INFINITY ? 0.0f : m;
}
/// A row's logsumexp from its sum of exp(x - shift).
ZRT_HOST_DEVICE inline float logsumexp(float sum, float shift) {
  return logf(sum) + shift;
}
/// From the forward input x and result y, as PyTorch's logsumexp_backward:
/// dy * exp(x - y).
ZRT_HOST_DEVICE inline float logsumexpGrad(float x, float y, float dy) {
  return dy * expApprox(x - y);
}

/// The larger of a running maximum m and x, NaN once either is (torch.amax
/// propagates NaN).
ZRT_HOST_DEVICE inline float maxNaN(float m, float x) {
  return m > x || m != m ? m : x;
}
/// From the forward input x, its row's maximum y and the row's dy divided by
/// the count of elements equal to y, as torch.amax's backward
/// (scale_grad_by_count): (dy / count) * (x == y).
ZRT_HOST_DEVICE inline float reduceMaxGrad(float x, float y, float dyPerTie) {
  return dyPerTie * (x == y ? 1.0f : 0.0f);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Whether a loss leaves out the row of `label`: with `ignore`, the rows
/// labelled `ignoreIndex` (PyTorch's ignore_index).
ZRT_HOST_DEVICE inline bool ignoredLabel(int64_t label, int32_t ignore,
                                         int64_t ignoreIndex) {
  return ignore && label == ignoreIndex;
}

/// The mean of a loss summed over `count` rows: 0 over none.
ZRT_HOST_DEVICE inline float lossMean(double total, int64_t count) {
  return count ? float(total / double(count)) : 0.0f;
}

/// The gradient of a loss's mean over `count` rows for each row, from the
/// gradient of the mean: 0 over none.
ZRT_HOST_DEVICE inline float lossRowGrad(float dloss, int64_t count) {
  return count ? float(double(dloss) / double(count)) : 0.0f;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

// The fp32 steps of Hugging Face's LlamaRotaryEmbedding and
// apply_rotary_pos_emb, in their order: inv_freq = 1 / theta^(2i / dim),
// freqs = pos * inv_freq, cos and sin of freqs (times attention_scaling),
// x * cos + rotate_half(x) * sin. Where torch rounds an fp32 operation (pow,
// cos, sin) to within an ulp, these round the double result once, which is
// exact on both backends but for near-ties; every other step is one fp32
// operation, rounded as in torch: host callers must be compiled without
// multiply-add contraction.

/// inv_freq of pair i of a head of `headDim`.
ZRT_HOST_DEVICE inline float ropeInvFreq(double theta, int64_t i,
                                         int64_t headDim) {
  float exponent = float(2 * i) / float(headDim);
#ifdef __CUDA_ARCH__
  float power = float(::pow(double(float(theta)), double(exponent)));
#else
  float power = float(std::pow(double(float(theta)), double(exponent)));
#endif
  return 1.0f / power;
}

/// cos and sin of the fp32 angle pos * invFreq, each times `scale` in fp32
/// (transformers' attention_scaling: exact when it is 1).
ZRT_HOST_DEVICE inline void ropeCosSin(int64_t pos, float invFreq, float scale,
                                       float &c, float &s) {
#ifdef __CUDA_ARCH__
  double angle = __fmul_rn(float(pos), invFreq), sd, cd;
  ::sincos(angle, &sd, &cd);
  c = __fmul_rn(float(cd), scale);
  s = __fmul_rn(float(sd), scale);
#else
  double angle = float(pos) * invFreq;
  c = float(std::cos(angle)) * scale;
  s = float(std::sin(angle)) * scale;
#endif
}

/// Rotates the pair (x1, x2) = (x[i], x[i + head_dim / 2]): y1 = x1 * c -
/// x2 * s, y2 = x2 * c + x1 * s, each product rounded, then the sum. The
/// inverse rotation passes -s.
ZRT_HOST_DEVICE inline void ropeRotate(float x1, float x2, float c, float s,
                                       float &y1, float &y2) {
#ifdef __CUDA_ARCH__
  y1 = __fadd_rn(__fmul_rn(x1, c), -__fmul_rn(x2, s));
  y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
#else
  y1 = x1 * c - x2 * s;
  y2 = x2 * c + x1 * s;
#endif
}

//===----------------------------------------------------------------------===//
// RMS norm (Llama): the per-row scale and the input gradient
//===----------------------------------------------------------------------===//

/// rsqrt(mean(x^2) + eps) of a row from its fp32 sum of squares, as Hugging
/// Face's `torch.rsqrt(variance + eps)` in fp32 on the CPU (a division by
/// the count, then an IEEE square root and reciprocal). The normalized value
/// is then x * rstd, rounded to the storage type before the weight
/// multiplies it.
ZRT_HOST_DEVICE inline float rmsNormRstd(float sumSq, int64_t cols, float eps) {
#ifdef __CUDA_ARCH__
  return 1.0f / sqrtf(sumSq / float(cols) + eps);
#else
  return 1.0f / std::sqrt(sumSq / float(cols) + eps);
#endif
}

/// dx = rstd * (w dy - n * mean(w dy n)) with n = x * rstd, from the
/// normalized value n, wg = w * dy and the row's mean(w dy n). The device
/// pins its roundings (one fused multiply-add) so that every instantiation
/// of a CUDA kernel gives the same bits; the host compiler may contract
/// differently, within the tests' fp32 terms.
ZRT_HOST_DEVICE inline float rmsNormGrad(float n, float wg, float meanWgN,
                                         float rstd) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(rstd, fmaf(-n, meanWgN, wg));
#else
  return rstd * (wg - n * meanWgN);
#endif
}

//===----------------------------------------------------------------------===//
// Block quantization (the rules and the layout: zero_rt/quantize.h)
//===----------------------------------------------------------------------===//

/// |x|'s bits: for finite values their order is that of |x|, and NaN and the
/// infinities are the values at or above kQuantNonFinite, so a block's
/// largest magnitude is an integer maximum that vectorizes on both sides.
constexpr uint32_t kQuantNonFinite = 0x7f800000u;
constexpr uint32_t kQuantNaN = 0x7fc00000u;

ZRT_HOST_DEVICE inline uint32_t quantAbsBits(float x) {
  return floatBits(x) & 0x7fffffffu;
}

/// The scale of a block from the largest |x| bits of its elements: NaN for a
/// block with a non-finite element, else m / qmax (0 for a zero block).
ZRT_HOST_DEVICE inline float quantScale(uint32_t maxAbsBits, int32_t qmax) {
  if (maxAbsBits >= kQuantNonFinite)
    return bitsFloat(kQuantNaN);
#ifdef __CUDA_ARCH__
  return __fdiv_rn(bitsFloat(maxAbsBits), float(qmax));
#else
  return bitsFloat(maxAbsBits) / float(qmax);
#endif
}

/// Whether a block's values are quantized against its scale (a positive,
/// finite one); a zero or NaN scale stores q = 0.
ZRT_HOST_DEVICE inline bool quantScaleUsable(float scale) {
  return scale > 0.0f;
}

/// q = clamp(round_half_even(x / scale), -qmax, qmax) for a usable scale.
ZRT_HOST_DEVICE inline float quantizeValue(float x, float scale, float qmax) {
#ifdef __CUDA_ARCH__
  float r = rintf(__fdiv_rn(x, scale));
  r = r < -qmax ? -qmax : r;
  return qmax < r ? qmax : r;
#else
  float r = std::nearbyint(x / scale);
  return std::min(std::max(r, -qmax), qmax);
#endif
}

/// y = q * scale, one rounded fp32 product (the caller writes NaN for a NaN
/// scale, bit for bit the same on both sides).
ZRT_HOST_DEVICE inline float dequantizeValue(int32_t q, float scale) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(float(q), scale);
#else
  return float(q) * scale;
#endif
}

/// The signed value of a 4-bit two's complement nibble.
ZRT_HOST_DEVICE inline int32_t quantNibble(uint32_t v) {
  return int32_t((v & 0xfu) ^ 8u) - 8;
}

/// The document ids of one packed row of `cols` positions (zrt_document_ids):
/// a new document wherever a position does not follow the one before by one.
template <typename I>
ZRT_HOST_DEVICE inline void documentIdsRow(const I *positions, int32_t *ids,
                                           int64_t cols) {
  int32_t id = 0;
  for (int64_t c = 0; c < cols; ++c) {
    if (c > 0 && int64_t(positions[c]) != int64_t(positions[c - 1]) + 1)
      ++id;
    ids[c] = id;
  }
}

} // namespace zrt

#endif // ZERO_RT_KERNEL_MATH_H
