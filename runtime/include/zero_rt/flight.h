//===- flight.h - zero-mlir runtime: the flight record ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The structs of the flight record a rank writes (flight-rank<R>.json),
// declared from flight.def: what the runtime's recorder fills and writes and
// what zero-flight reads. Each member `m` has its key as `mKey`, and
// visitFields() hands each member with its key to a function, in the
// record's order, so that each side generates its writer or reader. Plain
// C++17, with no JSON library.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_FLIGHT_H
#define ZERO_RT_FLIGHT_H

#include "zero_rt/topology.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zrt {
namespace flight {

#define ZRT_FLIGHT_VERSION(version) constexpr int64_t kVersion = version;
#define ZRT_FLIGHT_CHECKSUM(key) constexpr const char *kChecksumKey = key;
#include "zero_rt/flight.def"

/// The record's checksum: FNV-1a, 64 bits, of the text before its key.
inline uint64_t checksum(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// clang-format off
#define ZRT_FLIGHT_ENUM(name) enum class name {
#define ZRT_FLIGHT_CASE(id, value) id,
#define ZRT_FLIGHT_END_ENUM(name) };
#include "zero_rt/flight.def"
// clang-format on

/// The values of an enum of the record as written, by enumerator.
template <typename E>
struct EnumValues;
// clang-format off
#define ZRT_FLIGHT_ENUM(name)                                                  \
  template <> struct EnumValues<name> {                                        \
    static constexpr const char *const values[] = {
#define ZRT_FLIGHT_CASE(id, value) value,
#define ZRT_FLIGHT_END_ENUM(name)                                              \
    };                                                                         \
    static constexpr int size = sizeof(values) / sizeof(values[0]);            \
  };
#include "zero_rt/flight.def"
// clang-format on

/// How `e` is written.
template <typename E>
const char *valueOf(E e) {
  return EnumValues<E>::values[static_cast<int>(e)];
}

/// The enumerator written as `value`, if any.
template <typename E>
std::optional<E> enumOf(std::string_view value) {
  for (int i = 0; i < EnumValues<E>::size; ++i)
    if (value == EnumValues<E>::values[i])
      return static_cast<E>(i);
  return std::nullopt;
}

// clang-format off
#define ZRT_FLIGHT_OBJECT(name) struct name {
#define ZRT_FLIGHT_FIELD(type, name, key, what)                                \
  type name{};                                                                 \
  static constexpr const char *name##Key = key;
#define ZRT_FLIGHT_END(name) };
#include "zero_rt/flight.def"

/// Calls `f(key, member)` for each member of `v` (a struct above, const or
/// not) in the record's order.
#define ZRT_FLIGHT_OBJECT(name)                                                \
  template <typename T, typename F>                                            \
  std::enable_if_t<std::is_same_v<std::remove_const_t<T>, name>>               \
  visitFields(T &v, F &&f) {
#define ZRT_FLIGHT_FIELD(type, name, key, what) f(key, v.name);
#define ZRT_FLIGHT_END(name) }
#include "zero_rt/flight.def"
// clang-format on

} // namespace flight
} // namespace zrt

#endif // ZERO_RT_FLIGHT_H
