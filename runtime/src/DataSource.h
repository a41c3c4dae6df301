//===- DataSource.h - The training driver's input data ----------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_DATA_SOURCE_H
#define ZERO_RT_DATA_SOURCE_H

#include "Manifest.h"

#include <cstdint>
#include <memory>
#include <string>

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
};

/// Where the data is checked: rank `rank` of `world` checks its share of
/// every file, so that a bad value is found once, before the first step.
struct DataShard {
  int rank = 0, world = 1;
};

/// `rowsPerStep`: the rows of one global batch (every rank, micro step).
/// Both throw std::runtime_error when the files do not fit the model: too
/// short, or values the model cannot take (token ids or labels outside the
/// inputs' index_bound or their integer type, non-finite features);
/// `option` names the files' option in the messages.
/// --data (--eval-data): nanoGPT's uint16 token files.
std::unique_ptr<DataSource> openTokenData(const Manifest &m,
                                          const std::string &path,
                                          int64_t rowsPerStep, DataShard shard,
                                          const char *option = "--data");
/// --inputs/--labels (--eval-inputs/--eval-labels): .npy features and
/// labels.
std::unique_ptr<DataSource>
openArrayData(const Manifest &m, const std::string &xPath,
              const std::string &yPath, int64_t rowsPerStep, DataShard shard,
              const char *option = "--inputs/--labels");

} // namespace zrt

#endif // ZERO_RT_DATA_SOURCE_H
