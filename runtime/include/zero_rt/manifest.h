//===- manifest.h - zero-mlir runtime: the program manifest -----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The structs of the JSON manifest a program carries (zrt_program.manifest),
// declared from manifest.def: what the compiler fills and writes, and what
// the runtime reads before it checks and derives its view (runtime/src/
// Program.h). Each member `m` has its key as `mKey`, for messages. Plain
// C++17, with no JSON library: each side generates its reader or writer
// from manifest.def with its own.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MANIFEST_H
#define ZERO_RT_MANIFEST_H

#include "zero_rt/table.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zrt {

/// Persistent buffers of a partition (the compiler's BufferKind, by name).
/// An offloaded optimizer keeps its masters and moments in the host arena
/// beside the copies of the owned gradients and 16-bit parameters.
enum BufferKind {
#define ZRT_MANIFEST_BUFFER(id, key) id,
#include "zero_rt/manifest.def"
};
constexpr int kNumBufferKinds = 0
#define ZRT_MANIFEST_BUFFER(id, key) +1
#include "zero_rt/manifest.def"
    ;
/// Their keys in the manifest, by BufferKind.
inline constexpr const char *kBufferNames[kNumBufferKinds] = {
#define ZRT_MANIFEST_BUFFER(id, key) key,
#include "zero_rt/manifest.def"
};

namespace manifest {

/// Whether a manifest without a field's key is invalid.
enum class Presence { Required, Optional };

/// A value of each buffer kind a partition has (none for one it lacks).
using BufferMap = std::array<std::optional<int64_t>, kNumBufferKinds>;

// clang-format off
#define ZRT_MANIFEST_ENUM(name) enum class name {
#define ZRT_MANIFEST_CASE(id, value) id,
#define ZRT_MANIFEST_END_ENUM(name) };
#include "zero_rt/manifest.def"
// clang-format on

} // namespace manifest

// How BufferKind and the manifest's enums are written (table.h).
template <>
struct EnumValues<BufferKind> {
  static constexpr const char *const *values = kBufferNames;
  static constexpr int size = kNumBufferKinds;
};
#define ZRT_MANIFEST_ENUM(name) ZRT_ENUM_VALUES_BEGIN(manifest::name)
#define ZRT_MANIFEST_CASE(id, value) value,
#define ZRT_MANIFEST_END_ENUM(name) ZRT_ENUM_VALUES_END
#include "zero_rt/manifest.def"

namespace manifest {

using zrt::EnumValues;
using zrt::enumOf;
using zrt::valueOf;

// clang-format off
#define ZRT_MANIFEST_OBJECT(name) struct name {
#define ZRT_MANIFEST_FIELD(type, name, key, presence, init)                    \
  ZRT_TABLE_MEMBER(type, name, key, init)
#define ZRT_MANIFEST_END(name) };
#include "zero_rt/manifest.def"

/// Calls `f(key, presence, member)` for each member of `v` (a struct above,
/// const or not) in the table's order: for code that reads or writes
/// manifest.def's objects elsewhere (a checkpoint keeps hf_model and peft).
#define ZRT_MANIFEST_OBJECT(name) ZRT_TABLE_VISIT_FIELDS(name)
#define ZRT_MANIFEST_FIELD(type, name, key, presence, init)                    \
  f(key, Presence::presence, v.name);
#define ZRT_MANIFEST_END(name) }
#include "zero_rt/manifest.def"
// clang-format on

} // namespace manifest
} // namespace zrt

#endif // ZERO_RT_MANIFEST_H
