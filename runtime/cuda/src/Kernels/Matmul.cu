//===- Matmul.cu - (Batched) matrix products through cuBLASLt -------------===//
//
// Part of the zero-mlir project.
//
// zrt_matmul on the device. cuBLASLt is column-major, so the row-major
// product C = op(A) op(B) runs as C^T = op(B)^T op(A)^T: the stored rhs is
// cuBLASLt's A and the stored lhs its B, each with its transpose flag
// unchanged. The batch folds into the rows when the rhs is shared and A is
// not transposed (one large product), else it is a strided batch whose rhs
// stride is 0 when the rhs is shared. Accumulation is true fp32
// (CUBLAS_COMPUTE_32F, never TF32) so results compare with the CPU backend.
//
// The workspace is the scratch zero_rt/scratch.h plans for zrt_matmul, so
// the measured peak matches the plan: 0 bytes for f32, the CPU backend's
// panel bytes for 16-bit types. Descriptors and the heuristic's choice are
// cached per shape and operand alignment: a training step repeats the same
// shapes every iteration.
//
//===----------------------------------------------------------------------===//

#include "Kernels/CudaKernels.h"
#include "Support/CudaSupport.h"
#include "Support/Support.h"

#include "zero_rt/scratch.h"

#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

using namespace zrt;
using namespace zrt::cuda;

namespace {

#define ZRT_CUBLASLT_CHECK(expr)                                               \
  do {                                                                         \
    cublasStatus_t zrtStatus_ = (expr);                                        \
    if (zrtStatus_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::zrt::fatal("cuBLASLt: %s failed: %s", #expr,                           \
                   cublasLtGetStatusName(zrtStatus_));                         \
  } while (0)

/// The process's cuBLASLt handle. Never destroyed: it may be used by
/// static destructors of other objects and the driver frees it at exit.
cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    computeStream(); // selects the device and creates its context
    cublasLtHandle_t created = nullptr;
    ZRT_CUBLASLT_CHECK(cublasLtCreate(&created));
    return created;
  }();
  return h;
}

/// Everything the heuristic's choice depends on.
struct PlanKey {
  int32_t dtype;
  bool ta, tb;
  int64_t batch, rows, n, k; // rows: m, or batch * m when folded
  int64_t kSum;              // the part of k summed (k but for padding)
  // Elements between batch items (0 for a shared rhs) and byte alignments
  // of the stored lhs, rhs and output.
  int64_t strideLhs, strideRhs;
  uint32_t alignLhs, alignRhs, alignOut;

  bool operator<(const PlanKey &o) const {
    return std::tie(dtype, ta, tb, batch, rows, n, k, kSum, strideLhs,
                    strideRhs, alignLhs, alignRhs, alignOut) <
           std::tie(o.dtype, o.ta, o.tb, o.batch, o.rows, o.n, o.k, o.kSum,
                    o.strideLhs, o.strideRhs, o.alignLhs, o.alignRhs,
                    o.alignOut);
  }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  // In cuBLASLt's roles: a is the stored rhs, b the stored lhs.
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
};

void destroyPlan(Plan &p) {
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatmulDescDestroy(p.desc);
}

cudaDataType_t cudaType(int32_t dtype) {
  return dtype == ZRT_F32    ? CUDA_R_32F
         : dtype == ZRT_BF16 ? CUDA_R_16BF
                             : CUDA_R_16F;
}

/// A column-major layout of rows x cols with leading dimension ld and
/// `batch` items `stride` elements apart.
cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t batch,
                                  int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  ZRT_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows),
                                                uint64_t(cols), ld));
  if (batch > 1) {
    int32_t count = int32_t(batch);
    ZRT_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    ZRT_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride)));
  }
  return layout;
}

Plan makePlan(const PlanKey &key, int64_t workspaceBytes) {
  cudaDataType_t type = cudaType(key.dtype);
  Plan p;
  ZRT_CUBLASLT_CHECK(
      cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's A is the stored rhs: [k, n] row-major is column-major
  // [n, k] (ld n); stored transposed, [n, k] row-major is [k, n] (ld k).
  cublasOperation_t opA = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLASLt's B is the stored lhs: [m, k] row-major is column-major
  // [k, m] (ld k); stored transposed, [k, m] row-major is [m, k] (ld m).
  cublasOperation_t opB = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZRT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
  ZRT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
      p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
  // The leading dimensions follow the stored k, the shapes the summed ks.
  int64_t m = key.rows, n = key.n, k = key.k, ks = key.kSum;
  p.a = key.tb ? makeLayout(type, ks, n, k, key.batch, key.strideRhs)
               : makeLayout(type, n, ks, n, key.batch, key.strideRhs);
  p.b = key.ta ? makeLayout(type, m, ks, m, key.batch, key.strideLhs)
               : makeLayout(type, ks, m, k, key.batch, key.strideLhs);
  p.c = makeLayout(type, n, m, n, key.batch, m * n);

  cublasLtMatmulPreference_t pref = nullptr;
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t maxWorkspace = uint64_t(workspaceBytes);
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
      sizeof(maxWorkspace)));
  // The heuristic assumes 256-byte aligned operands unless told otherwise;
  // arena offsets and batch strides can be less aligned.
  uint32_t alignA = key.alignRhs, alignB = key.alignLhs, alignC = key.alignOut;
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
      sizeof(alignA)));
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
      sizeof(alignB)));
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
      sizeof(alignC)));
  ZRT_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
      sizeof(alignC)));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  // With no algorithm for the configuration the heuristic reports
  // CUBLAS_STATUS_NOT_SUPPORTED (and no results) rather than success with 0
  // results: both get the same clear error.
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle(), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
    fatal("cuBLASLt: cublasLtMatmulAlgoGetHeuristic failed: %s",
          cublasLtGetStatusName(status));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0 ||
      result.state != CUBLAS_STATUS_SUCCESS)
    fatal("zrt_matmul: cuBLASLt has no algorithm for %lld product(s) of "
          "%lld x %lld x %lld (dtype %d, transpose_a %d, transpose_b %d, "
          "alignments %u/%u/%u bytes, workspace %lld bytes)",
          (long long)key.batch, (long long)m, (long long)n, (long long)k,
          int(key.dtype), int(key.ta), int(key.tb), unsigned(key.alignLhs),
          unsigned(key.alignRhs), unsigned(key.alignOut),
          (long long)workspaceBytes);
  p.algo = result.algo;
  return p;
}

/// Plans are kept for the process; a program with unboundedly many shapes
/// would grow the cache forever, so it starts over past this size.
constexpr size_t kMaxPlans = 1024;

struct PlanCache {
  std::mutex mutex;
  std::map<PlanKey, Plan> plans;
};

PlanCache &planCache() {
  static PlanCache *cache = new PlanCache; // outlives static destructors
  return *cache;
}

/// The largest power of two (at most 256) dividing the address and every
/// batch item's offset.
uint32_t alignment(const void *ptr, int64_t strideBytes) {
  uint64_t bits =
      uint64_t(reinterpret_cast<uintptr_t>(ptr)) | uint64_t(strideBytes) | 256;
  return uint32_t(bits & (~bits + 1));
}

} // namespace

namespace {
/// zrt_matmul, adding into c with `accumulate` (cuBLASLt's beta = 1).
void matmulInto(int32_t dtype, const void *a, const void *b, void *c,
                int64_t batch, int64_t m, int64_t n, int64_t k,
                int32_t transposeA, int32_t transposeB, int32_t bIsBatched,
                int64_t kSum, bool accumulate) {
  checkMatmul(batch, m, n, k, kSum);
  if (batch == 0 || m == 0 || n == 0)
    return;
  int64_t elem = 0;
  dispatch(dtype, "zrt_matmul", [&](auto tag) { elem = sizeof(tag); });
  if (kSum == 0 && accumulate)
    return;
  if (kSum == 0) {
    ZRT_CUDA_CHECK(
        cudaMemsetAsync(c, 0, size_t(batch * m * n * elem), computeStream()));
    return;
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    fatal("zrt_matmul: dimensions exceed the cuBLASLt int range");

  bool ta = transposeA != 0, tb = transposeB != 0, bBatched = bIsBatched != 0;
  // The same fold as the CPU backend (and the scratch formula), while the
  // folded rows still fit cuBLASLt's int32 dimensions.
  bool fold = !ta && !bBatched && batch * m <= INT32_MAX;
  PlanKey key{};
  key.dtype = dtype;
  key.ta = ta;
  key.tb = tb;
  key.batch = fold ? 1 : batch;
  key.rows = fold ? batch * m : m;
  key.n = n;
  key.k = k;
  key.kSum = kSum;
  key.strideLhs = key.rows * k;
  key.strideRhs = bBatched ? k * n : 0;
  if (key.batch > INT32_MAX)
    fatal("zrt_matmul: batch %lld exceeds the cuBLASLt int range",
          (long long)batch);
  bool batched = key.batch > 1;
  key.alignLhs = alignment(a, batched ? key.strideLhs * elem : 0);
  key.alignRhs = alignment(b, batched ? key.strideRhs * elem : 0);
  key.alignOut = alignment(c, batched ? key.rows * n * elem : 0);

  // Exactly the planned scratch; a workspace of 0 bytes for f32.
  DeviceScratch workspace(
      zrt_scratch_matmul(dtype, batch, m, n, k, transposeA, bIsBatched));
  {
    PlanCache &cache = planCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.plans.find(key);
    if (it == cache.plans.end()) {
      if (cache.plans.size() >= kMaxPlans) {
        // Descriptors are host objects that enqueued launches no longer
        // reference.
        for (auto &entry : cache.plans)
          destroyPlan(entry.second);
        cache.plans.clear();
      }
      it = cache.plans.emplace(key, makePlan(key, workspace.size())).first;
    }
    const Plan &plan = it->second;
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    // Under the lock: another thread may clear the cache and destroy the
    // descriptors.
    ZRT_CUBLASLT_CHECK(
        cublasLtMatmul(handle(), plan.desc, &alpha, b, plan.a, a, plan.b, &beta,
                       c, plan.c, c, plan.c, &plan.algo, workspace.as(),
                       size_t(workspace.size()), computeStream()));
  }
}
} // namespace

void zrt::cuda::matmul(int32_t dtype, const void *a, const void *b, void *c,
                       int64_t batch, int64_t m, int64_t n, int64_t k,
                       int32_t transposeA, int32_t transposeB,
                       int32_t bIsBatched, int64_t kSum) {
  matmulInto(dtype, a, b, c, batch, m, n, k, transposeA, transposeB, bIsBatched,
             kSum, /*accumulate=*/false);
}

void zrt::cuda::matmulAccumulate(int32_t dtype, const void *a, const void *b,
                                 void *c, int64_t m, int64_t n, int64_t k,
                                 int32_t transposeA, int32_t transposeB) {
  matmulInto(dtype, a, b, c, 1, m, n, k, transposeA, transposeB, 0, k,
             /*accumulate=*/true);
}

namespace {
void checkTiledMlp(const char *kernel, int32_t dtype, int64_t rows,
                   int64_t hidden, int64_t inter, int64_t tiles) {
  if (dtype != ZRT_F32)
    fatal("%s: f32 only, got dtype %d", kernel, int(dtype));
  checkDims(kernel, rows, hidden, inter);
  if (tiles < 1)
    fatal("%s: tiles %lld is not positive", kernel, (long long)tiles);
}
} // namespace

// One tile's gate and up at a time in the planned scratch
// (zrt_scratch_tiled_mlp), through the same products and activation kernels
// as the untiled MLP.
void zrt::cuda::tiledMlp(int32_t dtype, const void *x, const void *wg,
                         const void *wu, const void *wd, void *y, int64_t rows,
                         int64_t hidden, int64_t inter, int64_t tiles) {
  checkTiledMlp("zrt_tiled_mlp", dtype, rows, hidden, inter, tiles);
  if (rows == 0)
    return;
  const float *xv = static_cast<const float *>(x);
  float *yv = static_cast<float *>(y);
  int64_t tile = zrt_tiled_mlp_tile_rows(rows, tiles);
  DeviceScratch scratch(zrt_scratch_tiled_mlp(rows, inter, tiles));
  float *gate = scratch.as<float>(), *up = gate + tile * inter;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    int64_t n = std::min(tile, rows - r0);
    const float *xt = xv + r0 * hidden;
    matmul(ZRT_F32, xt, wg, gate, 1, n, inter, hidden, 0, 1, 0, hidden);
    matmul(ZRT_F32, xt, wu, up, 1, n, inter, hidden, 0, 1, 0, hidden);
    swiglu(ZRT_F32, gate, up, gate, n * inter);
    matmul(ZRT_F32, gate, wd, yv + r0 * hidden, 1, n, hidden, inter, 0, 1, 0,
           inter);
  }
}

// As the CPU kernel: per tile gate and up recomputed, the activation for
// dwd, its gradient over it, then zrt_swiglu_grad in place; weight
// gradients accumulated (beta 1) after the first tile.
void zrt::cuda::tiledMlpGrad(int32_t dtype, const void *x, const void *wg,
                             const void *wu, const void *wd, const void *dy,
                             void *dx, void *dwg, void *dwu, void *dwd,
                             int64_t rows, int64_t hidden, int64_t inter,
                             int64_t tiles) {
  checkTiledMlp("zrt_tiled_mlp_grad", dtype, rows, hidden, inter, tiles);
  if (rows == 0) {
    size_t bytes = size_t(inter * hidden) * sizeof(float);
    for (void *dw : {dwg, dwu, dwd})
      ZRT_CUDA_CHECK(cudaMemsetAsync(dw, 0, bytes, computeStream()));
    return;
  }
  const float *xv = static_cast<const float *>(x);
  const float *dyv = static_cast<const float *>(dy);
  float *dxv = static_cast<float *>(dx);
  int64_t tile = zrt_tiled_mlp_tile_rows(rows, tiles);
  DeviceScratch scratch(zrt_scratch_tiled_mlp_grad(rows, inter, tiles));
  float *gate = scratch.as<float>(), *up = gate + tile * inter,
        *act = up + tile * inter;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    int64_t n = std::min(tile, rows - r0);
    const float *xt = xv + r0 * hidden, *dyt = dyv + r0 * hidden;
    float *dxt = dxv + r0 * hidden;
    matmul(ZRT_F32, xt, wg, gate, 1, n, inter, hidden, 0, 1, 0, hidden);
    matmul(ZRT_F32, xt, wu, up, 1, n, inter, hidden, 0, 1, 0, hidden);
    swiglu(ZRT_F32, gate, up, act, n * inter);
    if (r0 == 0) {
      matmul(ZRT_F32, dyt, act, dwd, 1, hidden, inter, n, 1, 0, 0, n);
    } else {
      matmulAccumulate(ZRT_F32, dyt, act, dwd, hidden, inter, n, 1, 0);
    }
    matmul(ZRT_F32, dyt, wd, act, 1, n, inter, hidden, 0, 0, 0, hidden);
    swigluGrad(ZRT_F32, gate, up, act, gate, up, n * inter);
    if (r0 == 0) {
      matmul(ZRT_F32, gate, xt, dwg, 1, inter, hidden, n, 1, 0, 0, n);
      matmul(ZRT_F32, up, xt, dwu, 1, inter, hidden, n, 1, 0, 0, n);
    } else {
      matmulAccumulate(ZRT_F32, gate, xt, dwg, inter, hidden, n, 1, 0);
      matmulAccumulate(ZRT_F32, up, xt, dwu, inter, hidden, n, 1, 0);
    }
    matmul(ZRT_F32, gate, wg, dxt, 1, n, hidden, inter, 0, 0, 0, inter);
    matmulAccumulate(ZRT_F32, up, wu, dxt, n, hidden, inter, 0, 0);
  }
}
