//===- Adam8bitDump.cpp - The 8-bit Adam on files
//--------------------------===//
//
// Part of the zero-mlir project.
//
// zrt-adam8bit-dump N STEPS ADAMW LR BETA1 BETA2 EPS WD RANGE_BEGIN
//                   RANGE_END RANGE_DECAY IN OUT
//
// Reads N fp32 masters and STEPS gradients of N fp32 elements from IN and
// runs STEPS steps of zrt_optimizer_step with int8 states from zero states
// (with the decay range [RANGE_BEGIN, RANGE_END) at RANGE_DECAY unless it is
// empty). Writes to OUT zrt_adam8bit_map's signed and unsigned maps, then after
// each step the masters, exp_avg's codes and absmaxes and exp_avg_sq's codes
// and absmaxes: the raw buffers a test's independent model of the block-wise
// 8-bit Adam compares bit for bit.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/zrt.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

[[noreturn]] void fail(const char *message, const char *what) {
  std::fprintf(stderr, "zrt-adam8bit-dump: %s%s\n", message, what);
  std::exit(1);
}

template <typename T>
void put(std::FILE *f, const std::vector<T> &v) {
  if (std::fwrite(v.data(), sizeof(T), v.size(), f) != v.size())
    fail("cannot write the output", "");
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 14)
    fail("usage: zrt-adam8bit-dump N STEPS ADAMW LR BETA1 BETA2 EPS WD "
         "RANGE_BEGIN RANGE_END RANGE_DECAY IN OUT",
         "");
  int64_t n = std::atoll(argv[1]), steps = std::atoll(argv[2]);
  int32_t adamw = std::atoi(argv[3]);
  double lr = std::atof(argv[4]), beta1 = std::atof(argv[5]),
         beta2 = std::atof(argv[6]), eps = std::atof(argv[7]),
         wd = std::atof(argv[8]);
  int64_t range[2] = {std::atoll(argv[9]), std::atoll(argv[10])};
  double rangeDecay = std::atof(argv[11]);
  int32_t numRanges = range[0] < range[1] ? 1 : 0;
  if (n < 1 || steps < 1)
    fail("N and STEPS must be positive", "");

  std::FILE *in = std::fopen(argv[12], "rb");
  if (!in)
    fail("cannot open ", argv[12]);
  std::vector<float> master(static_cast<size_t>(n)),
      grads(static_cast<size_t>(n * steps));
  if (std::fread(master.data(), 4, master.size(), in) != master.size() ||
      std::fread(grads.data(), 4, grads.size(), in) != grads.size() ||
      std::fgetc(in) != EOF)
    fail("wrong size: ", argv[12]);
  std::fclose(in);

  const int64_t block = 2048, blocks = (n + block - 1) / block;
  std::vector<uint8_t> qm(static_cast<size_t>(n)), qv(static_cast<size_t>(n));
  std::vector<float> am(static_cast<size_t>(blocks)),
      av(static_cast<size_t>(blocks));
  std::vector<float> signedMap(256), unsignedMap(256);
  zrt_adam8bit_map(1, signedMap.data());
  zrt_adam8bit_map(0, unsignedMap.data());

  std::FILE *out = std::fopen(argv[13], "wb");
  if (!out)
    fail("cannot write ", argv[13]);
  put(out, signedMap);
  put(out, unsignedMap);
  // Adam (kind 0) or AdamW (1) with int8 states (precision 2).
  zrt_optimizer opt{};
  opt.kind = adamw ? 1 : 0;
  opt.states = 2;
  auto set = [&](auto &p) {
    p.lr = lr;
    p.beta1 = beta1;
    p.beta2 = beta2;
    p.eps = eps;
    p.weight_decay = wd;
    p.bias_correction = 1;
  };
  if (adamw)
    set(opt.params.adamw);
  else
    set(opt.params.adam);
  for (int64_t s = 0; s < steps; ++s) {
    // The master is its own parameter copy (f32).
    zrt_update u{};
    u.dtype = ZRT_F32;
    u.grad = grads.data() + s * n;
    u.master = master.data();
    u.param = master.data();
    u.states[0] = qm.data();
    u.absmax[0] = am.data();
    u.states[1] = qv.data();
    u.absmax[1] = av.data();
    u.n = n;
    u.step = s + 1;
    u.decay_ranges = range;
    u.range_decays = &rangeDecay;
    u.num_decay_ranges = numRanges;
    u.loss_scale = 1.0f;
    zrt_optimizer_step(&opt, &u);
    put(out, master);
    put(out, qm);
    put(out, am);
    put(out, qv);
    put(out, av);
  }
  if (std::fclose(out) != 0)
    fail("cannot write ", argv[13]);
  return 0;
}
