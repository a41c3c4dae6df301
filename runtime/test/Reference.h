//===- Reference.h - Double-precision reference kernels ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Straightforward definitions of every op in double precision, written from
// the op descriptions (NNOps.td), independent of the runtime's blocking.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TEST_REFERENCE_H
#define ZERO_RT_TEST_REFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace zrt_test::ref {

using Vec = std::vector<double>;

/// c = op(a) op(b) per batch; `absSum` gets sum_p |a_ip b_pj| (the scale of
/// the fp32 accumulation error).
inline Vec matmul(const Vec &a, const Vec &b, int64_t batch, int64_t m,
                  int64_t n, int64_t k, bool ta, bool tb, bool bBatched,
                  Vec *absSum = nullptr) {
  Vec c(static_cast<size_t>(batch * m * n));
  if (absSum)
    absSum->assign(c.size(), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double *ab = a.data() + bi * m * k;
    const double *bb = b.data() + (bBatched ? bi * k * n : 0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, sa = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = ta ? ab[p * m + i] : ab[i * k + p];
          double y = tb ? bb[j * k + p] : bb[p * n + j];
          s += x * y;
          sa += std::fabs(x * y);
        }
        c[(bi * m + i) * n + j] = s;
        if (absSum)
          (*absSum)[(bi * m + i) * n + j] = sa;
      }
  }
  return c;
}

template <typename Op>
Vec broadcast(const Vec &lhs, const Vec &rhs, Op op) {
  Vec out(lhs.size());
  for (size_t i = 0; i < lhs.size(); ++i)
    out[i] = op(lhs[i], rhs[i % rhs.size()]);
  return out;
}

inline double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

inline double geluGrad(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

inline double geluErf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

inline double geluErfGrad(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

inline double siluGrad(double x) {
  double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

inline double tanh(double x) { return std::tanh(x); }

/// From the forward result y.
inline double tanhGrad(double y) { return 1.0 - y * y; }

/// PyTorch's softplus: x past the threshold, else log(1 + e^(beta x)) / beta.
inline double softplus(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

/// Its derivative: sigmoid(beta x), 1 past the threshold.
inline double softplusGrad(double x, double beta, double threshold) {
  return x * beta > threshold ? 1.0 : 1.0 / (1.0 + std::exp(-x * beta));
}

/// Apertus's xIELU with the effective coefficients ap and an.
inline double xielu(double x, double ap, double an, double beta, double eps) {
  return x > 0 ? ap * x * x + beta * x
               : (std::expm1(std::min(x, eps)) - x) * an + beta * x;
}

/// Its derivative as autograd's (x == eps takes half of minimum's gradient;
/// eps < x <= 0 none of it), and the per-element terms of ap's and an's.
inline void xieluGrad(double x, double ap, double an, double beta, double eps,
                      double &dx, double &pp, double &pn) {
  if (x > 0) {
    dx = 2 * ap * x + beta;
    pp = x * x;
    pn = 0;
    return;
  }
  dx = x < eps    ? an * std::expm1(x) + beta
       : x == eps ? an * (0.5 * std::exp(eps) - 1) + beta
                  : beta - an;
  pp = 0;
  pn = std::expm1(std::min(x, eps)) - x;
}

/// Rotary embedding of [rows, seq, dim] x (rows = batch * heads) in exact
/// arithmetic: angle pos / theta^(2i / dim), or pos * invFreq[i] when given,
/// for pair (i, i + dim / 2), or for pair (2i, 2i + 1) when interleaved;
/// cos and sin times `scale`.
inline Vec rope(const Vec &x, int64_t rows, int64_t seq, int64_t dim,
                double theta, bool inverse, bool interleaved = false,
                const float *invFreq = nullptr, double scale = 1.0) {
  Vec y(x.size());
  int64_t half = dim / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t i = 0; i < half; ++i) {
        double angle =
            invFreq ? double(p) * double(invFreq[i])
                    : double(p) / std::pow(theta, double(2 * i) / double(dim));
        double c = scale * std::cos(angle),
               s = scale * (inverse ? -std::sin(angle) : std::sin(angle));
        size_t row = static_cast<size_t>((r * seq + p) * dim);
        size_t at = row + static_cast<size_t>(interleaved ? 2 * i : i);
        size_t to = interleaved ? at + 1 : at + static_cast<size_t>(half);
        double x1 = x[at], x2 = x[to];
        y[at] = x1 * c - x2 * s;
        y[to] = x2 * c + x1 * s;
      }
  return y;
}

/// log(sum(exp(x))) of each row of [rows, cols].
inline Vec logsumexp(const Vec &x, int64_t rows, int64_t cols) {
  Vec y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data() + r * cols;
    double mx = *std::max_element(xr, xr + cols), s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += std::exp(xr[c] - mx);
    y[r] = mx + std::log(s);
  }
  return y;
}

/// The maximum of each row of [rows, cols].
inline Vec reduceMax(const Vec &x, int64_t rows, int64_t cols) {
  Vec y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    y[r] = *std::max_element(x.data() + r * cols, x.data() + (r + 1) * cols);
  return y;
}

/// torch.amax's gradient: each row's dy split evenly among its maxima.
inline Vec reduceMaxGrad(const Vec &x, const Vec &dy, int64_t rows,
                         int64_t cols) {
  Vec dx(x.size(), 0.0), y = reduceMax(x, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ties =
        std::count(x.data() + r * cols, x.data() + (r + 1) * cols, y[r]);
    for (int64_t c = 0; c < cols; ++c)
      if (x[r * cols + c] == y[r])
        dx[r * cols + c] = dy[r] / double(ties);
  }
  return dx;
}

inline Vec softmax(const Vec &x, int64_t rows, int64_t cols) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data() + r * cols;
    double mx = *std::max_element(xr, xr + cols), s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += std::exp(xr[c] - mx);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = std::exp(xr[c] - mx) / s;
  }
  return y;
}

inline Vec softmaxGrad(const Vec &y, const Vec &dy, int64_t rows,
                       int64_t cols) {
  Vec dx(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += y[r * cols + c] * dy[r * cols + c];
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
  }
  return dx;
}

inline void moments(const double *x, int64_t n, double eps, double &mean,
                    double &rstd) {
  mean = 0;
  for (int64_t c = 0; c < n; ++c)
    mean += x[c];
  mean /= double(n);
  double var = 0;
  for (int64_t c = 0; c < n; ++c)
    var += (x[c] - mean) * (x[c] - mean);
  rstd = 1.0 / std::sqrt(var / double(n) + eps);
}

inline Vec layerNorm(const Vec &x, const Vec &w, const Vec &b, int64_t rows,
                     int64_t cols, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean, rstd;
    moments(x.data() + r * cols, cols, eps, mean, rstd);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = (x[r * cols + c] - mean) * rstd * w[c] + b[c];
  }
  return y;
}

inline void layerNormGrad(const Vec &x, const Vec &w, const Vec &dy,
                          int64_t rows, int64_t cols, double eps, Vec &dx,
                          Vec &dw, Vec &db) {
  dx.assign(x.size(), 0.0);
  dw.assign(static_cast<size_t>(cols), 0.0);
  db.assign(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mean, rstd;
    moments(x.data() + r * cols, cols, eps, mean, rstd);
    double a = 0, b = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (x[r * cols + c] - mean) * rstd;
      a += w[c] * dy[r * cols + c];
      b += w[c] * dy[r * cols + c] * xhat;
      dw[c] += dy[r * cols + c] * xhat;
      db[c] += dy[r * cols + c];
    }
    a /= double(cols);
    b /= double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (x[r * cols + c] - mean) * rstd;
      dx[r * cols + c] = rstd * (w[c] * dy[r * cols + c] - a - xhat * b);
    }
  }
}

inline double rmsRstd(const double *x, int64_t n, double eps) {
  double sq = 0;
  for (int64_t c = 0; c < n; ++c)
    sq += x[c] * x[c];
  return 1.0 / std::sqrt(sq / double(n) + eps);
}

/// The normalized values x * rsqrt(mean(x^2) + eps) of an RMS norm, before
/// any rounding and before the weight.
inline Vec rmsNormalized(const Vec &x, int64_t rows, int64_t cols, double eps) {
  Vec n(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double rstd = rmsRstd(x.data() + r * cols, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      n[r * cols + c] = x[r * cols + c] * rstd;
  }
  return n;
}

/// dx and dw of y = w * round(n), the rounding taken as the identity in the
/// derivative (as autograd does): dw = sum over rows of dy * round(n).
template <typename Round>
inline void rmsNormGrad(const Vec &x, const Vec &w, const Vec &dy, int64_t rows,
                        int64_t cols, double eps, Vec &dx, Vec &dw,
                        const Round &round) {
  dx.assign(x.size(), 0.0);
  dw.assign(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data() + r * cols;
    double rstd = rmsRstd(xr, cols, eps);
    // dn = w dy; dx = rstd dn - x rstd^3 mean(dn x).
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      dot += w[c] * dy[r * cols + c] * xr[c];
      dw[c] += dy[r * cols + c] * round(xr[c] * rstd);
    }
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = rstd * w[c] * dy[r * cols + c] -
                         xr[c] * rstd * rstd * rstd * dot / double(cols);
  }
}

/// Probabilities of one head: p[i * t + j].
/// With a `window` (causal), query i sees keys (i - window, i]; with a
/// `softcap`, the scaled logits become softcap * tanh(logits / softcap),
/// and `capGrad` (when given) gets their derivative 1 - tanh^2.
inline Vec attentionProbs(const double *q, const double *k, int64_t t,
                          int64_t d, bool causal, double scale,
                          int64_t window = 0, double softcap = 0,
                          Vec *capGrad = nullptr, double alibiSlope = 0) {
  Vec p(static_cast<size_t>(t * t), 0.0);
  if (capGrad)
    capGrad->assign(static_cast<size_t>(t * t), 0.0);
  for (int64_t i = 0; i < t; ++i) {
    int64_t end = causal ? i + 1 : t;
    int64_t begin = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = begin; j < end; ++j) {
      double s = 0;
      for (int64_t e = 0; e < d; ++e)
        s += q[i * d + e] * k[j * d + e];
      s *= scale;
      if (softcap > 0) {
        double th = std::tanh(s / softcap);
        s = softcap * th;
        if (capGrad)
          (*capGrad)[i * t + j] = 1 - th * th;
      }
      s += alibiSlope * double(j - i);
      p[i * t + j] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (int64_t j = begin; j < end; ++j)
      sum += p[i * t + j] = std::exp(p[i * t + j] - mx);
    for (int64_t j = begin; j < end; ++j)
      p[i * t + j] /= sum;
  }
  return p;
}

/// Grouped-query attention as Hugging Face's repeat_kv: q, o are
/// [batch, heads, t, d] and k, v [batch, kvHeads, t, d]; query head hq of
/// batch b reads key/value head hq / (heads / kvHeads) of batch b.
inline Vec attention(const Vec &q, const Vec &k, const Vec &v, int64_t batch,
                     int64_t heads, int64_t kvHeads, int64_t t, int64_t d,
                     bool causal, double scale, int64_t window = 0,
                     double softcap = 0, const float *alibi = nullptr) {
  Vec o(q.size(), 0.0);
  int64_t group = heads / kvHeads;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hq = 0; hq < heads; ++hq) {
      size_t off = static_cast<size_t>((b * heads + hq) * t * d);
      size_t kvOff = static_cast<size_t>((b * kvHeads + hq / group) * t * d);
      Vec p =
          attentionProbs(q.data() + off, k.data() + kvOff, t, d, causal, scale,
                         window, softcap, nullptr, alibi ? alibi[hq] : 0.0);
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < t; ++j)
          for (int64_t e = 0; e < d; ++e)
            o[off + i * d + e] += p[i * t + j] * v[kvOff + j * d + e];
    }
  }
  return o;
}

/// The gradients of grouped-query attention (shapes as above): dq has q's
/// shape, dk and dv k's, each the sum over the query heads sharing the
/// key/value head. With `o`, delta_i = dO_i . o_i uses the given forward
/// output (as the kernel does) instead of the exact one.
inline void attentionGrad(const Vec &q, const Vec &k, const Vec &v,
                          const Vec &dO, int64_t batch, int64_t heads,
                          int64_t kvHeads, int64_t t, int64_t d, bool causal,
                          double scale, Vec &dq, Vec &dk, Vec &dv,
                          const Vec *o = nullptr, int64_t window = 0,
                          double softcap = 0, const float *alibi = nullptr) {
  dq.assign(q.size(), 0.0);
  dk.assign(k.size(), 0.0);
  dv.assign(v.size(), 0.0);
  int64_t group = heads / kvHeads;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hq = 0; hq < heads; ++hq) {
      size_t off = static_cast<size_t>((b * heads + hq) * t * d);
      size_t kvOff = static_cast<size_t>((b * kvHeads + hq / group) * t * d);
      Vec capGrad;
      Vec p =
          attentionProbs(q.data() + off, k.data() + kvOff, t, d, causal, scale,
                         window, softcap, &capGrad, alibi ? alibi[hq] : 0.0);
      for (int64_t i = 0; i < t; ++i) {
        Vec dp(static_cast<size_t>(t), 0.0);
        double delta = 0;
        for (int64_t j = 0; j < t; ++j) {
          for (int64_t e = 0; e < d; ++e)
            dp[j] += dO[off + i * d + e] * v[kvOff + j * d + e];
          delta += p[i * t + j] * dp[j];
        }
        if (o) {
          delta = 0;
          for (int64_t e = 0; e < d; ++e)
            delta += dO[off + i * d + e] * (*o)[off + i * d + e];
        }
        for (int64_t j = 0; j < t; ++j) {
          double ds = p[i * t + j] * (dp[j] - delta);
          if (softcap > 0)
            ds *= capGrad[i * t + j];
          for (int64_t e = 0; e < d; ++e) {
            dv[kvOff + j * d + e] += p[i * t + j] * dO[off + i * d + e];
            dq[off + i * d + e] += scale * ds * k[kvOff + j * d + e];
            dk[kvOff + j * d + e] += scale * ds * q[off + i * d + e];
          }
        }
      }
    }
  }
}

inline Vec embedding(const Vec &table, const std::vector<int64_t> &ids,
                     int64_t dim) {
  Vec out(static_cast<size_t>(int64_t(ids.size()) * dim));
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < dim; ++c)
      out[i * dim + c] = table[static_cast<size_t>(ids[i] * dim + c)];
  return out;
}

/// F.pad(labels, (0, 1), value=fill)[..., 1:] of [rows, cols] labels.
inline std::vector<int64_t> shiftLabels(const std::vector<int64_t> &labels,
                                        int64_t rows, int64_t cols,
                                        int64_t fill) {
  std::vector<int64_t> out(labels.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] =
          c + 1 < cols ? labels[static_cast<size_t>(r * cols + c + 1)] : fill;
  return out;
}

/// The row paddingIdx (-1: none) gets nothing, as PyTorch's padding_idx.
inline Vec embeddingGrad(const Vec &dy, const std::vector<int64_t> &ids,
                         int64_t vocab, int64_t dim, int64_t paddingIdx = -1) {
  Vec out(static_cast<size_t>(vocab * dim), 0.0);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < dim && ids[i] != paddingIdx; ++c)
      out[static_cast<size_t>(ids[i] * dim + c)] += dy[i * dim + c];
  return out;
}

/// The mean over the rows whose label is not `ignoreIndex` (every row when
/// it is none); 0 over no row.
inline double crossEntropy(const Vec &logits,
                           const std::vector<int64_t> &labels, int64_t classes,
                           std::optional<int64_t> ignoreIndex = std::nullopt) {
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    const double *x = logits.data() + r * classes;
    double mx = *std::max_element(x, x + classes), s = 0;
    for (int64_t c = 0; c < classes; ++c)
      s += std::exp(x[c] - mx);
    total += std::log(s) + mx - x[labels[r]];
    ++count;
  }
  return count ? total / double(count) : 0.0;
}

inline Vec crossEntropyGrad(const Vec &logits,
                            const std::vector<int64_t> &labels, int64_t classes,
                            double dloss,
                            std::optional<int64_t> ignoreIndex = std::nullopt) {
  int64_t rows = int64_t(labels.size());
  int64_t count = 0;
  for (int64_t l : labels)
    count += l == ignoreIndex ? 0 : 1;
  Vec p = softmax(logits, rows, classes);
  for (int64_t r = 0; r < rows; ++r) {
    bool ignored = labels[r] == ignoreIndex;
    if (!ignored)
      p[r * classes + labels[r]] -= 1.0;
    for (int64_t c = 0; c < classes; ++c)
      p[r * classes + c] *= ignored ? 0.0 : dloss / double(count);
  }
  return p;
}

inline Vec reduceSum(const Vec &in, int64_t rows, int64_t cols) {
  Vec out(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c] += in[r * cols + c];
  return out;
}

inline Vec transpose(const Vec &in, const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &perm) {
  size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 1), outShape(rank), idx(rank, 0);
  for (size_t i = rank; i-- > 1;)
    stride[i - 1] = stride[i] * shape[i];
  for (size_t i = 0; i < rank; ++i)
    outShape[i] = shape[perm[i]];
  Vec out(in.size());
  for (size_t o = 0; o < in.size(); ++o) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i)
      src += idx[i] * stride[perm[i]];
    out[o] = in[static_cast<size_t>(src)];
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < outShape[i])
        break;
      idx[i] = 0;
    }
  }
  return out;
}

} // namespace zrt_test::ref

#endif // ZERO_RT_TEST_REFERENCE_H
