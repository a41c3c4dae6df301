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

#include "Collectives/Collectives.h"
#include "Collectives/CommDirect.h"
#include "Collectives/Groups.h"
#include "Collectives/Tokens.h"
#include "Kernels/Kernels.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <sched.h>
#include <time.h>

using namespace zrt;

/// The MPI backend's part of a communicator: whether its members reduce
/// directly (CommDirect.h).
struct zrt::CommBackend {
  std::unique_ptr<DirectPeers> direct;
};

namespace {

/// A two-level collective (Groups.h) whose later levels start once the
/// requests of the level before have completed.
struct Chain {
  /// The requests of the level in flight.
  std::vector<MPI_Request> requests;
  /// The levels not started yet, each appending its requests.
  std::vector<std::function<void(std::vector<MPI_Request> &)>> levels;
  size_t next = 0;
  bool started() const { return next == levels.size(); }
};

/// A token's operation: one request, a chain of levels, or a direct
/// reduce-scatter.
struct Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  std::shared_ptr<Chain> chain;
  std::shared_ptr<DirectReduceScatter> direct;
};

struct CommState {
  MPI_Op sumBf16 = MPI_OP_NULL, maxBf16 = MPI_OP_NULL;
  MPI_Op sumF16 = MPI_OP_NULL, maxF16 = MPI_OP_NULL;
  TokenTable<Pending> tokens;
  /// The chains with levels still to start, in the order they were issued:
  /// only the first may start its next level, so that every member starts
  /// the later levels in the same order on their communicators.
  std::deque<std::shared_ptr<Chain>> unstarted;
  /// The direct reduce-scatters not known to be complete, in issue order:
  /// every wait advances them all, since a peer may be waiting for this
  /// rank to read its buffer.
  std::vector<std::shared_ptr<DirectReduceScatter>> directs;
  /// zrt_progress's request list and completed indices, kept to reuse
  /// their memory.
  std::vector<MPI_Request> progressRequests;
  std::vector<int> progressDone;
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
/// The sums of the direct reduce-scatter, as the MPI ops compute them.
void sumF32(const void *in, void *inout, int64_t len) {
  const float *a = static_cast<const float *>(in);
  float *b = static_cast<float *>(inout);
#pragma omp simd
  for (int64_t i = 0; i < len; ++i)
    b[i] = a[i] + b[i];
}
template <typename T>
void sumHalf(const void *in, void *inout, int64_t len) {
  combine<Add>(static_cast<const T *>(in), static_cast<T *>(inout), len);
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
  return state().tokens.start([&](Pending &slot, bool) {
    slot.request = request;
    slot.chain.reset();
    slot.direct.reset();
  });
}

/// Registers a direct reduce-scatter and returns its token.
int64_t trackDirect(std::shared_ptr<DirectReduceScatter> op) {
  state().directs.push_back(op);
  return state().tokens.start([&](Pending &slot, bool) {
    slot.request = MPI_REQUEST_NULL;
    slot.chain.reset();
    slot.direct = std::move(op);
  });
}

/// The direct path of `comm`, if its members may use it (CommDirect.h).
DirectPeers *directPeers(const zrt_comm *comm) {
  return comm->backend ? comm->backend->direct.get() : nullptr;
}

CombineFn directSum(int32_t dtype) {
  return dtype == ZRT_F32    ? sumF32
         : dtype == ZRT_BF16 ? sumHalf<BF16>
                             : sumHalf<F16>;
}

/// Advances every direct reduce-scatter in flight, in issue order, and
/// forgets the complete ones; never blocks.
void advanceDirects() {
  auto &ops = state().directs;
  ops.erase(std::remove_if(ops.begin(), ops.end(),
                           [](const auto &op) { return op->advance(); }),
            ops.end());
}

/// Whether every request completed (MPI_Testall, which frees them).
bool testAll(std::vector<MPI_Request> &requests) {
  int done = 1;
  if (!requests.empty())
    MPI_Testall(int(requests.size()), requests.data(), &done,
                MPI_STATUSES_IGNORE);
  return done;
}

/// Starts the next levels of the chains, in issue order, as far as their
/// previous levels have completed; never blocks.
void advanceChains() {
  CommState &s = state();
  while (!s.unstarted.empty()) {
    Chain &c = *s.unstarted.front();
    if (!testAll(c.requests))
      return;
    c.requests.clear();
    c.levels[c.next++](c.requests);
    if (c.started())
      s.unstarted.pop_front();
  }
}

/// Registers a two-level collective whose first level is in `requests`
/// and returns its token.
int64_t trackChain(
    std::vector<MPI_Request> requests,
    std::vector<std::function<void(std::vector<MPI_Request> &)>> levels) {
  auto chain = std::make_shared<Chain>();
  chain->requests = std::move(requests);
  chain->levels = std::move(levels);
  if (!chain->started())
    state().unstarted.push_back(chain);
  return state().tokens.start([&](Pending &slot, bool) {
    slot.request = MPI_REQUEST_NULL;
    slot.chain = chain;
    slot.direct.reset();
  });
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
template <typename Done>
void waitUntil(Done &&done, MPI_Request *request);

void waitRequest(MPI_Request *request) {
  waitUntil(
      [&] {
        int done = 0;
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
        return done != 0;
      },
      request);
}

/// Waits until done() (which tests requests) holds, by the ZRT_WAIT policy;
/// `request`, when not null, is what MPI_Wait may block on instead. While
/// two-level collectives have levels to start, or direct reduce-scatters
/// are in flight, every test also advances them: a peer may be waiting for
/// them.
template <typename Done>
void waitUntil(Done &&isDone, MPI_Request *request) {
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
  CommState &s = state();
  if (policy == 0 && request && s.unstarted.empty() && s.directs.empty()) {
    MPI_Wait(request, MPI_STATUS_IGNORE);
    return;
  }
  double start = MPI_Wtime();
  for (;;) {
    if (!s.unstarted.empty())
      advanceChains();
    if (!s.directs.empty())
      advanceDirects();
    if (isDone())
      return;
    if (policy == 0)
      continue;
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

bool zrt::readsPeersDirectly(const zrt_comm *comm) {
  return directPeers(comm) != nullptr;
}

std::string zrt::selectCollectives(const std::string &kind) {
  if (kind.empty() || kind == "host")
    return "";
  if (kind == "nccl")
    return "collectives 'nccl' need a program compiled with --target cuda; "
           "this one (--target cpu) moves tensors with MPI over host memory "
           "(host)";
  return "collectives '" + kind +
         "': expected host (or nccl with --target "
         "cuda)";
}

void zrt::startBackend(zrt_comm *world) {
  world->backend = new CommBackend{DirectPeers::probe(world->comm)};
  CommState &s = state();
  MPI_Op_create(sumOp<BF16>, /*commute=*/1, &s.sumBf16);
  MPI_Op_create(maxOp<BF16>, 1, &s.maxBf16);
  MPI_Op_create(sumOp<F16>, 1, &s.sumF16);
  MPI_Op_create(maxOp<F16>, 1, &s.maxF16);
}

void zrt::stopBackend(zrt_comm *world) {
  CommState &s = state();
  for (MPI_Op *op : {&s.sumBf16, &s.maxBf16, &s.sumF16, &s.maxF16})
    MPI_Op_free(op);
  delete world->backend;
  world->backend = nullptr;
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
  Pending pending = s.tokens.handle(token);
  if (Chain *chain = pending.chain.get())
    // Its levels start in turn, earlier chains' first.
    waitUntil([&] { return chain->started() && testAll(chain->requests); },
              nullptr);
  else if (DirectReduceScatter *op = pending.direct.get())
    waitUntil([&] { return op->advance(); }, nullptr);
  else
    waitRequest(&pending.request);
  s.tokens.finish(token);
}

extern "C" void zrt_wait_all(void) { state().tokens.waitAll(zrt_wait); }

extern "C" void zrt_progress(void) {
  // One MPI_Testsome over the live requests: Open MPI runs its progress
  // loop once per test of an incomplete request, and once is enough. A
  // completed request becomes MPI_REQUEST_NULL, which the token's zrt_wait
  // then returns at once.
  CommState &s = state();
  std::vector<MPI_Request> &requests = s.progressRequests;
  requests.clear();
  s.tokens.forEachLive([&](Pending &pending) {
    if (pending.request != MPI_REQUEST_NULL)
      requests.push_back(pending.request);
  });
  if (!requests.empty()) {
    s.progressDone.resize(requests.size());
    int completed;
    MPI_Testsome(int(requests.size()), requests.data(), &completed,
                 s.progressDone.data(), MPI_STATUSES_IGNORE);
    if (completed > 0 && completed != MPI_UNDEFINED) {
      size_t i = 0;
      s.tokens.forEachLive([&](Pending &pending) {
        if (pending.request != MPI_REQUEST_NULL)
          pending.request = requests[i++];
      });
    }
  }
  advanceChains();
  advanceDirects();
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
  int64_t total = 0;
  for (int c : counts)
    total += c;
  if (DirectPeers *direct = directPeers(comm); direct && total > 0) {
    sumAt = displs[size_t(comm->rank)];
    return {trackDirect(std::make_shared<DirectReduceScatter>(
        *direct, std::vector<BufferPiece>{{0, total, buf}}, t.elemSize,
        directSum(dtype), counts, displs,
        static_cast<char *>(buf) + sumAt * t.elemSize, false))};
  }
  MPI_Request request;
  MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts.data(), t.type, t.op,
                      comm->comm, &request);
  sumAt = 0;
  return {track(request)};
}

bool zrt::reduceScatterAddPieces(zrt_comm *comm, int32_t dtype,
                                 const std::vector<BufferPiece> &pieces,
                                 const std::vector<int> &counts,
                                 const std::vector<int> &displs, void *acc,
                                 Tokens &tokens) {
  checkPerRank(comm, counts, displs, "reduceScatterAddPieces");
  DirectPeers *direct = directPeers(comm);
  if (!direct || pieces.empty())
    return false;
  tokens = {trackDirect(std::make_shared<DirectReduceScatter>(
      *direct, pieces, typed(dtype, ZRT_SUM).elemSize, directSum(dtype), counts,
      displs, acc, true))};
  return true;
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
// The first level starts in the call, on g.node or g.cross; the later ones
// start once the level before has completed, when a wait or zrt_progress
// gets to them (advanceChains), on g.nodeLate and g.crossLate. Every member
// starts first levels in program order and later levels in the order of
// their collectives, so each communicator sees its calls in one order on
// all its members. A collective's token is its chain.

Tokens zrt::allToAllBytes(zrt_comm *comm, const void *send,
                          const std::vector<int64_t> &sendCounts,
                          const std::vector<int64_t> &sendDispls, void *recv,
                          const std::vector<int64_t> &recvCounts,
                          const std::vector<int64_t> &recvDispls) {
  const char *call = "allToAllBytes";
  checkAllToAllCounts(call, comm->size, sendCounts, sendDispls, recvCounts,
                      recvDispls);
  std::vector<int> sc, sd, rc, rd;
  for (int r = 0; r < comm->size; ++r) {
    sc.push_back(mpiCount(sendCounts[size_t(r)], call));
    sd.push_back(mpiCount(sendDispls[size_t(r)], call));
    rc.push_back(mpiCount(recvCounts[size_t(r)], call));
    rd.push_back(mpiCount(recvDispls[size_t(r)], call));
  }
  MPI_Request request;
  MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(),
                 rd.data(), MPI_BYTE, comm->comm, &request);
  return {track(request)};
}

void zrt::startGroupBackend(zrt_comm *, zrt_comm *comm, int, int) {
  comm->backend = new CommBackend{DirectPeers::probe(comm->comm)};
}
void zrt::stopGroupBackend(zrt_comm *comm) {
  delete comm->backend;
  comm->backend = nullptr;
}

namespace {

using Level = std::function<void(std::vector<MPI_Request> &)>;

char *segment(void *buf, int displ, int64_t elemSize) {
  return static_cast<char *>(buf) + int64_t(displ) * elemSize;
}

/// Across nodes, over `comm` (a cross communicator): the segments of this
/// member's local index; `in`, unless null, is this member's.
void gatherAcross(const Group &g, MPI_Comm comm, int32_t dtype, const void *in,
                  void *buf, const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  std::vector<MPI_Request> &requests) {
  Typed t = typed(dtype, ZRT_SUM);
  int q = int(g.membersPerNode), l = g.localIndex();
  std::vector<int> crossCounts, crossDispls;
  for (int b = 0; b < g.nodes(); ++b) {
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
                  crossDispls.data(), t.type, comm, &request);
  requests.push_back(request);
}

/// Within the node, over `comm`: each node's consecutive block of segments,
/// every member contributing what it gathered across nodes.
void gatherWithin(const Group &g, MPI_Comm comm, int32_t dtype, void *buf,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  std::vector<MPI_Request> &requests) {
  Typed t = typed(dtype, ZRT_SUM);
  int q = int(g.membersPerNode);
  for (int b = 0; b < g.nodes(); ++b) {
    std::vector<int> blockCounts(counts.begin() + b * q,
                                 counts.begin() + (b + 1) * q);
    std::vector<int> blockDispls(displs.begin() + b * q,
                                 displs.begin() + (b + 1) * q);
    MPI_Request request;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, blockCounts.data(),
                    blockDispls.data(), t.type, comm, &request);
    requests.push_back(request);
  }
}

/// Starts the in-place reduce of segment m to `root` of `comm`.
void reduceSegment(int32_t dtype, void *buf, const std::vector<int> &counts,
                   const std::vector<int> &displs,
                   const std::vector<int32_t> &ops, int m, int root,
                   bool atRoot, MPI_Comm comm,
                   std::vector<MPI_Request> &requests) {
  if (counts[size_t(m)] == 0)
    return;
  Typed t = typed(dtype, ops[size_t(m)]);
  char *seg = segment(buf, displs[size_t(m)], t.elemSize);
  MPI_Request request;
  MPI_Ireduce(atRoot ? MPI_IN_PLACE : seg, seg, counts[size_t(m)], t.type, t.op,
              root, comm, &request);
  requests.push_back(request);
}

/// Within each node, over `comm`: segment m to the member of local index
/// m % q, reduced by ops[m].
void reduceWithin(const Group &g, MPI_Comm comm, int32_t dtype, void *buf,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  const std::vector<int32_t> &ops,
                  std::vector<MPI_Request> &requests) {
  int q = int(g.membersPerNode);
  for (int m = 0; m < g.size(); ++m)
    reduceSegment(dtype, buf, counts, displs, ops, m, m % q,
                  g.localIndex() == m % q, comm, requests);
}

/// Across nodes, over `comm`: the node sums of this local index's segments,
/// each to its member's node.
void reduceAcross(const Group &g, MPI_Comm comm, int32_t dtype, void *buf,
                  const std::vector<int> &counts,
                  const std::vector<int> &displs,
                  const std::vector<int32_t> &ops,
                  std::vector<MPI_Request> &requests) {
  int q = int(g.membersPerNode);
  for (int b = 0; b < g.nodes(); ++b)
    reduceSegment(dtype, buf, counts, displs, ops, b * q + g.localIndex(), b,
                  b == g.me / q, comm, requests);
}

} // namespace

Tokens zrt::twoLevelAllGather(Group &g, int32_t dtype, const void *in,
                              void *buf, const std::vector<int> &counts,
                              const std::vector<int> &displs) {
  std::vector<MPI_Request> first;
  gatherAcross(g, g.cross->comm, dtype, in, buf, counts, displs, first);
  const Group *group = &g;
  Level within = [=](std::vector<MPI_Request> &requests) {
    gatherWithin(*group, group->nodeLate->comm, dtype, buf, counts, displs,
                 requests);
  };
  return {trackChain(std::move(first), {within})};
}

Tokens zrt::twoLevelReduce(Group &g, int32_t dtype, void *buf,
                           const std::vector<int> &counts,
                           const std::vector<int> &displs,
                           const std::vector<int32_t> &ops) {
  std::vector<MPI_Request> first;
  reduceWithin(g, g.node->comm, dtype, buf, counts, displs, ops, first);
  const Group *group = &g;
  Level across = [=](std::vector<MPI_Request> &requests) {
    reduceAcross(*group, group->crossLate->comm, dtype, buf, counts, displs,
                 ops, requests);
  };
  return {trackChain(std::move(first), {across})};
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
  std::vector<MPI_Request> first;
  reduceWithin(g, g.node->comm, dtype, out, counts, displs, ops, first);
  const Group *group = &g;
  Level reduce = [=](std::vector<MPI_Request> &requests) {
    reduceAcross(*group, group->crossLate->comm, dtype, out, counts, displs,
                 ops, requests);
  };
  Level gather = [=](std::vector<MPI_Request> &requests) {
    gatherAcross(*group, group->crossLate->comm, dtype, nullptr, out, counts,
                 displs, requests);
  };
  Level within = [=](std::vector<MPI_Request> &requests) {
    gatherWithin(*group, group->nodeLate->comm, dtype, out, counts, displs,
                 requests);
  };
  return {trackChain(std::move(first), {reduce, gather, within})};
}
