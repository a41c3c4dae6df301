//===- DataSource.h - The training driver's input data ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DATA_SOURCE_H
#define ZERO_RT_DATA_SOURCE_H

#include "Program/Manifest.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace zrt {

/// A stream of rows (samples or token windows) that wraps around; rank r of
/// a micro batch takes `rows` consecutive rows at its offset.
class DataSource {
public:
  virtual ~DataSource() = default;
  /// Writes rows [first, first + local batch) into the inputs.
  virtual void load(zrt_ctx &ctx, int64_t first) = 0;
  /// The rows it holds before wrapping around.
  virtual int64_t wholeRows() const = 0;
  /// Items (tokens or samples) per row, and their name for throughput.
  virtual int64_t itemsPerRow() const = 0;
  virtual const char *unit() const = 0;
  /// Labels per row: what a loss without ignore_index averages over.
  virtual int64_t labelsPerRow() const = 0;
  /// Where rows [first, first + count) come from, for messages: the files
  /// and the rows (or token offsets) they read, wrapping around.
  virtual std::string describeRows(int64_t first, int64_t count) const = 0;
};

/// Where the data is checked: rank `rank` of `world` checks its share of
/// every file, so that a bad value is found once, before the first step.
struct DataShard {
  int rank = 0, world = 1;
};

/// The element type of raw token files (--data-dtype: 2 bytes, nanoGPT's
/// uint16, or 4, uint32), and whether the command line gave it.
struct RawTokenType {
  int64_t bytes = 2;
  bool given = false;
};

/// `rowsPerStep`: the rows of one global batch (every rank, micro step).
/// Both map their files and throw std::runtime_error when the files do not
/// fit the model: too short, of a type that cannot hold its vocabulary, or
/// values the model cannot take (token ids or labels outside the inputs'
/// index_bound or their integer type, but for a label its loss ignores;
/// non-finite features); `option` names the files' option in the messages.
/// --data (--eval-data): a token stream, raw tokens of `raw`'s type or a
/// 1-D .npy array of uint16, uint32, int32 or int64 tokens, fed by the
/// step's token-label convention.
std::unique_ptr<DataSource> openTokenData(const Manifest &m,
                                          const std::string &path,
                                          int64_t rowsPerStep, DataShard shard,
                                          RawTokenType raw = {},
                                          const char *option = "--data");
/// --inputs/--labels (--eval-inputs/--eval-labels): .npy features and
/// labels, or for a model whose inputs are both integer, token ids and
/// labels [N, ...] of one of the token types (labels may hold the ignored
/// index of the step's loss), and with them, for a model that reads packed
/// rows' positions, those positions [N, T] (`pPath`, --positions).
/// Arrays that do not fit the program's inputs: the library's step refuses
/// them (Python's ValueError) before anything changes.
struct InvalidInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What the library cannot do with this program (a step on arrays it does
/// not know how to split), found before anything changed, on every rank
/// alike: the call fails (ZRT_FAILED) and the session goes on.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A host array the library's step reads, row-major and contiguous; `dtype`
/// is NumPy's type string ("<i8", "<f4"; "<u2" for bf16 bits).
struct HostArray {
  std::string name, dtype;
  const char *data = nullptr;
  std::vector<int64_t> shape;
};

/// The inputs of one optimizer step from `arrays`, one per input by name:
/// the global batch of `rowsPerStep` rows, of which this rank reads the
/// rows the executable reads of a file's, or with `local` this rank's own
/// rows (its rows of each micro step in turn). Checks names, dtypes, shapes
/// and index values of every array the rank is given (throws InvalidInput);
/// the arrays must outlive the source.
std::unique_ptr<DataSource> openHostArrays(const Manifest &m,
                                           const std::vector<HostArray> &arrays,
                                           int64_t rowsPerStep,
                                           int64_t dataParallel, bool local);
/// The shape and dtype an input takes in the library: the global batch's
/// (or, with `local`, one rank's share of it).
std::vector<int64_t> hostShapeOf(const Manifest &m, const InputInfo &in,
                                 int64_t rowsPerStep, int64_t dataParallel,
                                 bool local);
std::string hostDtypeOf(const InputInfo &in);

std::unique_ptr<DataSource>
openArrayData(const Manifest &m, const std::string &xPath,
              const std::string &yPath, const std::string &pPath,
              int64_t rowsPerStep, DataShard shard,
              const char *option = "--inputs/--labels");

} // namespace zrt

#endif // ZERO_RT_DATA_SOURCE_H
