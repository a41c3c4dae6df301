//===- ArraySource.cpp - The library's step inputs from host arrays -------===//
//
// Part of the zero-mlir project.
//
// What zrt_session_step reads: the host's arrays by input name, uploaded
// exactly as the executable uploads the rows of its data files (the same
// rows of a global batch, the same shift of labels, the same shards of a
// sequence-parallel group), so that a step on arrays is bitwise the step
// on files.
//
//===----------------------------------------------------------------------===//

#include "Data/DataSource.h"
#include "Data/Files.h"
#include "Data/Values.h"
#include "Device/Device.h"

#include <cstring>

using namespace zrt;

namespace {

/// How input `in` is laid out in a host array: the values of one row, and
/// whether a sequence-parallel rank takes a shard of each row (token ids
/// and labels) or the whole row (packed rows' positions, other inputs).
struct RowLayout {
  int64_t rowSize = 0;
  bool split = false;
};

RowLayout rowLayoutOf(const Manifest &m, const InputInfo &in) {
  int64_t perRow = in.numel() / std::max<int64_t>(in.shape[0], 1);
  int64_t sp = m.sequenceParallel;
  if (sp == 1 || !in.role)
    return {perRow, false};
  if (*in.role == manifest::IndexRole::Positions) {
    // Whole rows where the ids' rows are sharded.
    TokenInputs roles(m);
    const InputInfo &ids = m.inputs[size_t(roles.ids)];
    int64_t idsRow = ids.numel() / std::max<int64_t>(ids.shape[0], 1) * sp;
    if (holdsWholeRows(in, idsRow))
      return {perRow, false};
  }
  return {perRow * sp, true};
}

std::string shapeOfText(const std::vector<int64_t> &shape) {
  return shapeText(shape);
}

class HostArrays : public DataSource {
public:
  HostArrays(const Manifest &m, const std::vector<HostArray> &arrays,
             int64_t rowsPerStep, int64_t dataParallel, bool local)
      : m(m), local(local), rowsPerStep(rowsPerStep),
        perMicro(rowsPerStep / std::max(m.accumulationSteps, 1)) {
    for (const HostArray &a : arrays) {
      bool known = false;
      for (const InputInfo &in : m.inputs)
        known |= in.name == a.name;
      if (!known)
        throw InvalidInput("unknown input '" + a.name +
                           "'; the step's inputs are " + inputList());
      for (const HostArray &b : arrays)
        if (&b != &a && b.name == a.name)
          throw InvalidInput("input '" + a.name + "' given twice");
    }
    for (const InputInfo &in : m.inputs) {
      const HostArray *given = nullptr;
      for (const HostArray &a : arrays)
        if (a.name == in.name)
          given = &a;
      std::vector<int64_t> want =
          hostShapeOf(m, in, rowsPerStep, dataParallel, local);
      std::string dtype = hostDtypeOf(in);
      if (!given)
        throw InvalidInput("missing input '" + in.name + "' (" + dtype + " " +
                           shapeOfText(want) + ")");
      open(in, *given, want, dtype);
    }
    rows = m.inputs.empty() ? 0 : m.inputs[0].shape[0];
    TokenInputs roles(m);
    if (roles.fits(m)) {
      itemsRow = rowLayoutOf(m, m.inputs[size_t(roles.ids)]).rowSize;
      labelsRow = rowLayoutOf(m, m.inputs[size_t(roles.labels)]).rowSize;
      tokens = true;
    }
  }

  void load(zrt_ctx &ctx, int64_t first) override {
    for (Input &input : inputs)
      upload(ctx, first, input);
  }
  int64_t wholeRows() const override { return rowsPerStep; }
  int64_t itemsPerRow() const override { return itemsRow; }
  const char *unit() const override { return tokens ? "tok/s" : "samples/s"; }
  int64_t labelsPerRow() const override { return labelsRow; }
  std::string describeRows(int64_t first, int64_t count) const override {
    int64_t begin = first % rowsPerStep;
    return "rows " + std::to_string(begin) + "-" +
           std::to_string(begin + count - 1) + " of the step's arrays";
  }

private:
  struct Input {
    const InputInfo *info;
    RowLayout layout;
    const char *data;
    /// The array's integer type (null: a float input, copied as is).
    const TokenType *type;
    int64_t elementBytes;
    std::vector<char> stage;
  };

  std::string inputList() const {
    std::string names;
    for (const InputInfo &in : m.inputs)
      names += (names.empty() ? "" : ", ") + in.name;
    return names;
  }

  void open(const InputInfo &in, const HostArray &a,
            const std::vector<int64_t> &want, const std::string &dtype) {
    Input input{&in, rowLayoutOf(m, in), a.data, nullptr, 0, {}};
    std::string expected = "expected " + dtype + " " + shapeOfText(want);
    if (isIndexType(in.dtype)) {
      input.type = tokenTypeOf(a.dtype);
      if (!input.type)
        throw InvalidInput("input '" + in.name + "': " + expected +
                           " (or another integer type), got dtype " + a.dtype);
      input.elementBytes = input.type->bytes;
    } else {
      if (a.dtype != dtype)
        throw InvalidInput("input '" + in.name + "': " + expected +
                           ", got dtype " + a.dtype);
      input.elementBytes = in.elementBytes();
    }
    if (a.shape != want)
      throw InvalidInput("input '" + in.name + "': " + expected +
                         ", got shape " + shapeOfText(a.shape));
    if (!a.data && input.layout.rowSize * want[0] > 0)
      throw InvalidInput("input '" + in.name + "': no data");
    if (input.type)
      checkValues(input, want[0]);
    inputs.push_back(std::move(input));
  }

  /// Index values the model takes, in every row given.
  void checkValues(const Input &input, int64_t count) const {
    const InputInfo &in = *input.info;
    bool labels = in.role && *in.role == manifest::IndexRole::Labels;
    bool positions = in.role && *in.role == manifest::IndexRole::Positions;
    const char *values = labels ? "labels" : positions ? "positions" : "values";
    const char *range = labels      ? "classes"
                        : positions ? "positions"
                                    : "vocabulary";
    int64_t rowSize = input.layout.rowSize;
    for (int64_t i = 0; i < count * rowSize; ++i) {
      int64_t v = tokenAt(input.data + i * input.type->bytes, *input.type);
      std::string problem = indexProblem(in, v, values, range);
      if (!problem.empty())
        throw InvalidInput("input '" + in.name + "': value " +
                           std::to_string(v) + " at row " +
                           std::to_string(i / rowSize) + ", column " +
                           std::to_string(i % rowSize) + " " + problem);
    }
  }

  /// The array's row for row `r` of the micro batch that starts at global
  /// row `first`.
  int64_t arrayRow(int64_t first, int64_t r) const {
    int64_t k = first % rowsPerStep;
    if (!local)
      return k + r;
    // This rank's rows, micro step after micro step.
    return k / perMicro * rows + r;
  }

  void upload(zrt_ctx &ctx, int64_t first, Input &input) {
    const InputInfo &in = *input.info;
    input.stage.resize(size_t(in.numel() * in.elementBytes()));
    int64_t rowSize = input.layout.rowSize,
            sp = input.layout.split ? m.sequenceParallel : 1;
    int64_t segment = rowSize / sp, from = ctx.rank % sp * segment;
    bool shifted =
        m.shiftedLabels && in.role && *in.role == manifest::IndexRole::Labels;
    for (int64_t r = 0; r < rows; ++r) {
      const char *row =
          input.data + arrayRow(first, r) * rowSize * input.elementBytes;
      if (!input.type) {
        std::memcpy(input.stage.data() + r * segment * input.elementBytes,
                    row + from * input.elementBytes,
                    size_t(segment * input.elementBytes));
        continue;
      }
      for (int64_t t = 0; t < segment; ++t) {
        int64_t pos = from + t + (shifted ? 1 : 0);
        storeIndex(in, input.stage.data(), r * segment + t,
                   pos < rowSize
                       ? tokenAt(row + pos * input.type->bytes, *input.type)
                       : *in.ignoredIndex);
      }
    }
    device::upload(ctx.step + in.offset, input.stage.data(),
                   int64_t(input.stage.size()));
  }

  const Manifest &m;
  bool local;
  int64_t rowsPerStep, perMicro, rows = 0;
  std::vector<Input> inputs;
  int64_t itemsRow = 1, labelsRow = 1;
  bool tokens = false;
};

} // namespace

std::vector<int64_t> zrt::hostShapeOf(const Manifest &m, const InputInfo &in,
                                      int64_t rowsPerStep, int64_t dataParallel,
                                      bool local) {
  std::vector<int64_t> shape = in.shape;
  if (shape.empty())
    return shape;
  RowLayout layout = rowLayoutOf(m, in);
  if (layout.split && shape.size() >= 2)
    shape[1] *= m.sequenceParallel;
  shape[0] =
      local ? rowsPerStep / std::max<int64_t>(dataParallel, 1) : rowsPerStep;
  return shape;
}

std::string zrt::hostDtypeOf(const InputInfo &in) {
  if (in.dtype == "i64")
    return "<i8";
  if (in.dtype == "i32")
    return "<i4";
  if (in.dtype == "f32")
    return "<f4";
  if (in.dtype == "f16")
    return "<f2";
  // NumPy has no bfloat16: its bits as uint16 (session.h).
  if (in.dtype == "bf16")
    return "<u2";
  return in.dtype;
}

std::unique_ptr<DataSource>
zrt::openHostArrays(const Manifest &m, const std::vector<HostArray> &arrays,
                    int64_t rowsPerStep, int64_t dataParallel, bool local) {
  // What the program allows, before any array is looked at: every rank
  // refuses alike, with no collective.
  for (const InputInfo &in : m.inputs)
    if (m.shiftedLabels && in.role && *in.role == manifest::IndexRole::Labels &&
        !in.ignoredIndex)
      throw Unsupported("the model's labels are shifted over whole rows, but "
                        "no loss names their ignored index");
  if (m.sequenceParallel > 1)
    for (const InputInfo &in : m.inputs)
      if (!in.role)
        throw Unsupported(
            "input '" + in.name +
            "' is neither token ids, labels nor positions: the library "
            "splits only those over a sequence-parallel group");
  return std::make_unique<HostArrays>(m, arrays, rowsPerStep, dataParallel,
                                      local);
}
