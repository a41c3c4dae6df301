//===- Tokens.h - Tokens of outstanding collectives -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The tokens zrt.h's collectives return, shared by the backends: each token
// is a slot holding the backend's handle of one outstanding operation (an
// MPI request, a CUDA event) and is reused once zrt_wait has consumed it.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TOKENS_H
#define ZERO_RT_TOKENS_H

#include "Support/Support.h"

#include <cstdint>
#include <mutex>
#include <vector>

namespace zrt {

template <typename Handle>
class TokenTable {
public:
  /// A token for a new operation; init(handle, fresh) sets its handle, where
  /// `fresh` says that the slot was never used (a reused slot keeps the
  /// handle of its last operation).
  template <typename Init>
  int64_t start(Init &&init) {
    std::lock_guard<std::mutex> lock(mutex);
    bool fresh = freeTokens.empty();
    int64_t token;
    if (fresh) {
      token = int64_t(slots.size());
      slots.emplace_back();
    } else {
      token = freeTokens.back();
      freeTokens.pop_back();
    }
    Slot &slot = slots[size_t(token)];
    init(slot.handle, fresh);
    slot.live = true;
    return token;
  }

  /// The handle of an outstanding token; aborts for any other.
  Handle handle(int64_t token) {
    std::lock_guard<std::mutex> lock(mutex);
    if (token < 0 || token >= int64_t(slots.size()) ||
        !slots[size_t(token)].live)
      fatal("zrt_wait: token %lld is not outstanding", (long long)token);
    return slots[size_t(token)].handle;
  }

  /// Frees a token once its operation has been waited for.
  void finish(int64_t token) {
    std::lock_guard<std::mutex> lock(mutex);
    slots[size_t(token)].live = false;
    freeTokens.push_back(token);
  }

  /// Calls wait(token) for every outstanding token, in token order.
  template <typename Wait>
  void waitAll(Wait &&wait) {
    int64_t n;
    {
      std::lock_guard<std::mutex> lock(mutex);
      n = int64_t(slots.size());
    }
    for (int64_t token = 0; token < n; ++token) {
      bool live;
      {
        std::lock_guard<std::mutex> lock(mutex);
        live = slots[size_t(token)].live;
      }
      if (live)
        wait(token);
    }
  }

  /// Calls fn(handle) on the handle of every outstanding token.
  template <typename Fn>
  void forEachLive(Fn &&fn) {
    std::lock_guard<std::mutex> lock(mutex);
    for (Slot &slot : slots)
      if (slot.live)
        fn(slot.handle);
  }

  /// Calls release(handle) on every slot's handle and forgets them all.
  template <typename Release>
  void clear(Release &&release) {
    std::lock_guard<std::mutex> lock(mutex);
    for (Slot &slot : slots)
      release(slot.handle);
    slots.clear();
    freeTokens.clear();
  }

private:
  struct Slot {
    Handle handle{};
    bool live = false;
  };
  std::mutex mutex;
  std::vector<Slot> slots;
  std::vector<int64_t> freeTokens;
};

} // namespace zrt

#endif // ZERO_RT_TOKENS_H
