//===- table.h - zero-mlir runtime: what the table headers share *- C++ -*-===//
//
// Part of the zero-mlir project.
//
// What the headers declared from a table (manifest.h from manifest.def,
// flight.h from flight.def) share: how an enum is written (each header
// specializes EnumValues for its enums, with ZRT_ENUM_VALUES_BEGIN and
// ZRT_ENUM_VALUES_END at namespace zrt's scope, and valueOf and enumOf serve
// them all), a struct's member with its key, and visitFields. Plain C++17.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_TABLE_H
#define ZERO_RT_TABLE_H

#include <optional>
#include <string_view>
#include <type_traits>

namespace zrt {

/// The values of an enum as written, by enumerator: `values` and `size`.
template <typename E>
struct EnumValues;

// clang-format off
/// Opens EnumValues<E> at namespace zrt's scope; the values follow, each
/// with a comma, then ZRT_ENUM_VALUES_END.
#define ZRT_ENUM_VALUES_BEGIN(E)                                               \
  template <> struct EnumValues<E> {                                           \
    static constexpr const char *const values[] = {
#define ZRT_ENUM_VALUES_END                                                    \
    };                                                                         \
    static constexpr int size = sizeof(values) / sizeof(values[0]);            \
  };

/// A member `name` of a table's struct, initialized with `init` (nothing
/// for its type's default), and its key as `nameKey`.
#define ZRT_TABLE_MEMBER(type, name, key, init)                                \
  type name{init};                                                             \
  static constexpr const char *name##Key = key;

/// Opens `visitFields(v, f)` for the table's struct `name`, const or not:
/// the table's field macro then calls `f` on each member, and `}` closes it.
#define ZRT_TABLE_VISIT_FIELDS(name)                                           \
  template <typename T, typename F>                                            \
  std::enable_if_t<std::is_same_v<std::remove_const_t<T>, name>>               \
  visitFields(T &v, F &&f) {
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

} // namespace zrt

#endif // ZERO_RT_TABLE_H
