//===- GradTest.cpp - Backward kernels against finite differences ---------===//
//
// Part of the zero-mlir project.
//
// For each forward op f and each of its inputs x, the backward kernels fed
// with dy = w must give the gradient of L(x) = <w, f(x)> (w random, L summed
// in double). It is compared with central differences of the f32 forward
// kernel, (L(x + h e_i) - L(x - h e_i)) / 2h, on up to 48 coordinates, and
// along two random directions. Truncation error is O(h^2) and fp32 rounding
// of L about 2^-24 |L| / h, so 1e-2 relative (plus a floor at 1e-3 of the
// largest gradient entry, for entries near zero) has a wide margin.
//
// Matmul has no backward kernel: its gradient is the pair of matmuls that
// the compiler's derivative rule emits (NNDerivatives.cpp), rebuilt here
// call for call.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <algorithm>
#include <numeric>

using namespace zrt_test;

namespace {

using Floats = std::vector<float>;

/// Evaluates the f32 forward kernel: inputs -> outputs.
using Forward = std::function<Floats(const Floats &)>;

double dot(const Floats &y, const std::vector<double> &w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += double(y[i]) * w[i];
  return s;
}

Floats randomFloats(std::mt19937 &rng, int64_t n, double lo = -1,
                    double hi = 1) {
  std::uniform_real_distribution<float> dist{float(lo), float(hi)};
  Floats v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Checks `grad` = dL/dx for L(x) = <w, f(x)>.
void checkGradient(const std::string &what, const Floats &x, const Forward &f,
                   const std::vector<double> &w, const Floats &grad,
                   std::mt19937 &rng, double h = 1e-2) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  double scale = 0;
  for (float g : grad)
    scale = std::max(scale, double(std::fabs(g)));
  auto loss = [&](const Floats &xs) { return dot(f(xs), w); };
  auto compare = [&](double fd, double analytic, const std::string &where) {
    double tol = 1e-2 * std::fabs(analytic) + 1e-3 * scale + 1e-5;
    EXPECT_NEAR(analytic, fd, tol) << what << " " << where;
  };
  // Coordinates: all of a small input, else a random subset.
  std::vector<size_t> coords(x.size());
  std::iota(coords.begin(), coords.end(), 0);
  std::shuffle(coords.begin(), coords.end(), rng);
  coords.resize(std::min<size_t>(coords.size(), 48));
  for (size_t i : coords) {
    Floats xp = x, xm = x;
    xp[i] += float(h);
    xm[i] -= float(h);
    double fd = (loss(xp) - loss(xm)) / (double(xp[i]) - double(xm[i]));
    compare(fd, grad[i], "d/dx[" + std::to_string(i) + "]");
  }
  // Directional derivatives exercise every coordinate at once.
  for (int d = 0; d < 2; ++d) {
    Floats u = randomFloats(rng, int64_t(x.size()));
    Floats xp = x, xm = x;
    double analytic = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      xp[i] += float(h) * u[i];
      xm[i] -= float(h) * u[i];
      analytic += double(grad[i]) * u[i];
    }
    double fd = (loss(xp) - loss(xm)) / (2 * h);
    double tol =
        1e-2 * std::fabs(analytic) + 1e-3 * scale * std::sqrt(double(x.size()));
    EXPECT_NEAR(analytic, fd, tol) << what << " direction " << d;
  }
}

std::vector<double> weights(std::mt19937 &rng, int64_t n) {
  return randomValues(rng, n);
}

Floats asFloats(const std::vector<double> &v) {
  return Floats(v.begin(), v.end());
}

class GradTest : public ::testing::Test {
protected:
  std::mt19937 rng{42};
};

/// [batch, r, c] -> [batch, c, r] in f32.
Floats transposeLast2(const Floats &x, int64_t batch, int64_t r, int64_t c) {
  Floats out(x.size());
  int64_t shape[] = {batch, r, c}, perm[] = {0, 2, 1};
  zrt_transpose(ZRT_F32, x.data(), out.data(), 3, shape, perm);
  return out;
}

TEST_F(GradTest, Matmul) {
  int64_t batch = 2, m = 5, n = 4, k = 3;
  for (int bBatched = 0; bBatched < 2; ++bBatched) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        int64_t bCount = bBatched ? batch : 1;
        Floats a = randomFloats(rng, batch * m * k);
        Floats b = randomFloats(rng, bCount * k * n);
        std::vector<double> w = weights(rng, batch * m * n);
        Floats dy = asFloats(w);
        auto matmul = [&](const Floats &x, const Floats &y) {
          Floats c(static_cast<size_t>(batch * m * n));
          zrt_matmul(ZRT_F32, x.data(), y.data(), c.data(), batch, m, n, k, ta,
                     tb, bBatched, k);
          return c;
        };
        // dA' = dY B'^T, transposed back when A was.
        Floats da(a.size());
        zrt_matmul(ZRT_F32, dy.data(), b.data(), da.data(), batch, m, k, n, 0,
                   !tb, bBatched, n);
        if (ta)
          da = transposeLast2(da, batch, m, k);
        Floats db(b.size());
        if (bBatched) {
          if (tb)
            zrt_matmul(ZRT_F32, dy.data(), a.data(), db.data(), batch, n, k, m,
                       1, ta, 1, m);
          else
            zrt_matmul(ZRT_F32, a.data(), dy.data(), db.data(), batch, k, n, m,
                       !ta, 0, 1, m);
        } else {
          // Shared weight: contract over every leading dimension.
          Floats a2 = ta ? transposeLast2(a, batch, k, m) : a;
          if (tb)
            zrt_matmul(ZRT_F32, dy.data(), a2.data(), db.data(), 1, n, k,
                       batch * m, 1, 0, 1, batch * m);
          else
            zrt_matmul(ZRT_F32, a2.data(), dy.data(), db.data(), 1, k, n,
                       batch * m, 1, 0, 1, batch * m);
        }
        std::string what = "matmul ta " + std::to_string(ta) + " tb " +
                           std::to_string(tb) + " batched " +
                           std::to_string(bBatched);
        checkGradient(
            what + " dA", a, [&](const Floats &x) { return matmul(x, b); }, w,
            da, rng);
        checkGradient(
            what + " dB", b, [&](const Floats &y) { return matmul(a, y); }, w,
            db, rng);
      }
    }
  }
}

TEST_F(GradTest, BroadcastAddMulScale) {
  int64_t n = 60, rhsN = 12;
  Floats x = randomFloats(rng, n), r = randomFloats(rng, rhsN);
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w);
  auto binary = [&](auto fn) {
    return [&, fn](const Floats &lhs, const Floats &rhs) {
      Floats out(static_cast<size_t>(n));
      fn(ZRT_F32, lhs.data(), rhs.data(), out.data(), n, rhsN);
      return out;
    };
  };
  auto add = binary(zrt_add);
  auto mul = binary(zrt_mul);
  Floats dr(static_cast<size_t>(rhsN)), prod(static_cast<size_t>(n)),
      dl(static_cast<size_t>(n));
  // add: d lhs = dy, d rhs = reduce_sum(dy).
  zrt_reduce_sum(ZRT_F32, dy.data(), dr.data(), n / rhsN, rhsN);
  checkGradient(
      "add lhs", x, [&](const Floats &v) { return add(v, r); }, w, dy, rng);
  checkGradient(
      "add rhs", r, [&](const Floats &v) { return add(x, v); }, w, dr, rng);
  // mul: d lhs = dy * rhs, d rhs = reduce_sum(dy * lhs).
  zrt_mul(ZRT_F32, dy.data(), r.data(), dl.data(), n, rhsN);
  zrt_mul(ZRT_F32, dy.data(), x.data(), prod.data(), n, n);
  zrt_reduce_sum(ZRT_F32, prod.data(), dr.data(), n / rhsN, rhsN);
  checkGradient(
      "mul lhs", x, [&](const Floats &v) { return mul(v, r); }, w, dl, rng);
  checkGradient(
      "mul rhs", r, [&](const Floats &v) { return mul(x, v); }, w, dr, rng);
  // scale: d x = scale(dy).
  Floats dx(static_cast<size_t>(n));
  zrt_scale(ZRT_F32, dy.data(), dx.data(), n, -0.75);
  checkGradient(
      "scale", x,
      [&](const Floats &v) {
        Floats out(static_cast<size_t>(n));
        zrt_scale(ZRT_F32, v.data(), out.data(), n, -0.75);
        return out;
      },
      w, dx, rng);
}

TEST_F(GradTest, GeluSiluReluTanh) {
  int64_t n = 200;
  Floats x = randomFloats(rng, n, -4, 4);
  // Keep relu inputs away from its kink by more than the step.
  for (float &v : x)
    if (std::fabs(v) < 0.05f)
      v += 0.1f;
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dx(static_cast<size_t>(n)),
         y(static_cast<size_t>(n));
  auto unary = [&](auto fn) {
    return [&, fn](const Floats &v) {
      Floats out(static_cast<size_t>(n));
      fn(ZRT_F32, v.data(), out.data(), n);
      return out;
    };
  };
  zrt_gelu_grad(ZRT_F32, x.data(), dy.data(), dx.data(), n);
  checkGradient("gelu", x, unary(zrt_gelu), w, dx, rng, 1e-3);
  zrt_gelu_erf_grad(ZRT_F32, x.data(), dy.data(), dx.data(), n);
  checkGradient("gelu_erf", x, unary(zrt_gelu_erf), w, dx, rng, 1e-3);
  zrt_silu_grad(ZRT_F32, x.data(), dy.data(), dx.data(), n);
  checkGradient("silu", x, unary(zrt_silu), w, dx, rng, 1e-3);
  zrt_tanh(ZRT_F32, x.data(), y.data(), n);
  zrt_tanh_grad(ZRT_F32, y.data(), dy.data(), dx.data(), n);
  checkGradient("tanh", x, unary(zrt_tanh), w, dx, rng, 1e-3);
  zrt_relu(ZRT_F32, x.data(), y.data(), n);
  zrt_relu_grad(ZRT_F32, y.data(), dy.data(), dx.data(), n);
  checkGradient("relu", x, unary(zrt_relu), w, dx, rng, 1e-3);
}

TEST_F(GradTest, ExpLogSoftplus) {
  int64_t n = 200;
  Floats x = randomFloats(rng, n, -4, 4), pos = randomFloats(rng, n, 0.2, 4);
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dx(static_cast<size_t>(n)),
         y(static_cast<size_t>(n));
  auto unary = [&](auto fn) {
    return [&, fn](const Floats &v) {
      Floats out(static_cast<size_t>(n));
      fn(ZRT_F32, v.data(), out.data(), n);
      return out;
    };
  };
  zrt_exp(ZRT_F32, x.data(), y.data(), n);
  zrt_exp_grad(ZRT_F32, y.data(), dy.data(), dx.data(), n);
  checkGradient("exp", x, unary(zrt_exp), w, dx, rng, 1e-3);
  zrt_log_grad(ZRT_F32, pos.data(), dy.data(), dx.data(), n);
  checkGradient("log", pos, unary(zrt_log), w, dx, rng, 1e-3);
  // beta 2, threshold 3: inputs on both sides of the threshold (x = 1.5),
  // kept away from it by more than the step.
  for (float &v : x)
    if (std::fabs(v - 1.5f) < 0.05f)
      v += 0.1f;
  auto softplus = [&](const Floats &v) {
    Floats out(static_cast<size_t>(n));
    zrt_softplus(ZRT_F32, v.data(), out.data(), n, 2.0, 3.0);
    return out;
  };
  zrt_softplus_grad(ZRT_F32, x.data(), dy.data(), dx.data(), n, 2.0, 3.0);
  checkGradient("softplus", x, softplus, w, dx, rng, 1e-3);
}

TEST_F(GradTest, Swiglu) {
  int64_t n = 200;
  Floats gate = randomFloats(rng, n, -4, 4), up = randomFloats(rng, n, -2, 2);
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dgate(static_cast<size_t>(n)),
         dup(static_cast<size_t>(n));
  zrt_swiglu_grad(ZRT_F32, gate.data(), up.data(), dy.data(), dgate.data(),
                  dup.data(), n);
  auto swiglu = [&](const Floats &g, const Floats &u) {
    Floats out(static_cast<size_t>(n));
    zrt_swiglu(ZRT_F32, g.data(), u.data(), out.data(), n);
    return out;
  };
  checkGradient(
      "swiglu dgate", gate, [&](const Floats &v) { return swiglu(v, up); }, w,
      dgate, rng, 1e-3);
  checkGradient(
      "swiglu dup", up, [&](const Floats &v) { return swiglu(gate, v); }, w,
      dup, rng, 1e-3);
}

// rope's backward is the inverse rope of dy, and the inverse rope's the rope,
// with theta's frequencies or a table, and with cos and sin scaled.
TEST_F(GradTest, Rope) {
  int64_t batch = 2, heads = 2, seq = 9, dim = 8, n = batch * heads * seq * dim;
  const float table[] = {0.9f, 0.0f, 0.25f, 1e-3f};
  for (int mode = 0; mode < 8; ++mode) {
    int interleaved = mode & 1, inverse = (mode >> 1) & 1;
    const float *invFreq = mode >> 2 ? table : nullptr;
    double scale = mode >> 2 ? 1.25 : 1.0;
    Floats x = randomFloats(rng, n);
    std::vector<double> w = weights(rng, n);
    Floats dy = asFloats(w), dx(static_cast<size_t>(n));
    zrt_rope(ZRT_F32, dy.data(), dx.data(), batch, heads, seq, dim, 1e4,
             !inverse, interleaved, invFreq, scale);
    checkGradient(
        std::string("rope") + (inverse ? " inverse" : "") +
            (interleaved ? " interleaved" : "") + (invFreq ? " table" : ""),
        x,
        [&](const Floats &v) {
          Floats out(static_cast<size_t>(n));
          zrt_rope(ZRT_F32, v.data(), out.data(), batch, heads, seq, dim, 1e4,
                   inverse, interleaved, invFreq, scale);
          return out;
        },
        w, dx, rng);
  }
}

TEST_F(GradTest, Softmax) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 9}, {2, 1100}}) {
    int64_t n = rows * cols;
    Floats x = randomFloats(rng, n, -3, 3);
    std::vector<double> w = weights(rng, n);
    Floats dy = asFloats(w), y(static_cast<size_t>(n)),
           dx(static_cast<size_t>(n));
    auto softmax = [&](const Floats &v) {
      Floats out(static_cast<size_t>(n));
      zrt_softmax(ZRT_F32, v.data(), out.data(), rows, cols);
      return out;
    };
    y = softmax(x);
    zrt_softmax_grad(ZRT_F32, y.data(), dy.data(), dx.data(), rows, cols);
    checkGradient("softmax", x, softmax, w, dx, rng);
  }
}

TEST_F(GradTest, LogsumexpReduceMax) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6, 9}, {2, 1100}}) {
    int64_t n = rows * cols;
    Floats x = randomFloats(rng, n, -3, 3);
    std::vector<double> w = weights(rng, rows);
    Floats dy = asFloats(w), y(static_cast<size_t>(rows)),
           dx(static_cast<size_t>(n));
    auto reduce = [&](auto fn) {
      return [&, fn](const Floats &v) {
        Floats out(static_cast<size_t>(rows));
        fn(ZRT_F32, v.data(), out.data(), rows, cols);
        return out;
      };
    };
    zrt_logsumexp(ZRT_F32, x.data(), y.data(), rows, cols);
    zrt_logsumexp_grad(ZRT_F32, x.data(), y.data(), dy.data(), dx.data(), rows,
                       cols);
    // A larger step: the result (about 3 + log(cols)) rounds to an fp32 ulp
    // near 1e-6, which a step of 1e-2 would magnify past the gradients of
    // a long row (about 1 / cols).
    checkGradient("logsumexp", x, reduce(zrt_logsumexp), w, dx, rng, 1e-1);
    // Away from ties (the maximum is not differentiable there): each row's
    // largest value leads the others by more than the step.
    for (int64_t r = 0; r < rows; ++r) {
      float *row = x.data() + r * cols;
      *std::max_element(row, row + cols) += 0.5f;
    }
    zrt_reduce_max(ZRT_F32, x.data(), y.data(), rows, cols);
    zrt_reduce_max_grad(ZRT_F32, x.data(), y.data(), dy.data(), dx.data(), rows,
                        cols);
    checkGradient("reduce_max", x, reduce(zrt_reduce_max), w, dx, rng);
  }
}

TEST_F(GradTest, LayerNorm) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {2, 1100}}) {
    int64_t n = rows * cols;
    double eps = 1e-5;
    Floats x = randomFloats(rng, n, -2, 3),
           wt = randomFloats(rng, cols, 0.5, 1.5), b = randomFloats(rng, cols);
    std::vector<double> w = weights(rng, n);
    Floats dy = asFloats(w), dx(static_cast<size_t>(n)),
           dw(static_cast<size_t>(cols)), db(static_cast<size_t>(cols));
    zrt_layer_norm_grad(ZRT_F32, x.data(), wt.data(), dy.data(), dx.data(),
                        dw.data(), db.data(), rows, cols, eps);
    auto ln = [&](const Floats &xs, const Floats &ws, const Floats &bs) {
      Floats out(static_cast<size_t>(n));
      zrt_layer_norm(ZRT_F32, xs.data(), ws.data(), bs.data(), out.data(), rows,
                     cols, eps);
      return out;
    };
    checkGradient(
        "layer_norm dx", x, [&](const Floats &v) { return ln(v, wt, b); }, w,
        dx, rng);
    checkGradient(
        "layer_norm dw", wt, [&](const Floats &v) { return ln(x, v, b); }, w,
        dw, rng);
    checkGradient(
        "layer_norm db", b, [&](const Floats &v) { return ln(x, wt, v); }, w,
        db, rng);
  }
}

TEST_F(GradTest, RmsNorm) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {2, 1100}}) {
    int64_t n = rows * cols;
    double eps = 1e-5;
    Floats x = randomFloats(rng, n, -2, 3),
           wt = randomFloats(rng, cols, 0.5, 1.5);
    std::vector<double> w = weights(rng, n);
    Floats dy = asFloats(w), dx(static_cast<size_t>(n)),
           dw(static_cast<size_t>(cols));
    zrt_rms_norm_grad(ZRT_F32, x.data(), wt.data(), dy.data(), dx.data(),
                      dw.data(), rows, cols, eps);
    auto rms = [&](const Floats &xs, const Floats &ws) {
      Floats out(static_cast<size_t>(n));
      zrt_rms_norm(ZRT_F32, xs.data(), ws.data(), out.data(), rows, cols, eps);
      return out;
    };
    checkGradient(
        "rms_norm dx", x, [&](const Floats &v) { return rms(v, wt); }, w, dx,
        rng);
    checkGradient(
        "rms_norm dw", wt, [&](const Floats &v) { return rms(x, v); }, w, dw,
        rng);
  }
}

TEST_F(GradTest, Attention) {
  struct Case {
    int64_t batch, heads, kvHeads, seq, dim;
  };
  // A small case and one with several key/query blocks; grouped-query (two
  // query heads per key/value head, over two batches) and multi-query
  // attention, whose dK and dV sum over the group.
  for (Case c : {Case{1, 2, 2, 5, 4}, Case{1, 1, 1, 70, 8}, Case{2, 4, 2, 6, 4},
                 Case{1, 3, 1, 7, 4}, Case{1, 2, 1, 70, 8}}) {
    for (int causal = 0; causal < 2; ++causal) {
      int64_t n = c.batch * c.heads * c.seq * c.dim,
              nkv = c.batch * c.kvHeads * c.seq * c.dim;
      Floats q = randomFloats(rng, n), k = randomFloats(rng, nkv),
             v = randomFloats(rng, nkv);
      std::vector<double> w = weights(rng, n);
      Floats dO = asFloats(w), o(static_cast<size_t>(n)),
             dq(static_cast<size_t>(n)), dk(static_cast<size_t>(nkv)),
             dv(static_cast<size_t>(nkv));
      auto attention = [&](const Floats &qs, const Floats &ks,
                           const Floats &vs) {
        Floats out(static_cast<size_t>(n));
        zrt_attention_forward(AttentionDesc(ZRT_F32, c.batch, c.heads,
                                            c.kvHeads, c.seq, c.dim, causal, 0),
                              qs.data(), ks.data(), vs.data(), out.data());
        return out;
      };
      o = attention(q, k, v);
      zrt_attention_backward(AttentionDesc(ZRT_F32, c.batch, c.heads, c.kvHeads,
                                           c.seq, c.dim, causal,
                                           1.0 / std::sqrt(double(c.dim))),
                             q.data(), k.data(), v.data(), o.data(), dO.data(),
                             dq.data(), dk.data(), dv.data());
      std::string what = "attention heads " + std::to_string(c.heads) + "/" +
                         std::to_string(c.kvHeads) + " seq " +
                         std::to_string(c.seq) + " causal " +
                         std::to_string(causal);
      checkGradient(
          what + " dq", q, [&](const Floats &x) { return attention(x, k, v); },
          w, dq, rng);
      checkGradient(
          what + " dk", k, [&](const Floats &x) { return attention(q, x, v); },
          w, dk, rng);
      checkGradient(
          what + " dv", v, [&](const Floats &x) { return attention(q, k, x); },
          w, dv, rng);
    }
  }
}

// gpt-oss's attention sinks: dq, dk, dv and the sinks' gradient, causal
// with and without a window, grouped-query.
TEST_F(GradTest, AttentionSinks) {
  struct Case {
    int64_t batch, heads, kvHeads, seq, dim, window;
  };
  for (Case c : {Case{1, 2, 2, 5, 4, 0}, Case{2, 4, 2, 6, 4, 3},
                 Case{1, 3, 1, 7, 4, 2}}) {
    int64_t n = c.batch * c.heads * c.seq * c.dim,
            nkv = c.batch * c.kvHeads * c.seq * c.dim;
    Floats q = randomFloats(rng, n), k = randomFloats(rng, nkv),
           v = randomFloats(rng, nkv), sinks = randomFloats(rng, c.heads);
    std::vector<double> w = weights(rng, n);
    Floats dO = asFloats(w), dq(static_cast<size_t>(n)),
           dk(static_cast<size_t>(nkv)), dv(static_cast<size_t>(nkv)),
           ds(static_cast<size_t>(c.heads));
    double scale = 1.0 / std::sqrt(double(c.dim));
    auto attention = [&](const Floats &qs, const Floats &ks, const Floats &vs,
                         const Floats &ss) {
      Floats out(static_cast<size_t>(n));
      zrt_attention_forward(AttentionDesc(ZRT_F32, c.batch, c.heads, c.kvHeads,
                                          c.seq, c.dim, 1, scale, c.window, 0,
                                          nullptr, ss.data()),
                            qs.data(), ks.data(), vs.data(), out.data());
      return out;
    };
    Floats o = attention(q, k, v, sinks);
    zrt_attention_backward(AttentionDesc(ZRT_F32, c.batch, c.heads, c.kvHeads,
                                         c.seq, c.dim, 1, scale, c.window, 0,
                                         nullptr, sinks.data()),
                           q.data(), k.data(), v.data(), o.data(), dO.data(),
                           dq.data(), dk.data(), dv.data());
    zrt_attention_dsinks(AttentionDesc(ZRT_F32, c.batch, c.heads, c.kvHeads,
                                       c.seq, c.dim, 1, scale, c.window, 0,
                                       nullptr, sinks.data()),
                         q.data(), k.data(), o.data(), dO.data(), ds.data());
    std::string what = "attention sinks heads " + std::to_string(c.heads) +
                       "/" + std::to_string(c.kvHeads) + " window " +
                       std::to_string(c.window);
    checkGradient(
        what + " dq", q,
        [&](const Floats &x) { return attention(x, k, v, sinks); }, w, dq, rng);
    checkGradient(
        what + " dk", k,
        [&](const Floats &x) { return attention(q, x, v, sinks); }, w, dk, rng);
    checkGradient(
        what + " dv", v,
        [&](const Floats &x) { return attention(q, k, x, sinks); }, w, dv, rng);
    checkGradient(
        what + " dsinks", sinks,
        [&](const Floats &x) { return attention(q, k, v, x); }, w, ds, rng);
  }
}

// The clamped SwiGLU's gradients, with inputs on both sides of the limits.
TEST_F(GradTest, ClampedSwiglu) {
  int64_t n = 200;
  double alpha = 1.702, limit = 1.5;
  Floats gate = randomFloats(rng, n, -4, 4), up = randomFloats(rng, n, -4, 4);
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dgate(static_cast<size_t>(n)),
         dup(static_cast<size_t>(n));
  zrt_clamped_swiglu_grad(ZRT_F32, gate.data(), up.data(), dy.data(),
                          dgate.data(), dup.data(), n, alpha, limit);
  auto forward = [&](const Floats &g, const Floats &u) {
    Floats out(static_cast<size_t>(n));
    zrt_clamped_swiglu(ZRT_F32, g.data(), u.data(), out.data(), n, alpha,
                       limit);
    return out;
  };
  checkGradient(
      "clamped swiglu dgate", gate,
      [&](const Floats &v) { return forward(v, up); }, w, dgate, rng, 1e-3);
  checkGradient(
      "clamped swiglu dup", up,
      [&](const Floats &v) { return forward(gate, v); }, w, dup, rng, 1e-3);
  // Clamped inputs get no gradient, as torch's clamp.
  for (int64_t i = 0; i < n; ++i) {
    if (gate[i] > limit)
      EXPECT_EQ(dgate[i], 0.0f) << i;
    if (up[i] > limit || up[i] < -limit)
      EXPECT_EQ(dup[i], 0.0f) << i;
  }
}

// xIELU's input gradient and its coefficients' (the sums of the per-element
// terms) by finite differences away from 0 and eps, where it has kinks;
// there, the values autograd gives (half of minimum's gradient at x == eps,
// beta - an up to 0).
TEST_F(GradTest, Xielu) {
  int64_t n = 200;
  const double beta = 0.5, eps = -1e-6;
  Floats x = randomFloats(rng, n, 0.05, 4);
  for (int64_t i = 0; i < n; i += 2)
    x[i] = -x[i];
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dx(n), pp(n), pn(n), ap{0.8f}, an{1.3f};
  zrt_xielu_grad(ZRT_F32, x.data(), ap.data(), an.data(), dy.data(), dx.data(),
                 pp.data(), pn.data(), n, beta, eps);
  auto forward = [&](const Floats &v, const Floats &p, const Floats &q) {
    Floats out(static_cast<size_t>(n));
    zrt_xielu(ZRT_F32, v.data(), p.data(), q.data(), out.data(), n, beta, eps);
    return out;
  };
  auto sum = [](const Floats &v) {
    return Floats{float(std::accumulate(v.begin(), v.end(), 0.0))};
  };
  checkGradient(
      "xielu dx", x, [&](const Floats &v) { return forward(v, ap, an); }, w, dx,
      rng, 1e-3);
  checkGradient(
      "xielu dalpha_p", ap, [&](const Floats &v) { return forward(x, v, an); },
      w, sum(pp), rng, 1e-3);
  checkGradient(
      "xielu dalpha_n", an, [&](const Floats &v) { return forward(x, ap, v); },
      w, sum(pn), rng, 1e-3);

  // At the kinks, with an = 0.8: x == eps (fp32's eps), between eps and 0,
  // and both zeros, which take the negative branch.
  float e = float(eps);
  Floats xs{e, e / 2, 0.0f, -0.0f}, ones(4, 1.0f), an8{0.8f};
  Floats dk(4), pk(4), nk(4);
  zrt_xielu_grad(ZRT_F32, xs.data(), ap.data(), an8.data(), ones.data(),
                 dk.data(), pk.data(), nk.data(), 4, beta, eps);
  double anv = 0.8f;
  EXPECT_NEAR(dk[0], anv * (0.5 * std::exp(double(e)) - 1) + beta, 1e-7);
  EXPECT_NEAR(dk[0], 0.0999996, 1e-6);
  for (int i = 1; i < 4; ++i) {
    EXPECT_NEAR(dk[i], beta - anv, 1e-7) << i;
    EXPECT_EQ(pk[i], 0.0f) << i;
  }
  EXPECT_NEAR(nk[2], std::expm1(double(e)), 1e-12);
}

// A policy-gradient loss's ops by finite differences: gather's scatter-add
// (repeated indices in a row), clamp and minimum/maximum away from their
// kinks (the ties, at which autograd splits, are KernelTest's).
TEST_F(GradTest, GatherClampMinMax) {
  const int64_t rows = 5, cols = 9, k = 4;
  Floats x = randomFloats(rng, rows * cols);
  std::vector<int64_t> idx(rows * k);
  for (int64_t i = 0; i < rows * k; ++i)
    idx[size_t(i)] = (i * 7 + i / k) % cols;
  idx[1] = idx[2];
  std::vector<double> w = weights(rng, rows * k);
  Floats dy = asFloats(w), dx(rows * cols);
  zrt_gather_grad(ZRT_F32, ZRT_I64, idx.data(), dy.data(), dx.data(), rows,
                  cols, k);
  checkGradient(
      "gather", x,
      [&](const Floats &v) {
        Floats y(rows * k);
        zrt_gather(ZRT_F32, v.data(), ZRT_I64, idx.data(), y.data(), rows, cols,
                   k);
        return y;
      },
      w, dx, rng);

  // Inputs at least 0.05 from the bounds and from each other.
  int64_t n = 64;
  Floats a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = float(-1.6 + 0.05 * double(i));
    b[i] = a[i] + (i % 2 ? 0.3f : -0.3f);
  }
  std::vector<double> wn = weights(rng, n);
  Floats g = asFloats(wn), da(n), db(n);
  zrt_clamp_grad(ZRT_F32, a.data(), g.data(), da.data(), n, -0.825, 0.875);
  checkGradient(
      "clamp", a,
      [&](const Floats &v) {
        Floats y(n);
        zrt_clamp(ZRT_F32, v.data(), y.data(), n, -0.825, 0.875);
        return y;
      },
      wn, da, rng, 1e-3);
  for (bool isMax : {false, true}) {
    (isMax ? zrt_maximum_grad : zrt_minimum_grad)(
        ZRT_F32, a.data(), b.data(), g.data(), da.data(), db.data(), n);
    auto forward = [&](const Floats &p, const Floats &q) {
      Floats y(n);
      (isMax ? zrt_maximum : zrt_minimum)(ZRT_F32, p.data(), q.data(), y.data(),
                                          n);
      return y;
    };
    std::string what = isMax ? "maximum" : "minimum";
    checkGradient(
        what + " a", a, [&](const Floats &v) { return forward(v, b); }, wn, da,
        rng, 1e-3);
    checkGradient(
        what + " b", b, [&](const Floats &v) { return forward(a, v); }, wn, db,
        rng, 1e-3);
  }
}

TEST_F(GradTest, Embedding) {
  int64_t vocab = 9, dim = 6, numIds = 14;
  Floats table = randomFloats(rng, vocab * dim);
  std::vector<int32_t> ids(numIds);
  for (int64_t i = 0; i < numIds; ++i)
    ids[i] = int32_t((i * 5) % 7); // repeats; ids 7 and 8 unused
  std::vector<double> w = weights(rng, numIds * dim);
  Floats dy = asFloats(w), dtable(static_cast<size_t>(vocab * dim));
  zrt_embedding_grad(ZRT_F32, dy.data(), ZRT_I32, ids.data(), dtable.data(),
                     numIds, vocab, dim, -1);
  checkGradient(
      "embedding", table,
      [&](const Floats &t) {
        Floats out(static_cast<size_t>(numIds * dim));
        zrt_embedding(ZRT_F32, t.data(), ZRT_I32, ids.data(), out.data(),
                      numIds, vocab, dim);
        return out;
      },
      w, dtable, rng);
}

// padding_idx: the gradient of the lookup with the padding row held fixed
// (PyTorch's nn.Embedding(padding_idx=...) treats it as a constant).
TEST_F(GradTest, EmbeddingPaddingIdx) {
  int64_t vocab = 9, dim = 6, numIds = 14, padding = 3;
  Floats table = randomFloats(rng, vocab * dim);
  std::vector<int32_t> ids(numIds);
  for (int64_t i = 0; i < numIds; ++i)
    ids[i] = int32_t((i * 5) % 7); // id 3 at positions 2 and 9
  std::vector<double> w = weights(rng, numIds * dim);
  Floats dy = asFloats(w), dtable(static_cast<size_t>(vocab * dim));
  zrt_embedding_grad(ZRT_F32, dy.data(), ZRT_I32, ids.data(), dtable.data(),
                     numIds, vocab, dim, padding);
  checkGradient(
      "embedding padding_idx", table,
      [&](const Floats &t) {
        Floats fixed = t, out(static_cast<size_t>(numIds * dim));
        std::copy_n(table.begin() + padding * dim, dim,
                    fixed.begin() + padding * dim);
        zrt_embedding(ZRT_F32, fixed.data(), ZRT_I32, ids.data(), out.data(),
                      numIds, vocab, dim);
        return out;
      },
      w, dtable, rng);
}

TEST_F(GradTest, SoftmaxCrossEntropy) {
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{6, 5}, {3, 1100}}) {
    Floats logits = randomFloats(rng, rows * classes, -3, 3);
    std::vector<int64_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r)
      labels[r] = (r * 7 + 3) % classes;
    std::vector<double> w = {1.3};
    float dloss = 1.3f;
    Floats dlogits(logits.size());
    zrt_softmax_cross_entropy_grad(ZRT_F32, logits.data(), ZRT_I64,
                                   labels.data(), &dloss, dlogits.data(), rows,
                                   classes, classes, 0, 0);
    checkGradient(
        "softmax_cross_entropy", logits,
        [&](const Floats &x) {
          Floats loss(1);
          zrt_softmax_cross_entropy(ZRT_F32, x.data(), ZRT_I64, labels.data(),
                                    loss.data(), rows, classes, classes, 0, 0);
          return loss;
        },
        w, dlogits, rng);
  }
}

// With ignore_index the gradient is that of the mean over the rows that
// count, the ignored rows' exactly 0 (their logits do not reach the loss).
TEST_F(GradTest, SoftmaxCrossEntropyIgnoreIndex) {
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{6, 5}, {3, 1100}}) {
    Floats logits = randomFloats(rng, rows * classes, -3, 3);
    std::vector<int64_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r)
      labels[r] = r % 3 == 1 ? -100 : (r * 7 + 3) % classes;
    std::vector<double> w = {1.3};
    float dloss = 1.3f;
    Floats dlogits(logits.size());
    zrt_softmax_cross_entropy_grad(ZRT_F32, logits.data(), ZRT_I64,
                                   labels.data(), &dloss, dlogits.data(), rows,
                                   classes, classes, 1, -100);
    checkGradient(
        "softmax_cross_entropy ignore_index", logits,
        [&](const Floats &x) {
          Floats loss(1);
          zrt_softmax_cross_entropy(ZRT_F32, x.data(), ZRT_I64, labels.data(),
                                    loss.data(), rows, classes, classes, 1,
                                    -100);
          return loss;
        },
        w, dlogits, rng);
    for (int64_t c = 0; c < classes; ++c)
      EXPECT_EQ(dlogits[1 * classes + c], 0.0f);
  }
}

TEST_F(GradTest, TransposeSplitConcatAdjoints) {
  // transpose's gradient is the inverse permutation.
  std::vector<int64_t> shape = {2, 3, 4}, perm = {2, 0, 1}, inverse = {1, 2, 0};
  std::vector<int64_t> outShape = {4, 2, 3};
  int64_t n = 24;
  Floats x = randomFloats(rng, n);
  std::vector<double> w = weights(rng, n);
  Floats dy = asFloats(w), dx(static_cast<size_t>(n));
  zrt_transpose(ZRT_F32, dy.data(), dx.data(), 3, outShape.data(),
                inverse.data());
  checkGradient(
      "transpose", x,
      [&](const Floats &v) {
        Floats out(static_cast<size_t>(n));
        zrt_transpose(ZRT_F32, v.data(), out.data(), 3, shape.data(),
                      perm.data());
        return out;
      },
      w, dx, rng);

  // concat's gradient is the split of dy, and split's the concat of the
  // parts' gradients.
  int64_t outer = 2, inner = 3;
  std::vector<int64_t> sizes = {1, 3};
  Floats p0 = randomFloats(rng, outer * 1 * inner),
         p1 = randomFloats(rng, outer * 3 * inner);
  Floats d0(p0.size()), d1(p1.size());
  void *parts[] = {d0.data(), d1.data()};
  zrt_split(ZRT_F32, dy.data(), parts, sizes.data(), 2, outer, inner);
  auto concat = [&](const Floats &a, const Floats &b) {
    Floats out(static_cast<size_t>(n));
    const void *ins[] = {a.data(), b.data()};
    zrt_concat(ZRT_F32, ins, sizes.data(), 2, out.data(), outer, inner);
    return out;
  };
  checkGradient(
      "concat part 0", p0, [&](const Floats &v) { return concat(v, p1); }, w,
      d0, rng);
  checkGradient(
      "concat part 1", p1, [&](const Floats &v) { return concat(p0, v); }, w,
      d1, rng);
  std::vector<double> w0 = weights(rng, int64_t(p0.size())),
                      w1 = weights(rng, int64_t(p1.size()));
  std::vector<double> wAll = w0;
  wAll.insert(wAll.end(), w1.begin(), w1.end());
  Floats g0 = asFloats(w0), g1 = asFloats(w1), dWhole(static_cast<size_t>(n));
  const void *grads[] = {g0.data(), g1.data()};
  zrt_concat(ZRT_F32, grads, sizes.data(), 2, dWhole.data(), outer, inner);
  checkGradient(
      "split", x,
      [&](const Floats &v) {
        Floats a(p0.size()), b(p1.size());
        void *outs[] = {a.data(), b.data()};
        zrt_split(ZRT_F32, v.data(), outs, sizes.data(), 2, outer, inner);
        a.insert(a.end(), b.begin(), b.end());
        return a;
      },
      wAll, dWhole, rng);
}

TEST_F(GradTest, CastAdjoint) {
  // cast is the identity on values representable in the narrower type, and
  // its gradient is the cast back: <cast(x), y> == <x, cast^T(y)> exactly.
  for (int32_t narrow : {ZRT_BF16, ZRT_F16}) {
    int64_t n = 64;
    Buffer x(ZRT_F32, Buffer(narrow, randomValues(rng, n)).values());
    Buffer y = randomBuffer(narrow, rng, n);
    Buffer cx(narrow, n), cty(ZRT_F32, n);
    zrt_cast(ZRT_F32, x.data(), narrow, cx.data(), n);
    zrt_cast(narrow, y.data(), ZRT_F32, cty.data(), n);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < n; ++i) {
      lhs += cx.get(i) * y.get(i);
      rhs += x.get(i) * cty.get(i);
    }
    EXPECT_EQ(lhs, rhs) << dtypeName(narrow);
  }
}

} // namespace
