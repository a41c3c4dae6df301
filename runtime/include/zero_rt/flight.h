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

#include "zero_rt/table.h"
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

} // namespace flight

// How the record's enums are written (table.h).
#define ZRT_FLIGHT_ENUM(name) ZRT_ENUM_VALUES_BEGIN(flight::name)
#define ZRT_FLIGHT_CASE(id, value) value,
#define ZRT_FLIGHT_END_ENUM(name) ZRT_ENUM_VALUES_END
#include "zero_rt/flight.def"

namespace flight {

using zrt::EnumValues;
using zrt::enumOf;
using zrt::valueOf;

// clang-format off
#define ZRT_FLIGHT_OBJECT(name) struct name {
#define ZRT_FLIGHT_FIELD(type, name, key, what)                                \
  ZRT_TABLE_MEMBER(type, name, key, )
#define ZRT_FLIGHT_END(name) };
#include "zero_rt/flight.def"

/// Calls `f(key, member)` for each member of `v` (a struct above, const or
/// not) in the record's order.
#define ZRT_FLIGHT_OBJECT(name) ZRT_TABLE_VISIT_FIELDS(name)
#define ZRT_FLIGHT_FIELD(type, name, key, what) f(key, v.name);
#define ZRT_FLIGHT_END(name) }
#include "zero_rt/flight.def"
// clang-format on

} // namespace flight
} // namespace zrt

#endif // ZERO_RT_FLIGHT_H
