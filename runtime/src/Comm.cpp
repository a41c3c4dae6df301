//===- Comm.cpp - Non-blocking collectives over MPI -----------------------===//
//
// Part of the zero-mlir project.
//
// f32 buffers go to MPI as MPI_FLOAT with the built-in ops: no copies. 16-bit
// buffers travel as MPI_UINT16_T and are reduced by user ops that add (or
// take the max of) each element pair in fp32 and round back, as NCCL does
// for half types: no conversion buffers and half the traffic of fp32, at the
// price of one rounding per pairwise step (ring and tree algorithms order
// the steps differently).
//
//===----------------------------------------------------------------------===//

#include "Collectives.h"
#include "Groups.h"
#include "Kernels.h"
#include "Tokens.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <sched.h>
#include <time.h>

using namespace zrt;

namespace {

struct CommState {
  MPI_Op sumBf16 = MPI_OP_NULL, maxBf16 = MPI_OP_NULL;
  MPI_Op sumF16 = MPI_OP_NULL, maxF16 = MPI_OP_NULL;
  TokenTable<MPI_Request> tokens;
};

CommState &state() {
  static CommState s;
  return s;
}

// The reduction ops are function objects so that they inline into the
// vectorized loops (a function pointer would leave one call per element).
struct Add {
  float operator()(float x, float y) const { return x + y; }
};
// NaN wins, as in MPI_MAX over floats in practice and torch.maximum.
struct Max {
  float operator()(float x, float y) const { return x != x || x > y ? x : y; }
};

/// floatToBf16 (round to nearest even, NaN quieted), written with an early
/// return, which GCC 12 vectorizes into ~10% faster code than the select.
inline uint16_t roundBf16(float x) {
  uint32_t u = floatBits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// inout[i] = op(in[i], inout[i]) on 16-bit values, in fp32. bf16 widens by
/// a shift and rounds with integer arithmetic, so one fused loop vectorizes;
/// f16 converts 1024-element blocks with F16C.
template <typename Op>
void combine(const BF16 *in, BF16 *inout, int64_t len) {
  Op op;
  const uint16_t *a = reinterpret_cast<const uint16_t *>(in);
  uint16_t *b = reinterpret_cast<uint16_t *>(inout);
  for (int64_t i = 0; i < len; ++i)
    b[i] = roundBf16(op(bf16ToFloat(a[i]), bf16ToFloat(b[i])));
}
template <typename Op>
void combine(const F16 *a, F16 *b, int64_t len) {
  Op op;
  alignas(64) float bufA[kBlock], bufB[kBlock];
  for (int64_t i = 0; i < len; i += kBlock) {
    int64_t n = std::min<int64_t>(kBlock, len - i);
    toFloat(a + i, bufA, n);
    toFloat(b + i, bufB, n);
#pragma omp simd
    for (int64_t t = 0; t < n; ++t)
      bufB[t] = op(bufA[t], bufB[t]);
    fromFloat(bufB, b + i, n);
  }
}

template <typename T, typename Op>
void userOp(void *in, void *inout, int *len, MPI_Datatype *) {
  combine<Op>(static_cast<const T *>(in), static_cast<T *>(inout), *len);
}
template <typename T>
void sumOp(void *in, void *inout, int *len, MPI_Datatype *type) {
  userOp<T, Add>(in, inout, len, type);
}
template <typename T>
void maxOp(void *in, void *inout, int *len, MPI_Datatype *type) {
  userOp<T, Max>(in, inout, len, type);
}

struct Typed {
  MPI_Datatype type;
  MPI_Op op;
  int64_t elemSize;
};

Typed typed(int32_t dtype, int32_t reduceOp) {
  if (reduceOp != ZRT_SUM && reduceOp != ZRT_MAX)
    fatal("unknown reduce op %d", int(reduceOp));
  CommState &s = state();
  bool sum = reduceOp == ZRT_SUM;
  switch (dtype) {
  case ZRT_F32:
    return {MPI_FLOAT, sum ? MPI_SUM : MPI_MAX, 4};
  case ZRT_BF16:
    return {MPI_UINT16_T, sum ? s.sumBf16 : s.maxBf16, 2};
  case ZRT_F16:
    return {MPI_UINT16_T, sum ? s.sumF16 : s.maxF16, 2};
  }
  fatal("unknown float dtype %d", int(dtype));
}

int mpiCount(int64_t count, const char *kernel) {
  if (count < 0 || count > INT_MAX)
    fatal("%s: count %lld is outside the MPI int range", kernel,
          (long long)count);
  return int(count);
}

/// Registers a started request and returns its token.
int64_t track(MPI_Request request) {
  return state().tokens.start([&](MPI_Request &slot, bool) { slot = request; });
}

/// Completes a request. MPI_Wait spins in Open MPI's progress loop without
/// yielding unless ranks outnumber the slots, and on cores shared with
/// other ranks or processes that spinning takes CPU time from the very rank
/// being waited for: ranks then run almost in turn at every blocking
/// collective. So the request is tested in a spin for kSpinSeconds (short
/// collectives complete there at full speed), then with sched_yield()
/// between tests: the core goes to whatever else is runnable, and straight
/// back to the test when nothing is, so progress continues (a sleep between
/// tests frees the core more but slows down collectives that advance one
/// round per test, such as libnbc's MPI_Ireduce, several-fold).
/// ZRT_WAIT=spin restores plain MPI_Wait, ZRT_WAIT=sleep sleeps 20 us
/// between tests (see docs/benchmarks.md).
void waitRequest(MPI_Request *request) {
  constexpr double kSpinSeconds = 20e-6;
  // 0: MPI_Wait, 1: test and yield (default), 2: test and sleep.
  static const int policy = [] {
    const char *v = std::getenv("ZRT_WAIT");
    if (v && !std::strcmp(v, "spin"))
      return 0;
    if (v && !std::strcmp(v, "sleep"))
      return 2;
    return 1;
  }();
  if (policy == 0) {
    MPI_Wait(request, MPI_STATUS_IGNORE);
    return;
  }
  int done = 0;
  double start = MPI_Wtime();
  for (;;) {
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    if (MPI_Wtime() - start > kSpinSeconds) {
      if (policy == 1)
        sched_yield();
      else {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }
}

} // namespace

void zrt::startBackend(zrt_comm *) {
  CommState &s = state();
  MPI_Op_create(sumOp<BF16>, /*commute=*/1, &s.sumBf16);
  MPI_Op_create(maxOp<BF16>, 1, &s.maxBf16);
  MPI_Op_create(sumOp<F16>, 1, &s.sumF16);
  MPI_Op_create(maxOp<F16>, 1, &s.maxF16);
}

void zrt::stopBackend(zrt_comm *) {
  CommState &s = state();
  for (MPI_Op *op : {&s.sumBf16, &s.maxBf16, &s.sumF16, &s.maxF16})
    MPI_Op_free(op);
}

extern "C" int64_t zrt_all_gather(zrt_comm *comm, int32_t dtype, const void *in,
                                  void *out, int64_t count) {
  int n = mpiCount(count, "zrt_all_gather");
  Typed t = typed(dtype, ZRT_SUM);
  const void *send = in;
  if (in == static_cast<char *>(out) + comm->rank * count * t.elemSize)
    send = MPI_IN_PLACE;
  MPI_Request request;
  MPI_Iallgather(send, n, t.type, out, n, t.type, comm->comm, &request);
  return track(request);
}

extern "C" int64_t zrt_reduce_scatter(zrt_comm *comm, int32_t dtype,
                                      const void *in, void *out,
                                      int64_t count) {
  int n = mpiCount(count, "zrt_reduce_scatter");
  mpiCount(count * comm->size, "zrt_reduce_scatter");
  Typed t = typed(dtype, ZRT_SUM);
  const char *lo = static_cast<const char *>(in);
  const char *o = static_cast<const char *>(out);
  if (o + count * t.elemSize > lo && o < lo + comm->size * count * t.elemSize)
    fatal("zrt_reduce_scatter: the output overlaps the input");
  MPI_Request request;
  MPI_Ireduce_scatter_block(in, out, n, t.type, t.op, comm->comm, &request);
  return track(request);
}

extern "C" int64_t zrt_reduce(zrt_comm *comm, int32_t dtype, const void *in,
                              void *out, int64_t count, int32_t root) {
  int n = mpiCount(count, "zrt_reduce");
  checkRoot(comm, root, "zrt_reduce");
  Typed t = typed(dtype, ZRT_SUM);
  const void *send = comm->rank == root && in == out ? MPI_IN_PLACE : in;
  MPI_Request request;
  MPI_Ireduce(send, out, n, t.type, t.op, root, comm->comm, &request);
  return track(request);
}

extern "C" int64_t zrt_all_reduce(zrt_comm *comm, int32_t dtype, int32_t op,
                                  const void *in, void *out, int64_t count) {
  int n = mpiCount(count, "zrt_all_reduce");
  Typed t = typed(dtype, op);
  const void *send = in == out ? MPI_IN_PLACE : in;
  MPI_Request request;
  MPI_Iallreduce(send, out, n, t.type, t.op, comm->comm, &request);
  return track(request);
}

extern "C" void zrt_wait(int64_t token) {
  CommState &s = state();
  MPI_Request request = s.tokens.handle(token);
  waitRequest(&request);
  s.tokens.finish(token);
}

extern "C" void zrt_wait_all(void) { state().tokens.waitAll(zrt_wait); }

extern "C" void zrt_progress(void) {
  // MPI_Test completes what it can; a completed request becomes
  // MPI_REQUEST_NULL, which the token's zrt_wait then returns at once.
  state().tokens.forEachLive([](MPI_Request &request) {
    if (request != MPI_REQUEST_NULL) {
      int done;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
  });
}

//===----------------------------------------------------------------------===//
// The communicator interface (Collectives.h)
//===----------------------------------------------------------------------===//

Tokens zrt::reduceScatterInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                                 const std::vector<int> &counts,
                                 const std::vector<int> &displs,
                                 int64_t &sumAt) {
  checkPerRank(comm, counts, displs, "reduceScatterInPlace");
  Typed t = typed(dtype, ZRT_SUM);
  MPI_Request request;
  MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts.data(), t.type, t.op,
                      comm->comm, &request);
  sumAt = 0;
  return {track(request)};
}

Tokens zrt::reduceToOwners(zrt_comm *comm, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs) {
  checkPerRank(comm, counts, displs, "reduceToOwners");
  int64_t elemSize = typed(dtype, ZRT_SUM).elemSize;
  Tokens tokens;
  for (int r = 0; r < comm->size; ++r)
    if (counts[size_t(r)] > 0) {
      char *slice = static_cast<char *>(buf) + displs[size_t(r)] * elemSize;
      tokens.push_back(
          zrt_reduce(comm, dtype, slice, slice, counts[size_t(r)], r));
    }
  return tokens;
}

Tokens zrt::allGatherInPlace(zrt_comm *comm, int32_t dtype, void *buf,
                             const std::vector<int> &counts,
                             const std::vector<int> &displs) {
  checkPerRank(comm, counts, displs, "allGatherInPlace");
  Typed t = typed(dtype, ZRT_SUM);
  MPI_Request request;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(),
                  displs.data(), t.type, comm->comm, &request);
  return {track(request)};
}

Tokens zrt::allReduceStats(zrt_comm *comm, const float *in, float *out) {
  int64_t flag = zrt_all_reduce(comm, ZRT_F32, ZRT_MAX, in, out, 1);
  int64_t norm = zrt_all_reduce(comm, ZRT_F32, ZRT_SUM, in + 1, out + 1, 1);
  return {flag, norm};
}

//===----------------------------------------------------------------------===//
// Two levels (Groups.h)
//===----------------------------------------------------------------------===//
//
// A level that another follows is waited for before the next starts, here,
// so that every member issues each level's calls at the same point of its
// program and in the same order on each communicator; the last level's
// requests become the tokens.

void zrt::startGroupBackend(zrt_comm *, zrt_comm *) {}
void zrt::stopGroupBackend(zrt_comm *) {}

namespace {

char *segment(void *buf, int displ, int64_t elemSize) {
  return static_cast<char *>(buf) + int64_t(displ) * elemSize;
}

void waitAll(std::vector<MPI_Request> &requests) {
  for (MPI_Request &r : requests)
    waitRequest(&r);
  requests.clear();
}

} // namespace

Tokens zrt::twoLevelAllGather(Group &g, int32_t dtype, const void *in,
                              void *buf, const std::vector<int> &counts,
                              const std::vector<int> &displs) {
  Typed t = typed(dtype, ZRT_SUM);
  int q = int(g.membersPerNode), nodes = g.nodes(), l = g.localIndex();
  // Across nodes: the segments of this member's local index.
  std::vector<int> crossCounts, crossDispls;
  for (int b = 0; b < nodes; ++b) {
    crossCounts.push_back(counts[size_t(b * q + l)]);
    crossDispls.push_back(displs[size_t(b * q + l)]);
  }
  const void *send = MPI_IN_PLACE;
  int sendCount = 0;
  if (in && in != segment(buf, displs[size_t(g.me)], t.elemSize)) {
    send = in;
    sendCount = counts[size_t(g.me)];
  }
  MPI_Request request;
  MPI_Iallgatherv(send, sendCount, t.type, buf, crossCounts.data(),
                  crossDispls.data(), t.type, g.cross->comm, &request);
  waitRequest(&request);
  // Within the node: each node's consecutive block of segments, every
  // member contributing what it gathered across nodes.
  Tokens tokens;
  for (int b = 0; b < nodes; ++b) {
    std::vector<int> blockCounts(counts.begin() + b * q,
                                 counts.begin() + (b + 1) * q);
    std::vector<int> blockDispls(displs.begin() + b * q,
                                 displs.begin() + (b + 1) * q);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, blockCounts.data(),
                    blockDispls.data(), t.type, g.node->comm, &request);
    tokens.push_back(track(request));
  }
  return tokens;
}

Tokens zrt::twoLevelReduce(Group &g, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs,
                           const std::vector<int32_t> &ops) {
  int q = int(g.membersPerNode), nodes = g.nodes(), l = g.localIndex();
  int myNode = g.me / q;
  // Within each node: segment m to the member of local index m % q.
  std::vector<MPI_Request> requests;
  for (int m = 0; m < g.size(); ++m) {
    if (counts[size_t(m)] == 0)
      continue;
    Typed t = typed(dtype, ops[size_t(m)]);
    char *seg = segment(buf, displs[size_t(m)], t.elemSize);
    int root = m % q;
    MPI_Request request;
    MPI_Ireduce(l == root ? MPI_IN_PLACE : seg, seg, counts[size_t(m)], t.type,
                t.op, root, g.node->comm, &request);
    requests.push_back(request);
  }
  waitAll(requests);
  // Across nodes: the node sums of this local index's segments, each to
  // its member's node.
  Tokens tokens;
  for (int b = 0; b < nodes; ++b) {
    int m = b * q + l;
    if (counts[size_t(m)] == 0)
      continue;
    Typed t = typed(dtype, ops[size_t(m)]);
    char *seg = segment(buf, displs[size_t(m)], t.elemSize);
    MPI_Request request;
    MPI_Ireduce(b == myNode ? MPI_IN_PLACE : seg, seg, counts[size_t(m)],
                t.type, t.op, b, g.cross->comm, &request);
    tokens.push_back(track(request));
  }
  return tokens;
}

Tokens zrt::twoLevelAllReduce(Group &g, int32_t dtype, const void *in,
                              void *out, const std::vector<int> &counts,
                              const std::vector<int> &displs,
                              const std::vector<int32_t> &ops) {
  if (in != out) {
    int64_t total = 0;
    for (int c : counts)
      total += c;
    std::memcpy(out, in, size_t(total * typed(dtype, ZRT_SUM).elemSize));
  }
  for (int64_t token : twoLevelReduce(g, dtype, out, counts, displs, ops))
    zrt_wait(token);
  return twoLevelAllGather(g, dtype, nullptr, out, counts, displs);
}
