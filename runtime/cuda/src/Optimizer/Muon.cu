//===- Muon.cu - torch.optim.Muon's step on the GPU -----------------------===//
//
// Part of the zero-mlir project.
//
// The CPU's step (src/Optimizer/Muon.cpp) with the same per-element formulas
// (KernelMath.h) and scratch layout: the bf16 values widened to fp32, each
// product an fp32 cuBLASLt GEMM (CUBLAS_COMPUTE_32F, never TF32; exact
// products, fp32 sums) rounded once. The momentum matches the CPU's to the
// bit; the parameter up to the sums' order, as the CPU's matches torch's.
// The Frobenius norm is summed in double by one block, in a fixed order, and
// left on the device: no launch waits for the host.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Optimizer/Muon.h"
#include "Support/CudaGraphs.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include <algorithm>
#include <type_traits>

using namespace zrt;
using namespace zrt::cuda;

namespace {

constexpr int kThreads = 256;
constexpr int kNormThreads = 1024;

unsigned gridOf(int64_t n) {
  return unsigned(std::min<int64_t>(ceilDiv(n, kThreads), 65535));
}

#define ZRT_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// The momentum, and the matrix to orthogonalize in bf16 ([m, n]; the
/// transpose when rows > cols).
template <typename T>
__global__ void momentumKernel(const T *grad, float *momentum, float *x,
                               int64_t rows, int64_t cols, bool transposed,
                               MuonConstants k, float gradScale) {
  ZRT_GRID_STRIDE(at, rows * cols) {
    float buf = momentum[at];
    float u = muonMomentum(__fmul_rn(toF32(grad[at]), gradScale), buf, k);
    momentum[at] = buf;
    int64_t i = at / cols, j = at % cols;
    x[transposed ? j * rows + i : at] = u;
  }
}

/// *norm = max(bf16(||x||_F), bf16(eps)), the squares summed in double by
/// one block in a fixed order.
__global__ void __launch_bounds__(kNormThreads)
    normKernel(const float *x, int64_t n, float eps, float *norm) {
  __shared__ double partial[kNormThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads)
    sum += double(x[i]) * double(x[i]);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kNormThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float v = roundBf16(float(sqrt(partial[0])));
    float e = roundBf16(eps);
    *norm = v < e ? e : v;
  }
}

__global__ void divideKernel(float *x, int64_t n, const float *norm) {
  float d = *norm;
  ZRT_GRID_STRIDE(i, n) { x[i] = roundBf16(x[i] / d); }
}

__global__ void roundKernel(float *x, int64_t n) {
  ZRT_GRID_STRIDE(i, n) { x[i] = roundBf16(x[i]); }
}

/// out = bf16(beta * in + alpha * out), torch's bf16 addmm on `out`'s sums.
__global__ void addmmKernel(float beta, const float *in, float alpha,
                            float *out, int64_t n) {
  ZRT_GRID_STRIDE(i, n) { out[i] = addmmBf16(beta, in[i], alpha, out[i]); }
}

/// x = bf16(a x + sum), in place.
__global__ void updateXKernel(float a, float *x, const float *sum, int64_t n) {
  ZRT_GRID_STRIDE(i, n) { x[i] = addmmBf16(a, x[i], 1.0f, sum[i]); }
}

template <typename T>
__global__ void applyKernel(const float *x, float *master, T *param,
                            int64_t rows, int64_t cols, bool transposed,
                            MuonConstants k) {
  ZRT_GRID_STRIDE(at, rows * cols) {
    int64_t i = at / cols, j = at % cols;
    float w = muonApply(master[at], x[transposed ? j * rows + i : at], k);
    master[at] = w;
    if (param)
      param[at] = fromF32<T>(w);
  }
}

} // namespace

void zrt::cuda::muonStep(int32_t dtype, const void *grad, float *master,
                         float *momentum, void *param, int64_t rows,
                         int64_t cols, const MuonConstants &k, int32_t nsSteps,
                         void *scratch, float gradScale) {
  if (rows <= 0 || cols <= 0)
    fatal("muon: the matrix [%lld, %lld] is empty", (long long)rows,
          (long long)cols);
  if (nsSteps < 0 || nsSteps >= 100)
    fatal("muon: %d Newton-Schulz steps; expected 0 to 99", int(nsSteps));
  MuonShape s = muonShape(rows, cols);
  int64_t m = s.m, n = s.n, total = rows * cols;
  float *x = static_cast<float *>(scratch);
  float *prod = x + m * n;
  float *gram = prod + m * n;
  float *update = gram + m * m;
  cudaStream_t stream = computeStream();

  dispatch(dtype, "muon", [&](auto tag) {
    using T = decltype(tag);
    momentumKernel<T><<<gridOf(total), kThreads, 0, stream>>>(
        static_cast<const T *>(grad), momentum, x, rows, cols, s.transposed, k,
        gradScale);
  });
  checkLaunch("muon");
  // The norm waits in `prod`, free until the first X update.
  normKernel<<<1, kNormThreads, 0, stream>>>(x, m * n, k.eps, prod);
  divideKernel<<<gridOf(m * n), kThreads, 0, stream>>>(x, m * n, prod);
  checkLaunch("muon");

  for (int32_t step = 0; step < nsSteps; ++step) {
    matmul(ZRT_F32, x, x, gram, 1, m, m, n, 0, 1, 0, n);
    roundKernel<<<gridOf(m * m), kThreads, 0, stream>>>(gram, m * m);
    matmul(ZRT_F32, gram, gram, update, 1, m, m, m, 0, 0, 0, m);
    addmmKernel<<<gridOf(m * m), kThreads, 0, stream>>>(k.b, gram, k.c, update,
                                                        m * m);
    matmul(ZRT_F32, update, x, prod, 1, m, n, m, 0, 0, 0, m);
    updateXKernel<<<gridOf(m * n), kThreads, 0, stream>>>(k.a, x, prod, m * n);
    checkLaunch("muon");
  }

  dispatch(dtype, "muon", [&](auto tag) {
    using T = decltype(tag);
    T *p = static_cast<T *>(param);
    if (std::is_same<T, float>::value && param == master)
      p = nullptr;
    applyKernel<T><<<gridOf(total), kThreads, 0, stream>>>(
        x, master, p, rows, cols, s.transposed, k);
  });
  checkLaunch("muon");
}

void zrt::cuda::muon(int32_t dtype, const void *grad, float *master,
                     float *momentumBuffer, void *param,
                     const int64_t *matrices, int32_t numMatrices, int64_t step,
                     double lr, double momentum, double weightDecay,
                     int32_t nesterov, double nsA, double nsB, double nsC,
                     double eps, int32_t nsSteps, int32_t adjustLrFn,
                     const zrt_lr_schedule *schedule, double maxGradNorm,
                     const float *stats, float lossScale, int32_t skip,
                     void *scratch, int64_t scratchBytes) {
  if (!skip && step < 1)
    fatal("zrt_muon: step %lld must be >= 1", (long long)step);
  float gradScale = 1.0f;
  if (!skip) {
    // The factor is the CPU's, computed on the host from the device's
    // stats: only clipping reads them, and waits for them.
    float hostStats[2] = {0.0f, 0.0f};
    if (maxGradNorm > 0) {
      if (!stats)
        fatal("zrt_muon: gradient clipping needs the stats");
      graphs::pause();
      ZRT_CUDA_CHECK(cudaMemcpyAsync(hostStats, stats, sizeof hostStats,
                                     cudaMemcpyDeviceToHost, computeStream()));
      ZRT_CUDA_CHECK(cudaStreamSynchronize(computeStream()));
    }
    gradScale =
        float(zrt_clip_coefficient(hostStats, maxGradNorm) / double(lossScale));
    lr = zrt_lr_at(schedule, lr, momentum != 0.0 ? &momentum : nullptr, nullptr,
                   step);
  }
  muonSlot(
      dtype, grad, master, momentumBuffer, param, matrices, numMatrices, lr,
      momentum, weightDecay, nesterov != 0, nsA, nsB, nsC, eps, nsSteps,
      adjustLrFn, gradScale, skip != 0, scratch, scratchBytes,
      dtype == ZRT_F32 ? 4 : 2,
      [](int32_t dtype, const void *grad, float *master, float *momentum,
         void *param, int64_t rows, int64_t cols, const MuonConstants &k,
         int32_t nsSteps, void *scratch, float gradScale) {
        zrt::cuda::muonStep(dtype, grad, master, momentum, param, rows, cols, k,
                            nsSteps, scratch, gradScale);
      },
      [&](const float *w, void *p, int64_t n) {
        zrt::cuda::cast(ZRT_F32, w, dtype, p, n);
      });
}
