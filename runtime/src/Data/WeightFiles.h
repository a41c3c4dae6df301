//===- WeightFiles.h - Weights in and out, by byte ranges -------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The weights a run starts from (--init-from: a safetensors file, or a
// Hugging Face model directory, single or sharded), read by byte ranges so
// that each rank reads only what it keeps, and the Hugging Face directories
// that --export-hf and zero-ckpt consolidate --hf write, laid out as
// save_pretrained lays them out. Errors throw std::runtime_error naming the
// file (Files.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_WEIGHTFILES_H
#define ZERO_RT_WEIGHTFILES_H

#include "Data/Files.h"
#include "zero_rt/manifest.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zrt {

/// save_pretrained's default max_shard_size (transformers 5).
constexpr char kDefaultMaxShardSize[] = "50GB";

/// Bytes of a shard size as save_pretrained reads it: an integer, or a
/// number with a unit KB, MB, GB or TB (powers of 1000). `option` names it
/// in the message.
int64_t parseShardSize(const std::string &text, const std::string &option);

/// Writes a Hugging Face model directory `dir` (created if needed):
/// config.json (`config`, as given) and the tensors, in order, as
/// save_pretrained writes them: model.safetensors, or, when they exceed
/// `maxShardBytes`, shards model-0000k-of-0000n.safetensors split where
/// save_pretrained splits and model.safetensors.index.json (metadata
/// total_parameters and total_size, weight_map). Each file is written
/// atomically; weight files of an earlier export that this one does not
/// write are removed. `metadata` goes into every safetensors header.
/// Returns the number of weight files.
int writeHfDirectory(const std::string &dir, const std::string &config,
                     const std::vector<Tensor> &tensors, int64_t maxShardBytes,
                     const std::map<std::string, std::string> &metadata);

/// The tensors of a Hugging Face model as exported: the parameters by name,
/// each tied one written once (under its parameter's name, which is the
/// first name transformers gives it), as save_pretrained drops the others.
/// Checks that the manifest has a model to export; `what` names the option.
const manifest::HfModel &hfModelOf(const std::optional<manifest::HfModel> &hf,
                                   const std::string &what);

/// The PEFT model a manifest records; throws unless there is one (`what`
/// names the option).
const manifest::Peft &peftOf(const std::optional<manifest::Peft> &peft,
                             const std::string &what);

/// Writes PEFT's adapter directory `dir` (created if needed) as
/// save_pretrained writes it: adapter_config.json (`peft.config`, as given)
/// and adapter_model.safetensors, each layer's a and b (found by parameter
/// name among `tensors`) under its a_key and b_key, in order, with
/// `metadata`. Each file is written atomically.
void writeAdapterDirectory(const std::string &dir, const manifest::Peft &peft,
                           const std::vector<Tensor> &tensors,
                           const std::map<std::string, std::string> &metadata);

/// The merged model of a PEFT model whose parameters are `tensors` (by
/// name, in order), as merge_and_unload gives it: each layer's base under
/// its merged_key as W + scaling * (B @ A), computed in fp32, the adapters
/// dropped, and every other parameter under its name without the prefix
/// (and without ".base_layer", where an adapted module's bias lives).
std::vector<Tensor> mergeAdapters(const manifest::Peft &peft,
                                  std::vector<Tensor> tensors);

/// The tensors a Hugging Face export writes besides `tensors`, the
/// parameters: `hf`'s buffers, with the values the step holds, and those of
/// its unused tensors that `carried` holds (as --init-from read them).
/// Returns the unused tensors it had none for.
std::vector<std::string> appendUntrained(const manifest::HfModel &hf,
                                         const std::vector<Tensor> &carried,
                                         std::vector<Tensor> &tensors);

/// The weights --init-from reads: a safetensors file, or a Hugging Face
/// directory (model.safetensors, or the shards model.safetensors.index.json
/// lists). Only the headers are read when it is opened; each wanted tensor
/// is found by matchWeights' rules (a tensor saved under a name in `tied`,
/// another name of a wanted parameter, is left unread), and read() reads
/// the byte range of the elements asked for. A Hugging Face model's (`hf`,
/// or null) tensors that are no parameter are accepted too: a buffer only
/// with the values the step holds (checked when opened), an unused tensor
/// as it is (readUnused). A fused experts tensor (`P.experts.gate_up_proj`,
/// `P.experts.down_proj`) is also read from the per-expert tensors that
/// save_pretrained writes for it (`P.experts.e.w1.weight`, ...).
class WeightFiles {
public:
  WeightFiles(const std::string &path, const std::vector<WantedTensor> &wanted,
              const std::set<std::string> &tied,
              const manifest::HfModel *hf = nullptr);
  ~WeightFiles();
  WeightFiles(const WeightFiles &) = delete;
  WeightFiles &operator=(const WeightFiles &) = delete;

  /// Elements [begin, end) of wanted tensor `w` in fp32, each checked to be
  /// finite.
  void read(size_t w, int64_t begin, int64_t end, float *dst);

  /// The unused tensors of the model that the files hold, whole, each in
  /// the dtype it is saved in, so that an export writes the same bits.
  std::vector<Tensor> readUnused();

  /// Bytes read so far: of tensor data, and of headers and the index.
  uint64_t dataBytesRead() const { return dataBytes; }
  uint64_t headerBytesRead() const { return headerBytes; }
  /// The files and their total size.
  size_t fileCount() const { return files.size(); }
  uint64_t totalBytes() const;

private:
  struct File {
    std::string path;
    int fd = -1;
    uint64_t size = 0, dataStart = 0;
  };
  /// Reads `n` bytes at `offset` of file `f`.
  void readBytes(const File &f, uint64_t offset, uint64_t n, char *dst);
  /// The whole of entry `e` of file `f` in fp32.
  std::vector<float> readAll(size_t f, const SafetensorsEntry &e);
  /// Elements [begin, end) of entry `e` of file `f` in fp32, each checked
  /// to be finite.
  void readPart(size_t f, const SafetensorsEntry &e, int64_t begin, int64_t end,
                float *dst);

  /// An entry of a file.
  struct Part {
    size_t file;
    SafetensorsEntry entry;
  };

  std::string path;
  std::vector<File> files;
  /// Per wanted tensor: the entries it is read from, its elements in order
  /// (one, or a fused experts tensor's per-expert parts).
  std::vector<std::vector<Part>> sources;
  /// The model's unused tensors found in the files: file and entry.
  std::vector<std::pair<size_t, SafetensorsEntry>> unused;
  std::vector<std::string> wantedNames;
  uint64_t dataBytes = 0, headerBytes = 0;
};

} // namespace zrt

#endif // ZERO_RT_WEIGHTFILES_H
