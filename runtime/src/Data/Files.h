//===- Files.h - File formats of the training driver ------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The pure, MPI-free parts of the driver: .npy and safetensors parsing and
// writing, CRC-32 and crash-safe file writes (the checkpoints' own files are
// in Checkpoint/). Errors are reported by throwing std::runtime_error with a
// message that names the file; the driver catches them (nothing here may
// reach generated code).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_FILES_H
#define ZERO_RT_FILES_H

#include "zero_rt/zrt.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace zrt {

/// Throws std::runtime_error(msg): how the driver's local parts report.
[[noreturn]] void fail(const std::string &msg);

/// The whole content of a file.
std::string readFile(const std::string &path);

/// write(2) of `n` bytes to `fd` until done; `path` names it in errors.
void writeAll(int fd, const char *p, size_t n, const std::string &path);

/// Writes `data` to `path` so that a crash leaves either the old file or the
/// new one: a temporary file in the same directory, fsync, rename, fsync of
/// the directory.
void writeFileAtomic(const std::string &path, const std::string &data);

/// Test hook (fault injection): writeFileAtomic calls it with the final path
/// once the temporary file is written and fsynced, just before the rename.
/// An empty function removes it.
void setBeforeRenameHook(std::function<void(const std::string &path)> hook);

/// A shape as messages print it: "[2, 3]".
std::string shapeText(const std::vector<int64_t> &shape);

/// Creates a directory and its parents (like mkdir -p).
void makeDirs(const std::string &path);

/// Checks, before any work, that the output file `path` can be written (the
/// way writeFileAtomic writes it: a new file in its directory, renamed over
/// it); `option` names it in the message ("--export").
void checkWritableFile(const std::string &path, const std::string &option);
/// Creates the output directory `dir` (mkdir -p) and checks that files can
/// be created in it.
void checkWritableDir(const std::string &dir, const std::string &option);

/// Whether `path` exists and is a regular file.
bool isRegularFile(const std::string &path);
/// Whether `path` exists and is a directory.
bool isDirectory(const std::string &path);
/// The directory of `path` ("." for a bare name, "/" for one in /).
std::string dirOf(const std::string &path);

/// CRC-32 (IEEE 802.3, as zlib's crc32), continuing from `crc`.
uint32_t crc32(const void *data, size_t size, uint32_t crc = 0);

//===----------------------------------------------------------------------===//
// NumPy .npy (format versions 1.0, 2.0 and 3.0)
//===----------------------------------------------------------------------===//

struct NpyArray {
  /// The dtype descriptor normalized to little endian, e.g. "<f4", "<i8".
  std::string descr;
  std::vector<int64_t> shape;
  int64_t itemSize = 0;
  /// Row-major element bytes.
  std::string data;

  int64_t numel() const;
};

/// An .npy file's header: its array's dtype and shape (as NpyArray's), and
/// where its data begins.
struct NpyHeader {
  std::string descr;
  std::vector<int64_t> shape;
  int64_t itemSize = 0;
  size_t dataOffset = 0;

  int64_t numel() const;
};

/// Whether `bytes` (`size` of them) begin with the .npy magic.
bool isNpy(const char *bytes, size_t size);
/// Parses the header of the .npy file whose `size` bytes are at `bytes` (a
/// mapping of it, say) and checks that the data after it is exactly the
/// shape's; `name` is used in messages.
NpyHeader parseNpyHeader(const char *bytes, size_t size,
                         const std::string &name);
/// Parses a C-order little-endian array; `name` is used in messages.
NpyArray parseNpy(const std::string &bytes, const std::string &name);
/// Serializes an array (format 1.0); used by tests.
std::string writeNpy(const NpyArray &array);

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

/// One tensor: fp32 values, and the dtype a file stores them in.
struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  /// The zrt_dtype writeSafetensors stores (ZRT_BF16 and ZRT_F16 round the
  /// values to nearest even, as the runtime's casts do).
  int32_t dtype = ZRT_F32;
};

/// The bytes of a safetensors file holding `tensors` in this order, each in
/// its dtype (F32, BF16 or F16): an 8-byte little-endian header length, the
/// JSON header (`metadata`, when given, first as "__metadata__") padded with
/// spaces to a multiple of 8, then the data.
std::string
writeSafetensors(const std::vector<Tensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});
/// Parses a safetensors file in header order; F32, BF16 and F16 tensors are
/// accepted, the 16-bit ones widened to fp32 (exactly). Tensors for which
/// `skip` returns true are left out unread, whatever their dtype.
std::vector<Tensor>
parseSafetensors(const std::string &bytes, const std::string &name,
                 const std::function<bool(const std::string &)> &skip = {});

/// One entry of a safetensors header, checked against the format's rules:
/// its data is bytes [begin, end) of the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;

  /// Of F32, BF16 and F16 entries (those that are not skipped).
  int64_t itemSize() const;
  int64_t numel() const;
};

/// The header length that a safetensors file of `fileSize` bytes gives in
/// its first 8 bytes, checked against the size.
uint64_t safetensorsHeaderLength(const char *first8, uint64_t fileSize,
                                 const std::string &name);
/// The entries of a safetensors header (its JSON `text`) over a data
/// section of `dataSize` bytes, in header order, checked as parseSafetensors
/// checks them (entries `skip` accepts may have any dtype).
std::vector<SafetensorsEntry>
parseSafetensorsHeader(const std::string &text, uint64_t dataSize,
                       const std::string &name,
                       const std::function<bool(const std::string &)> &skip);
/// Widens `n` elements of safetensors dtype `dtype` (F32, BF16, F16) at
/// `src` to fp32, exactly.
void convertToFloat(const std::string &dtype, const char *src, size_t n,
                    float *dst);

/// A tensor a weights file must supply.
struct WantedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

/// One tensor of `tensors` (read from `file`) per entry of `wanted`, in that
/// order and named as there. Besides exact names it takes Hugging Face's
/// spellings: a wanted `transformer.X` is also found as `X` (GPT-2's base
/// model state dict, as the hub's gpt2 files hold it); the buffers files may
/// hold beside the parameters (GPT-2's attention masks `h.N.attn.bias` and
/// `h.N.attn.masked_bias`, Llama's `rotary_emb.inv_freq`) are skipped, and so
/// is an `lm_head.weight` equal to the tied embedding
/// (`transformer.wte.weight` or `model.embed_tokens.weight`) when no such
/// parameter is wanted. Throws, naming `file`, for a missing tensor (with the
/// closest unused name), a shape that differs, or a tensor nothing wants.
std::vector<Tensor> matchWeights(std::vector<Tensor> tensors,
                                 const std::vector<WantedTensor> &wanted,
                                 const std::string &file);
/// matchWeights' choice over the entries of safetensors headers: for each
/// wanted tensor, the index of the entry that supplies it. An entry left
/// over is allowed when it is named in `tied` (a name under which a wanted
/// parameter is tied, saved twice), and an `lm_head.weight` when
/// `equalsEmbedding(head, embedding)` says that it holds the values of the
/// tied embedding (entry indices).
std::vector<size_t>
matchEntries(const std::vector<SafetensorsEntry> &entries,
             const std::vector<WantedTensor> &wanted, const std::string &file,
             const std::set<std::string> &tied,
             const std::function<bool(size_t, size_t)> &equalsEmbedding);
/// Whether `name` is a buffer weights files hold beside the parameters
/// (matchWeights' rule) that no wanted tensor asks for: read never.
bool isWeightsBuffer(const std::string &name,
                     const std::vector<WantedTensor> &wanted);

/// The optimal string alignment distance: insertions, deletions,
/// substitutions and swaps of adjacent characters each count one.
size_t editDistance(const std::string &a, const std::string &b);

} // namespace zrt

#endif // ZERO_RT_FILES_H
