//===- State.cpp - Model state outside the step functions -----------------===//
//
// Part of the zero-mlir project.
//
// The 16-bit params are always the cast of the fp32 masters (initialization
// writes both, Adam writes the copy even for skipped steps): whoever restores
// masters restores the params with castOwnedParams. A frozen partition has
// no masters: its 16-bit params are rounded once from the fp32 initial
// values and read back widened, which is exact.
//
//===----------------------------------------------------------------------===//

#include "Driver/State.h"
#include "Device/Device.h"
#include "Optimizer/Nvme.h"
#include "Support/Support.h"
#include "Support/Types.h"

#include <mpi.h>

#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

using namespace zrt;

//===----------------------------------------------------------------------===//
// Buffers wherever they live
//===----------------------------------------------------------------------===//

void zrt::zeroBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  if (!part.hasBuffer(kind))
    return;
  int64_t bytes = ctx.manifest->bufferBytes(part, kind);
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->zero(part.offsets[kind], bytes,
                               ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memset(ctx.buffer(p, kind), 0, size_t(bytes));
  else
    device::zero(ctx.buffer(p, kind), bytes);
}

void zrt::storeBuffer(zrt_ctx &ctx, int32_t p, BufferKind kind, void *at,
                      const void *src, int64_t bytes) {
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->write(
        ctx.manifest->partitions[size_t(p)].offsets[kind], src, bytes,
        ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memcpy(at, src, size_t(bytes));
  else
    device::upload(at, src, bytes);
}

void zrt::loadBuffer(const zrt_ctx &ctx, int32_t p, BufferKind kind, void *dst,
                     const void *at, int64_t bytes) {
  if (ctx.onNvme(p, kind))
    ctx.swapFileOf(kind)->read(
        ctx.manifest->partitions[size_t(p)].offsets[kind], dst, bytes,
        ctx.swapBufferOf(kind), ctx.swapBytesOf(kind));
  else if (ctx.onHost(p, kind))
    std::memcpy(dst, at, size_t(bytes));
  else
    device::download(dst, at, bytes);
}

void zrt::castOwnedParams(zrt_ctx &ctx, int32_t p) {
  const Manifest &m = *ctx.manifest;
  const PartitionInfo &part = m.partitions[size_t(p)];
  if (part.paramsAreMasters || part.frozen)
    return;
  int64_t n = m.owned(part, ctx.rank).size();
  if (part.paramsOffloaded()) {
    // The shard is in host memory or the parameter swap file: cast on the
    // host, from the masters wherever they are (host or swap file with an
    // offloaded optimizer, device otherwise), and store it there.
    std::vector<float> master(static_cast<size_t>(n), 0.0f);
    loadBuffer(ctx, p, kMaster, master.data(), ctx.buffer<float>(p, kMaster),
               n * 4);
    std::vector<char> cast;
    char *params = ctx.buffer(p, kParams);
    if (!params) {
      cast.resize(size_t(n * part.computeBytes));
      params = cast.data();
    }
    dispatchFloat(part.computeDtype, [&](auto tag) {
      fromFloat(master.data(), reinterpret_cast<decltype(tag) *>(params), n);
    });
    if (!cast.empty())
      storeBuffer(ctx, p, kParams, nullptr, params, n * part.computeBytes);
    return;
  }
  if (part.onNvme[kMaster]) {
    // The masters are in the swap file: read them through the swap
    // buffers a chunk at a time, cast into the host parameter copy, and
    // upload that.
    char *copy = ctx.buffer(p, kHostParams);
    int64_t chunk = ctx.swapBytes / 4;
    float *bounce = reinterpret_cast<float *>(ctx.swap);
    for (int64_t at = 0; at < n; at += chunk) {
      int64_t len = std::min(chunk, n - at);
      ctx.nvme->read(part.offsets[kMaster] + at * 4, bounce, len * 4, ctx.swap,
                     ctx.swapBytes);
      dispatchFloat(part.computeDtype, [&](auto tag) {
        fromFloat(bounce, reinterpret_cast<decltype(tag) *>(copy) + at, len);
      });
    }
    device::upload(ownedParams(ctx, p), copy, n * part.computeBytes);
    return;
  }
  if (part.offloaded()) {
    // The masters are on the host: cast there (into the parameter copy the
    // host Adam writes) and upload.
    const float *master = ctx.buffer<float>(p, kMaster);
    if (part.computeDtype == ZRT_F32) {
      device::upload(ownedParams(ctx, p), master, n * 4);
      return;
    }
    char *copy = ctx.buffer(p, kHostParams);
    dispatchFloat(part.computeDtype, [&](auto tag) {
      fromFloat(master, reinterpret_cast<decltype(tag) *>(copy), n);
    });
    device::upload(ownedParams(ctx, p), copy, n * part.computeBytes);
    return;
  }
  zrt_cast(ZRT_F32, ctx.buffer<float>(p, kMaster), part.computeDtype,
           ownedParams(ctx, p), n);
}

BufferKind zrt::masterKind(const zrt_ctx &ctx, int32_t p) {
  return ctx.manifest->partitions[size_t(p)].paramsAreMasters ? kParams
                                                              : kMaster;
}

void zrt::loadOwnedMasters(const zrt_ctx &ctx, int32_t p, float *dst) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  int64_t n = ctx.manifest->owned(part, ctx.rank).size();
  if ((!part.frozen || part.paramsAreMasters) && !part.masters16()) {
    loadBuffer(ctx, p, masterKind(ctx, p), dst, ownedMasters(ctx, p), n * 4);
    return;
  }
  std::vector<char> params(size_t(n * part.computeBytes));
  loadBuffer(ctx, p, kParams, params.data(), ownedParams(ctx, p),
             n * part.computeBytes);
  dispatchFloat(part.computeDtype, [&](auto tag) {
    toFloat(reinterpret_cast<const decltype(tag) *>(params.data()), dst, n);
  });
}

void zrt::loadOwnedMasterRange(const zrt_ctx &ctx, int32_t p, int64_t begin,
                               int64_t count, float *dst) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  int64_t n = ctx.manifest->owned(part, ctx.rank).size();
  if (begin < 0 || count < 0 || begin + count > n)
    throw std::runtime_error("owned range [" + std::to_string(begin) + ", " +
                             std::to_string(begin + count) + ") outside the " +
                             std::to_string(n) + " elements of partition '" +
                             part.name + "'");
  bool masters = (!part.frozen || part.paramsAreMasters) && !part.masters16();
  BufferKind kind = masters ? masterKind(ctx, p) : kParams;
  if (ctx.onNvme(p, kind)) {
    // The swap file reads whole buffers.
    std::vector<float> all(static_cast<size_t>(n));
    loadOwnedMasters(ctx, p, all.data());
    std::memcpy(dst, all.data() + begin, size_t(count) * 4);
    return;
  }
  if (masters) {
    loadBuffer(ctx, p, kind, dst, ownedMasters(ctx, p) + begin, count * 4);
    return;
  }
  std::vector<char> params(size_t(count * part.computeBytes));
  loadBuffer(ctx, p, kParams, params.data(),
             static_cast<const char *>(ownedParams(ctx, p)) +
                 begin * part.computeBytes,
             count * part.computeBytes);
  dispatchFloat(part.computeDtype, [&](auto tag) {
    toFloat(reinterpret_cast<const decltype(tag) *>(params.data()), dst, count);
  });
}

void zrt::storeOwnedMasters(zrt_ctx &ctx, int32_t p, const float *src) {
  const PartitionInfo &part = ctx.manifest->partitions[size_t(p)];
  int64_t n = ctx.manifest->owned(part, ctx.rank).size();
  if ((!part.frozen || part.paramsAreMasters) && !part.masters16()) {
    storeBuffer(ctx, p, masterKind(ctx, p), ownedMasters(ctx, p), src, n * 4);
    return;
  }
  std::vector<char> params(size_t(n * part.computeBytes));
  dispatchFloat(part.computeDtype, [&](auto tag) {
    fromFloat(src, reinterpret_cast<decltype(tag) *>(params.data()), n);
  });
  storeBuffer(ctx, p, kParams, ownedParams(ctx, p), params.data(),
              n * part.computeBytes);
}

//===----------------------------------------------------------------------===//
// Initialization and export
//===----------------------------------------------------------------------===//

void zrt::initializeParameters(zrt_ctx &ctx, uint64_t seed,
                               WeightFiles *weights) {
  const Manifest &m = *ctx.manifest;
  for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p) {
    const PartitionInfo &part = m.partitions[size_t(p)];
    Range own = m.owned(part, ctx.rank);
    // Stages 0-2 hold every parameter's compute copy, stage 3 only a shard.
    Range need = m.stage <= 2 ? Range{0, part.numel} : own;
    std::vector<float> values(size_t(need.size()), 0.0f);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const ParamInfo &param = m.params[i];
      if (param.partition != p)
        continue;
      // Padding rows (after the first exportNumel elements) stay zero.
      int64_t lo = std::max(need.begin, param.offset);
      int64_t hi = std::min(need.end, param.offset + param.exportNumel());
      // An expert-parallel parameter is its expert set member's slice of
      // the whole tensor (experts in dimension 0, so one contiguous range
      // of it): the same values as that slice of the unsplit parameter.
      int64_t at = -param.offset;
      if (param.expertParallel > 1)
        at += m.expertMember(ctx.rank) * param.exportNumel();
      if (weights)
        weights->read(i, lo + at, hi + at, values.data() + (lo - need.begin));
      else
        for (int64_t e = lo; e < hi; ++e)
          values[size_t(e - need.begin)] =
              initValue(param, seed, i, uint64_t(e + at));
    }
    for (int kind = 0; kind < kNumBufferKinds; ++kind)
      zeroBuffer(ctx, p, BufferKind(kind));
    // fp32 params are their own masters, written below; a frozen 16-bit
    // partition has none (its params are rounded once, below).
    if (part.hasBuffer(kMaster))
      storeBuffer(ctx, p, kMaster, ctx.buffer<float>(p, kMaster),
                  values.data() + (own.begin - need.begin),
                  own.size() * int64_t(sizeof(float)));
    if (part.paramsOffloaded()) {
      // In host memory, or cast there and written to the swap file.
      std::vector<char> cast;
      char *params = ctx.buffer(p, kParams);
      if (!params) {
        cast.resize(size_t(need.size() * part.computeBytes));
        params = cast.data();
      }
      dispatchFloat(part.computeDtype, [&](auto tag) {
        fromFloat(values.data(), reinterpret_cast<decltype(tag) *>(params),
                  need.size());
      });
      if (!cast.empty())
        storeBuffer(ctx, p, kParams, nullptr, params,
                    need.size() * part.computeBytes);
    } else {
      device::uploadCast(values.data(), part.computeDtype,
                         ctx.buffer(p, kParams), need.size());
    }
  }
}

std::vector<Tensor> zrt::gatherParameters(zrt_ctx &ctx) {
  const Manifest &m = *ctx.manifest;
  std::vector<std::vector<float>> layouts(m.partitions.size());
  // An expert partition's layout on each member q of an expert set (its
  // parameters' expert slices q), on rank 0.
  std::vector<std::vector<std::vector<float>>> expertLayouts(
      m.partitions.size());
  for (size_t p = 0; p < m.partitions.size(); ++p) {
    const PartitionInfo &part = m.partitions[p];
    std::vector<float> &full = layouts[p];
    if (part.expert && m.expertParallel > 1) {
      // Every rank's owned masters padded to a block; member q's layout is
      // the blocks of its expert replica set in order (its shards; at stage
      // 0 one member's whole partition).
      int64_t block = m.stage == 0 ? part.numel : part.shardNumel;
      if (block * ctx.world > std::numeric_limits<int>::max())
        fatal("export: expert partition '%s' exceeds MPI's int counts",
              part.name.c_str());
      std::vector<float> mine(size_t(block), 0.0f);
      loadOwnedMasters(ctx, int32_t(p), mine.data());
      std::vector<float> all;
      if (ctx.rank == 0)
        all.resize(size_t(block) * size_t(ctx.world));
      MPI_Gather(mine.data(), int(block), MPI_FLOAT, all.data(), int(block),
                 MPI_FLOAT, 0, MPI_COMM_WORLD);
      if (ctx.rank != 0)
        continue;
      int64_t ep = m.expertParallel,
              replicas = m.stage == 0 ? 1 : ctx.world / ep;
      zrt_mesh mesh = m.mesh();
      zrt_rank_set members = zrt_rank_set_of(ZRT_RANKS_EXPERT, 0, &mesh);
      for (int64_t q = 0; q < ep; ++q) {
        std::vector<float> layout;
        zrt_rank_set holders =
            m.expertReplicas(int(members.first + q * members.stride));
        for (int64_t j = 0; j < replicas; ++j) {
          const float *at =
              all.data() + (holders.first + j * holders.stride) * block;
          layout.insert(layout.end(), at, at + block);
        }
        expertLayouts[p].push_back(std::move(layout));
      }
      continue;
    }
    if (m.stage == 0) {
      if (ctx.rank == 0) {
        full.resize(size_t(part.numel));
        loadOwnedMasters(ctx, int32_t(p), full.data());
      }
      continue;
    }
    if (part.shardNumel > std::numeric_limits<int>::max())
      fatal("export: shard of %lld elements exceeds MPI's int counts",
            (long long)part.shardNumel);
    // Each rank's owned masters padded to a full shard.
    std::vector<float> shard(size_t(part.shardNumel), 0.0f);
    loadOwnedMasters(ctx, int32_t(p), shard.data());
    if (ctx.rank == 0)
      full.resize(size_t(part.shardNumel) * size_t(ctx.world));
    MPI_Gather(shard.data(), int(part.shardNumel), MPI_FLOAT, full.data(),
               int(part.shardNumel), MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  std::vector<Tensor> tensors;
  if (ctx.rank != 0)
    return tensors;
  for (const ParamInfo &param : m.params) {
    const auto &members = expertLayouts[size_t(param.partition)];
    if (!members.empty()) {
      // The whole tensor: every member's slice of experts in order.
      std::vector<int64_t> shape = param.exportShape();
      shape[0] *= int64_t(members.size());
      std::vector<float> values;
      for (const std::vector<float> &layout : members)
        values.insert(values.end(), layout.begin() + param.offset,
                      layout.begin() + param.offset + param.exportNumel());
      tensors.push_back({param.name, shape, std::move(values)});
      continue;
    }
    // Without its padding rows, which follow the rest. Their gradient is
    // exactly zero, so they must still hold the zeros they started with.
    const float *src = layouts[size_t(param.partition)].data() + param.offset;
    for (int64_t e = param.exportNumel(); e < param.numel; ++e)
      if (src[e] != 0.0f)
        fatal("export: padding row %lld of '%s' holds %g, not 0: its "
              "gradient was not masked",
              (long long)(e / (param.numel / param.shape[0])),
              param.name.c_str(), double(src[e]));
    tensors.push_back({param.name, param.exportShape(),
                       std::vector<float>(src, src + param.exportNumel())});
  }
  return tensors;
}

std::vector<Tensor> zrt::gatherParameterList(zrt_ctx &ctx,
                                             const std::vector<int32_t> &list,
                                             int root) {
  const Manifest &m = *ctx.manifest;
  bool receives = root < 0 || ctx.rank == root;
  std::vector<Tensor> tensors;
  for (int32_t k : list) {
    const ParamInfo &param = m.params[size_t(k)];
    int32_t p = param.partition;
    const PartitionInfo &part = m.partitions[size_t(p)];
    if (part.expert && m.expertParallel > 1)
      throw std::runtime_error("parameter '" + param.name +
                               "' is split over expert-parallel ranks, "
                               "which streaming does not gather (export_hf "
                               "does)");
    std::vector<float> full(receives ? size_t(param.numel) : 0);
    Range want{param.offset, param.offset + param.numel};
    auto piece = [&](int rank) {
      Range own = m.owned(part, rank);
      return Range{std::max(own.begin, want.begin),
                   std::min(own.end, want.end)};
    };
    if (m.stage == 0) {
      // Every rank holds every parameter.
      if (receives)
        loadOwnedMasterRange(ctx, p, want.begin, param.numel, full.data());
    } else {
      if (param.numel > std::numeric_limits<int>::max())
        throw std::runtime_error("parameter '" + param.name +
                                 "' exceeds MPI's int counts");
      // The first shard group's ranks hold every element once.
      int members = m.shardGroupSize(part);
      std::vector<int> counts(size_t(ctx.world), 0), displs(size_t(ctx.world));
      int64_t covered = 0;
      for (int r = 0; r < members && r < ctx.world; ++r) {
        Range at = piece(r);
        counts[size_t(r)] = int(at.size());
        displs[size_t(r)] = int(at.size() > 0 ? at.begin - want.begin : 0);
        covered += at.size();
      }
      if (covered != param.numel)
        throw std::runtime_error("parameter '" + param.name +
                                 "': the first shard group holds " +
                                 std::to_string(covered) + " of its " +
                                 std::to_string(param.numel) + " elements");
      Range mine = ctx.rank < members ? piece(ctx.rank) : Range{};
      std::vector<float> sent(size_t(mine.size()));
      if (mine.size() > 0)
        loadOwnedMasterRange(ctx, p, mine.begin - m.owned(part, ctx.rank).begin,
                             mine.size(), sent.data());
      if (root < 0)
        MPI_Allgatherv(sent.data(), int(sent.size()), MPI_FLOAT, full.data(),
                       counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
      else
        MPI_Gatherv(sent.data(), int(sent.size()), MPI_FLOAT, full.data(),
                    counts.data(), displs.data(), MPI_FLOAT, root,
                    MPI_COMM_WORLD);
    }
    Tensor t{param.name, param.exportShape(), {}};
    if (receives) {
      for (int64_t e = param.exportNumel(); e < param.numel; ++e)
        if (full[size_t(e)] != 0.0f)
          throw std::runtime_error(
              "padding row " +
              std::to_string(e / (param.numel / param.shape[0])) + " of '" +
              param.name + "' is not 0: its gradient was not masked");
      full.resize(size_t(param.exportNumel()));
      t.data = std::move(full);
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}
