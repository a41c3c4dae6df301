//===- CommBench.cpp - Runtime collectives against bare MPI ---------------===//
//
// Part of the zero-mlir project.
//
// Times each runtime collective (zrt_all_gather, zrt_reduce_scatter,
// zrt_all_reduce, zrt_reduce, each followed by zrt_wait) against bare MPI
// calls on the same buffers, interleaved round by round (each variant in
// every place of the round equally often), and reports the
// median over rounds of the per-round time ratio (baseline time / runtime
// time = runtime bandwidth / baseline bandwidth; 1 means the runtime adds
// nothing). A sample is the slowest rank's time of a few calls between
// barriers. Baselines:
//
//   blocking        MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce,
//                   MPI_Reduce (Open MPI's coll/tuned algorithms)
//   nonblocking     MPI_I* + MPI_Wait (coll/libnbc)
//   nonblocking_yield  MPI_I* + the runtime's wait (MPI_Test in a spin for
//                   20 us, then MPI_Test and sched_yield): exactly the MPI
//                   calls zrt makes, so the ratio to it is the runtime's own
//                   overhead (the goal's comparison)
//
// f32 uses MPI_FLOAT with MPI_SUM in every variant. bf16 all-gathers move
// MPI_UINT16_T in every variant (no arithmetic). bf16 reductions have no
// built-in MPI type, so the baselines are (a) the same MPI calls on
// MPI_UINT16_T with a user op written the plain way here (scalar loop,
// widen-add-round per element, as a user of MPI would), and (b) MPI_UINT16_T
// with the built-in MPI_SUM (non-blocking, the runtime's wait): integer
// sums, numerically meaningless, but the cost floor of a 16-bit reduction
// (transport plus a vectorized built-in op).
//
//   mpirun -np N zrt-bench-comm [--count ELEMS] [--rounds R] [--json FILE]
//
// `--count` is the elements of the full array (split over ranks for
// all-gather / reduce-scatter).
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "zero_rt/zrt.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace zrt::bench;

namespace {

inline float bf16ToFloat(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// The straightforward user op a bf16 MPI user would write.
void plainBf16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

struct Variant {
  std::string name;
  std::function<void()> run;
  std::vector<double> seconds;
};

struct Case {
  std::string op, dtype;
  double busFactor; // nccl-tests bus bandwidth factor
  double bytes;     // full array
  std::vector<Variant> variants;
};

} // namespace

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  zrt_comm *comm = zrt_comm_world();
  int rank = zrt_comm_rank(comm), world = zrt_comm_size(comm);
  int64_t count = int64_t(8) << 20;
  int rounds = 11;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--count" && i + 1 < argc)
      count = std::atoll(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else {
      if (rank == 0)
        std::fprintf(stderr, "usage: zrt-bench-comm [--count N] [--rounds R] "
                             "[--json FILE]\n");
      zrt_finalize();
      MPI_Finalize();
      return 2;
    }
  }
  count = count / world * world;
  const int64_t part = count / world;
  const int n = int(count), np = int(part);

  // Every benchmark owns its buffers, shared by its runtime and MPI variants.
  std::vector<float> f32In(count), f32Out(count), f32Part(part);
  std::vector<uint16_t> b16In(count), b16Out(count), b16Part(part);
  for (int64_t i = 0; i < count; ++i) {
    f32In[i] = float((i * 7 + rank) % 13) * 0.25f;
    b16In[i] = floatToBf16(f32In[i]);
  }
  for (int64_t i = 0; i < part; ++i) {
    f32Part[i] = f32In[i];
    b16Part[i] = b16In[i];
  }
  MPI_Comm mc;
  MPI_Comm_dup(MPI_COMM_WORLD, &mc);
  MPI_Op plainOp;
  MPI_Op_create(plainBf16Sum, 1, &plainOp);

  auto nb = [](MPI_Request r) { MPI_Wait(&r, MPI_STATUS_IGNORE); };
  // The runtime's wait (runtime/src/Collectives/Comm.cpp, waitRequest).
  auto nbYield = [](MPI_Request r) {
    int done = 0;
    double start = MPI_Wtime();
    for (;;) {
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (done)
        return;
      if (MPI_Wtime() - start > 20e-6)
        sched_yield();
    }
  };
  double f = double(world - 1) / world;
  std::vector<Case> cases;

  // --- all_gather ---------------------------------------------------------
  for (int bf : {0, 1}) {
    MPI_Datatype t = bf ? MPI_UINT16_T : MPI_FLOAT;
    int32_t dt = bf ? ZRT_BF16 : ZRT_F32;
    void *in = bf ? (void *)b16Part.data() : (void *)f32Part.data();
    void *out = bf ? (void *)b16Out.data() : (void *)f32Out.data();
    Case c{
        "all_gather", bf ? "bf16" : "f32", f, double(count) * (bf ? 2 : 4), {}};
    c.variants.push_back(
        {"zrt", [=] { zrt_wait(zrt_all_gather(comm, dt, in, out, part)); }});
    c.variants.push_back(
        {"mpi_blocking", [=] { MPI_Allgather(in, np, t, out, np, t, mc); }});
    c.variants.push_back({"mpi_nonblocking", [=] {
                            MPI_Request r;
                            MPI_Iallgather(in, np, t, out, np, t, mc, &r);
                            nb(r);
                          }});
    c.variants.push_back({"mpi_nonblocking_yield", [=] {
                            MPI_Request r;
                            MPI_Iallgather(in, np, t, out, np, t, mc, &r);
                            nbYield(r);
                          }});
    cases.push_back(std::move(c));
  }

  // --- reductions ---------------------------------------------------------
  // kind: 0 reduce_scatter, 1 all_reduce, 2 reduce (root 0)
  for (int kind : {0, 1, 2}) {
    for (int bf : {0, 1}) {
      int32_t dt = bf ? ZRT_BF16 : ZRT_F32;
      void *in = bf ? (void *)b16In.data() : (void *)f32In.data();
      void *out = bf ? (void *)b16Out.data() : (void *)f32Out.data();
      const char *opName = kind == 0   ? "reduce_scatter"
                           : kind == 1 ? "all_reduce"
                                       : "reduce";
      double factor = kind == 1 ? 2 * f : f;
      Case c{opName,
             bf ? "bf16" : "f32",
             factor,
             double(count) * (bf ? 2 : 4),
             {}};
      auto zrtRun = [=] {
        if (kind == 0)
          zrt_wait(zrt_reduce_scatter(comm, dt, in, out, part));
        else if (kind == 1)
          zrt_wait(zrt_all_reduce(comm, dt, ZRT_SUM, in, out, count));
        else
          zrt_wait(zrt_reduce(comm, dt, in, out, count, 0));
      };
      // mode 0: blocking, 1: MPI_I* + MPI_Wait, 2: MPI_I* + the runtime's
      // wait.
      auto mpiRun = [=](MPI_Datatype t, MPI_Op op, int mode) {
        return [=] {
          MPI_Request r;
          if (kind == 0) {
            if (mode == 0)
              MPI_Reduce_scatter_block(in, out, np, t, op, mc);
            else
              MPI_Ireduce_scatter_block(in, out, np, t, op, mc, &r);
          } else if (kind == 1) {
            if (mode == 0)
              MPI_Allreduce(in, out, n, t, op, mc);
            else
              MPI_Iallreduce(in, out, n, t, op, mc, &r);
          } else {
            if (mode == 0)
              MPI_Reduce(in, out, n, t, op, 0, mc);
            else
              MPI_Ireduce(in, out, n, t, op, 0, mc, &r);
          }
          if (mode == 1)
            nb(r);
          else if (mode == 2)
            nbYield(r);
        };
      };
      c.variants.push_back({"zrt", zrtRun});
      if (!bf) {
        c.variants.push_back({"mpi_blocking", mpiRun(MPI_FLOAT, MPI_SUM, 0)});
        c.variants.push_back(
            {"mpi_nonblocking", mpiRun(MPI_FLOAT, MPI_SUM, 1)});
        c.variants.push_back(
            {"mpi_nonblocking_yield", mpiRun(MPI_FLOAT, MPI_SUM, 2)});
      } else {
        c.variants.push_back(
            {"mpi_blocking_plain_op", mpiRun(MPI_UINT16_T, plainOp, 0)});
        c.variants.push_back(
            {"mpi_nonblocking_plain_op", mpiRun(MPI_UINT16_T, plainOp, 1)});
        c.variants.push_back({"mpi_nonblocking_yield_plain_op",
                              mpiRun(MPI_UINT16_T, plainOp, 2)});
        c.variants.push_back({"mpi_nonblocking_yield_u16_sum",
                              mpiRun(MPI_UINT16_T, MPI_SUM, 2)});
      }
      cases.push_back(std::move(c));
    }
  }

  // Calls per sample: enough for ~30 ms of the first variant.
  auto timed = [&](Variant &v, int calls) {
    MPI_Barrier(mc);
    double t0 = MPI_Wtime();
    for (int i = 0; i < calls; ++i)
      v.run();
    double t = (MPI_Wtime() - t0) / calls, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, mc);
    return slowest;
  };
  std::vector<int> calls(cases.size(), 1);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    for (Variant &v : cases[ci].variants)
      timed(v, 1); // warm-up: algorithm selection, page faults
    double t = timed(cases[ci].variants[0], 1);
    calls[ci] = std::clamp(int(0.03 / std::max(t, 1e-7)), 1, 1000);
  }
  // A variant's time depends on its place in the round (the one after a
  // switch of buffers or communicator runs differently), so every variant
  // takes every place equally often: round r rotates the order by r and
  // reverses it every other cycle of rotations.
  for (int r = 0; r < rounds; ++r)
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      auto &vs = cases[ci].variants;
      size_t k = vs.size();
      bool reverse = (r / int(k)) % 2;
      for (size_t i = 0; i < k; ++i) {
        size_t at = (i + size_t(r)) % k;
        size_t v = reverse ? k - 1 - at : at;
        vs[v].seconds.push_back(timed(vs[v], calls[ci]));
      }
    }

  if (rank == 0) {
    std::printf("%d ranks, %lld elements per full array, %d rounds\n", world,
                (long long)count, rounds);
    std::string out = "{\n  \"ranks\": " + std::to_string(world) +
                      ",\n  \"count\": " + std::to_string(count) +
                      ",\n  \"rounds\": " + std::to_string(rounds) +
                      ",\n  \"cases\": [";
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Case &c = cases[ci];
      Variant &z = c.variants[0];
      std::printf("%-15s %-5s %8.1f MiB  zrt %8.3f ms  busbw %6.2f GB/s\n",
                  c.op.c_str(), c.dtype.c_str(), c.bytes / (1 << 20),
                  median(z.seconds) * 1e3,
                  c.busFactor * c.bytes / median(z.seconds) / 1e9);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s\n    {\"op\": \"%s\", \"dtype\": \"%s\", \"bytes\": "
                    "%.0f, \"calls_per_sample\": %d, \"zrt_ms\": %.4f, "
                    "\"zrt_busbw_gbps\": %.4f, \"baselines\": [",
                    ci ? "," : "", c.op.c_str(), c.dtype.c_str(), c.bytes,
                    calls[ci], median(z.seconds) * 1e3,
                    c.busFactor * c.bytes / median(z.seconds) / 1e9);
      out += buf;
      for (size_t vi = 1; vi < c.variants.size(); ++vi) {
        Variant &v = c.variants[vi];
        std::vector<double> ratio;
        for (int r = 0; r < rounds; ++r)
          ratio.push_back(v.seconds[r] / z.seconds[r]);
        std::printf("    %-26s %8.3f ms  busbw %6.2f GB/s  zrt/baseline "
                    "bandwidth %.3f\n",
                    v.name.c_str(), median(v.seconds) * 1e3,
                    c.busFactor * c.bytes / median(v.seconds) / 1e9,
                    median(ratio));
        std::snprintf(
            buf, sizeof buf,
            "%s{\"name\": \"%s\", \"ms\": %.4f, \"busbw_gbps\": "
            "%.4f, \"ratio\": %.4f}",
            vi > 1 ? ", " : "", v.name.c_str(), median(v.seconds) * 1e3,
            c.busFactor * c.bytes / median(v.seconds) / 1e9, median(ratio));
        out += buf;
      }
      out += "]}";
    }
    out += "\n  ]\n}\n";
    if (!json.empty()) {
      writeText(json, out);
    }
  }
  MPI_Op_free(&plainOp);
  MPI_Comm_free(&mc);
  zrt_finalize();
  MPI_Finalize();
  return 0;
}
