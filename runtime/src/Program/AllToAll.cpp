//===- AllToAll.cpp - The all-to-all of sequence parallelism --------------===//
//
// Part of the zero-mlir project.
//
// zrt_ctx_all_to_all and zrt_all_to_all: P chunks of a tensor's view to the
// P members of a group and back, packed and unpacked through staging.
//
//===----------------------------------------------------------------------===//

#include "Program/Calls.h"

#include <functional>
#include <vector>

using namespace zrt;
using namespace zrt::program;

namespace {
/// Moves the P chunks of an (outer, P, inner) view of `view` to or from P
/// contiguous chunks of outer * inner elements at `chunks`.
void moveChunks(char *view, char *chunks, int64_t outer, int64_t p,
                int64_t inner, int64_t es, bool pack) {
  int64_t row = inner * es;
  for (int64_t j = 0; j < p; ++j)
    for (int64_t o = 0; o < outer; ++o) {
      char *v = view + (o * p + j) * row;
      char *c = chunks + (j * outer + o) * row;
      if (pack)
        device::move(c, v, row);
      else
        device::move(v, c, row);
    }
}

/// Where an all-to-all sends from and receives into (zrt_ctx_all_to_all's
/// views and staging), and the unpack that completes it.
struct AllToAllPlan {
  const char *send;
  char *recv;
  int64_t chunkBytes;
  std::function<void()> unpack;
};

AllToAllPlan planAllToAll(const char *call, int p, int32_t dtype,
                          const void *in, void *out, void *staging,
                          int64_t splitOuter, int64_t splitInner,
                          int64_t concatOuter, int64_t concatInner) {
  if (splitOuter < 1 || splitInner < 0 || concatOuter < 1 || concatInner < 0 ||
      splitOuter * splitInner != concatOuter * concatInner)
    fatal("%s: views (%lld, %d, %lld) and (%lld, %d, %lld) differ in size",
          call, (long long)splitOuter, p, (long long)splitInner,
          (long long)concatOuter, p, (long long)concatInner);
  int64_t es = zrt_dtype_size(dtype);
  AllToAllPlan plan;
  plan.chunkBytes = splitOuter * splitInner * es;
  char *st = static_cast<char *>(staging);
  plan.send = static_cast<const char *>(in);
  if (splitOuter > 1) {
    moveChunks(const_cast<char *>(plan.send), st, splitOuter, p, splitInner, es,
               /*pack=*/true);
    plan.send = st;
    st += plan.chunkBytes * p;
  }
  plan.recv = static_cast<char *>(out);
  if (concatOuter > 1) {
    plan.recv = st;
    char *to = static_cast<char *>(out);
    plan.unpack = [to, st, concatOuter, p, concatInner, es] {
      moveChunks(to, st, concatOuter, p, concatInner, es, /*pack=*/false);
    };
  }
  return plan;
}
} // namespace

void program::allToAllTensor(zrt_ctx *ctx, int32_t ranks, int32_t dtype,
                             const void *in, void *out, void *staging,
                             int64_t splitOuter, int64_t splitInner,
                             int64_t concatOuter, int64_t concatInner,
                             int32_t slot) {
  Group &group = groupOf(ctx->comm, ranks);
  AllToAllPlan plan =
      planAllToAll("zrt_ctx_all_to_all", group.size(), dtype, in, out, staging,
                   splitOuter, splitInner, concatOuter, concatInner);
  const char *what = "all_to_all";
  int64_t seq =
      record(ctx, what, kAllToAll, group, plan.chunkBytes * group.size());
  launch(ctx, slot, what,
         allToAll(group, kAllToAll, plan.send, plan.recv, plan.chunkBytes),
         plan.unpack, seq);
}

extern "C" void zrt_all_to_all(zrt_comm *comm, int32_t dtype, const void *in,
                               void *out, void *staging, int64_t splitOuter,
                               int64_t splitInner, int64_t concatOuter,
                               int64_t concatInner) {
  int p = comm->size;
  AllToAllPlan plan =
      planAllToAll("zrt_all_to_all", p, dtype, in, out, staging, splitOuter,
                   splitInner, concatOuter, concatInner);
  std::vector<int64_t> counts(size_t(p), plan.chunkBytes), displs;
  for (int m = 0; m < p; ++m)
    displs.push_back(int64_t(m) * plan.chunkBytes);
  for (int64_t t : allToAllBytes(comm, plan.send, counts, displs, plan.recv,
                                 counts, displs))
    zrt_wait(t);
  if (plan.unpack)
    plan.unpack();
}
