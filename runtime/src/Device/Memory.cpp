//===- Memory.cpp - Planned arena and scratch accounting ------------------===//
//
// Part of the zero-mlir project.
//
// The compiler plans every buffer of a step at an offset of one arena, so
// the arena's high-water mark is the planned size actually touched. Kernels
// that cannot avoid heap temporaries allocate them through Scratch, whose
// bytes are tracked here; the measured peak is the arena high-water marks
// plus the scratch peak.
//
//===----------------------------------------------------------------------===//

#include "Device/Memory.h"
#include "Device/Device.h"
#include "Driver/Trace.h"
#include "Support/Support.h"
#include "Support/Types.h"
#include "zero_rt/zrt.h"

#include <atomic>
#include <cstdlib>
#include <string>

using namespace zrt;

namespace {

std::atomic<int64_t> scratchInUse{0};
std::atomic<int64_t> scratchPeak{0};
// Sum of the high-water marks of live arenas, and its peak.
std::atomic<int64_t> arenaInUse{0};
std::atomic<int64_t> arenaPeak{0};
// The same for the pinned host arenas of an offloaded optimizer, which are
// not device memory.
std::atomic<int64_t> hostInUse{0};
std::atomic<int64_t> hostPeak{0};

void raise(std::atomic<int64_t> &peak, int64_t value) {
  int64_t old = peak.load(std::memory_order_relaxed);
  while (value > old && !peak.compare_exchange_weak(old, value))
    ;
}

} // namespace

struct zrt_arena {
  char *base;
  int64_t size;
  std::atomic<int64_t> highWater;
  /// Pinned host memory rather than tensor memory.
  bool host = false;
};

void zrt::accountScratch(int64_t delta) {
  int64_t inUse = scratchInUse.fetch_add(delta) + delta;
  raise(scratchPeak, inUse);
  traceScratch(inUse);
}

Scratch::Scratch(int64_t bytes) : bytes(bytes) {
  if (bytes <= 0)
    return;
  ptr = alignedAlloc(bytes);
  int64_t inUse = scratchInUse.fetch_add(bytes) + bytes;
  raise(scratchPeak, inUse);
  traceScratch(inUse);
}

Scratch::~Scratch() {
  if (!ptr)
    return;
  std::free(ptr);
  traceScratch(scratchInUse.fetch_sub(bytes) - bytes);
}

namespace {
/// Allocates an arena's memory; out of memory names the arena.
template <typename Allocate>
void *allocateArena(int64_t bytes, const char *what, Allocate allocate) {
  try {
    return allocate(bytes);
  } catch (const OutOfMemory &e) {
    throw OutOfMemory("out of memory for the plan's " + std::string(what) +
                      " (" + std::to_string(bytes) + " bytes): " + e.what());
  }
}
} // namespace

zrt_arena *zrt::createArena(int64_t bytes, const char *what) {
  if (bytes < 0)
    fatal("createArena: negative size %lld", (long long)bytes);
  void *base = allocateArena(bytes, what, device::allocate);
  auto *arena = new zrt_arena;
  arena->base = static_cast<char *>(base);
  arena->size = bytes;
  arena->highWater = 0;
  return arena;
}

// The C ABI cannot throw: out of memory ends the process there.
extern "C" zrt_arena *zrt_arena_create(int64_t bytes) {
  try {
    return createArena(bytes, "arena");
  } catch (const OutOfMemory &e) {
    fatal("%s", e.what());
  }
}

zrt_arena *zrt::createHostArena(int64_t bytes) {
  if (bytes < 0)
    fatal("createHostArena: negative size %lld", (long long)bytes);
  void *base = allocateArena(bytes, "pinned host arena", device::allocateHost);
  auto *arena = new zrt_arena;
  arena->base = static_cast<char *>(base);
  arena->size = bytes;
  arena->highWater = 0;
  arena->host = true;
  return arena;
}

int64_t zrt::hostMemoryPeakBytes() { return hostPeak.load(); }

extern "C" void zrt_arena_destroy(zrt_arena *arena) {
  if (!arena)
    return;
  if (arena->host) {
    hostInUse.fetch_sub(arena->highWater.load());
    device::releaseHost(arena->base);
  } else {
    arenaInUse.fetch_sub(arena->highWater.load());
    device::release(arena->base);
  }
  delete arena;
}

extern "C" void *zrt_arena_base(zrt_arena *arena) { return arena->base; }

extern "C" int64_t zrt_arena_size(const zrt_arena *arena) {
  return arena->size;
}

extern "C" void *zrt_arena_at(zrt_arena *arena, int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset > arena->size - bytes)
    fatal("zrt_arena_at: [%lld, %lld) is outside the arena of %lld bytes",
          (long long)offset, (long long)(offset + bytes),
          (long long)arena->size);
  int64_t end = offset + bytes;
  int64_t old = arena->highWater.load(std::memory_order_relaxed);
  while (end > old && !arena->highWater.compare_exchange_weak(old, end))
    ;
  if (end > old)
    raise(arena->host ? hostPeak : arenaPeak,
          (arena->host ? hostInUse : arenaInUse).fetch_add(end - old) +
              (end - old));
  return arena->base + offset;
}

extern "C" int64_t zrt_arena_high_water_bytes(const zrt_arena *arena) {
  return arena->highWater.load();
}

extern "C" int64_t zrt_scratch_bytes_in_use(void) {
  return scratchInUse.load();
}

extern "C" int64_t zrt_scratch_peak_bytes(void) { return scratchPeak.load(); }

extern "C" int64_t zrt_memory_peak_bytes(void) {
  return arenaPeak.load() + scratchPeak.load();
}

extern "C" void zrt_memory_reset_peak(void) {
  arenaPeak = arenaInUse.load();
  scratchPeak = scratchInUse.load();
}
