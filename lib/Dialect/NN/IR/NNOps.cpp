//===- NNOps.cpp - Compute dialect ops: verifiers and type inference ------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Interfaces/ExpertOpInterface.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::nn;

#include "zero/Dialect/NN/IR/NNOpsDialect.cpp.inc"

namespace {
/// The grouped product reads every expert's weights; its offsets come from
/// the dispatch, whose positions [T, k] say how many experts a token
/// reaches. Under expert parallelism they are the local offsets of an
/// exchange of the dispatch's offsets: the layer is still the dispatch's.
static MoeDispatchOp getLayerDispatch(GroupedMatmulOp op) {
  Operation *def = op.getOffsets().getDefiningOp();
  if (!def)
    return nullptr;
  if (auto dispatch = dyn_cast<MoeDispatchOp>(def))
    return dispatch;
  for (Value operand : def->getOperands())
    if (auto dispatch = operand.getDefiningOp<MoeDispatchOp>())
      if (operand == dispatch.getOffsets())
        return dispatch;
  return nullptr;
}

struct GroupedMatmulExpertModel
    : public zero::ExpertOpInterface::ExternalModel<GroupedMatmulExpertModel,
                                                    GroupedMatmulOp> {
  OpOperand &getExpertWeights(Operation *op) const {
    return cast<GroupedMatmulOp>(op).getWeightMutable();
  }
  int64_t getNumExperts(Operation *op) const {
    auto gm = cast<GroupedMatmulOp>(op);
    if (MoeDispatchOp dispatch = getLayerDispatch(gm))
      return dispatch.getExperts();
    return cast<RankedTensorType>(gm.getOffsets().getType()).getDimSize(0);
  }
  int64_t getExpertsPerToken(Operation *op) const {
    MoeDispatchOp dispatch = getLayerDispatch(cast<GroupedMatmulOp>(op));
    if (!dispatch)
      return 0;
    return cast<RankedTensorType>(dispatch.getPositions().getType())
        .getDimSize(1);
  }
  OpOperand &getExpertRows(Operation *op) const {
    return cast<GroupedMatmulOp>(op).getInputMutable();
  }
  OpOperand &getExpertOffsets(Operation *op) const {
    return cast<GroupedMatmulOp>(op).getOffsetsMutable();
  }
};
} // namespace

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/NN/IR/NNOps.cpp.inc"
      >();
  GroupedMatmulOp::attachInterface<GroupedMatmulExpertModel>(*getContext());
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return s;
}

static RankedTensorType ranked(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static LogicalResult requireStatic(std::optional<Location> loc, Value v,
                                   StringRef what) {
  if (!ranked(v).hasStaticShape())
    return emitOptionalError(loc, what, " must have a static shape");
  return success();
}

using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// An error emitter for type inference: reports at `loc`, or stays silent
/// when inference runs without a location (e.g. from a builder).
static auto optionalEmitter(std::optional<Location> loc) {
  return [loc]() -> InFlightDiagnostic {
    return loc ? mlir::emitError(*loc) : InFlightDiagnostic();
  };
}

/// Shape `suffix` is a suffix of `shape` (trailing broadcast).
static bool isSuffix(ArrayRef<int64_t> suffix, ArrayRef<int64_t> shape) {
  if (suffix.size() > shape.size())
    return false;
  return shape.take_back(suffix.size()) == suffix;
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = ranked(adaptor.getLhs()), rhs = ranked(adaptor.getRhs());
  if (failed(requireStatic(loc, adaptor.getLhs(), "lhs")) ||
      failed(requireStatic(loc, adaptor.getRhs(), "rhs")))
    return failure();
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lhs.getElementType(), " vs ", rhs.getElementType());
  int64_t r = lhs.getRank();
  if (r < 2)
    return emitOptionalError(loc, "lhs must have rank >= 2, got rank ", r);
  if (rhs.getRank() != 2 && rhs.getRank() != r)
    return emitOptionalError(loc, "rhs must have rank 2 or the rank of lhs (",
                             r, "), got rank ", rhs.getRank());
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  if (rhs.getRank() == r && ls.drop_back(2) != rs.drop_back(2))
    return emitOptionalError(loc, "batch dimensions differ: ",
                             shapeStr(ls.drop_back(2)), " vs ",
                             shapeStr(rs.drop_back(2)));
  int64_t m = ls[r - 2], k = ls[r - 1];
  if (adaptor.getTransposeLhs())
    std::swap(m, k);
  int64_t rr = rhs.getRank();
  int64_t k2 = rs[rr - 2], n = rs[rr - 1];
  if (adaptor.getTransposeRhs())
    std::swap(k2, n);
  if (k != k2)
    return emitOptionalError(loc, "contraction dimensions differ: lhs ",
                             shapeStr(ls), " and rhs ", shapeStr(rs),
                             " contract ", k, " with ", k2);
  // The result is often shaped like an operand (a square projection, a
  // weight's gradient): its type is then the operand's, found without
  // uniquing a new one (this runs in every verification).
  auto shapedLikeResult = [&](RankedTensorType t) {
    ArrayRef<int64_t> s = t.getShape();
    return !t.getEncoding() && static_cast<int64_t>(s.size()) == r &&
           s[r - 2] == m && s[r - 1] == n && s.drop_back(2) == ls.drop_back(2);
  };
  if (shapedLikeResult(lhs) || shapedLikeResult(rhs)) {
    inferred.push_back(shapedLikeResult(lhs) ? lhs : rhs);
    return success();
  }
  SmallVector<int64_t> shape(ls.drop_back(2));
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// AddOp / MulOp
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferBroadcast(std::optional<Location> loc, Adaptor adaptor,
                                    SmallVectorImpl<Type> &inferred) {
  auto lhs = ranked(adaptor.getLhs()), rhs = ranked(adaptor.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lhs.getElementType(), " vs ", rhs.getElementType());
  if (!isSuffix(rhs.getShape(), lhs.getShape()))
    return emitOptionalError(loc, "rhs shape ", shapeStr(rhs.getShape()),
                             " is not a suffix of lhs shape ",
                             shapeStr(lhs.getShape()),
                             " (only trailing broadcast is supported)");
  inferred.push_back(lhs);
  return success();
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, adaptor, inferred);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// LayerNormOp / RmsNormOp
//===----------------------------------------------------------------------===//

/// Checks the input rank, eps and the per-column `params` (1-D of the
/// innermost size, the input's element type). `shapeName` and `typeName`
/// name the params in the two diagnostics.
static LogicalResult checkNormParams(EmitErrorFn emitError, Value input,
                                     ArrayRef<Value> params, double eps,
                                     StringRef shapeName = "weight and bias",
                                     StringRef typeName = "weight/bias") {
  auto in = ranked(input);
  if (in.getRank() < 1)
    return emitError() << "input must have rank >= 1";
  if (!(eps > 0.0) || !std::isfinite(eps))
    return emitError() << "eps must be positive, got " << eps;
  int64_t c = in.getShape().back();
  for (Value p : params) {
    auto t = ranked(p);
    if (t.getRank() != 1 || t.getDimSize(0) != c)
      return emitError() << shapeName << " must have shape [" << c << "], got "
                         << shapeStr(t.getShape());
    if (t.getElementType() != in.getElementType())
      return emitError() << typeName << " element type " << t.getElementType()
                         << " differs from input element type "
                         << in.getElementType();
  }
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(checkNormParams(optionalEmitter(loc), adaptor.getInput(),
                             {adaptor.getWeight(), adaptor.getBias()},
                             adaptor.getEps().convertToDouble())))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return checkNormParams([&] { return emitOpError(); }, getInput(),
                         {getWeight()}, getEps().convertToDouble());
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(checkNormParams(
          optionalEmitter(loc), adaptor.getInput(), {adaptor.getWeight()},
          adaptor.getEps().convertToDouble(), "weight", "weight")))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  return checkNormParams([&] { return emitOpError(); }, getInput(),
                         {getWeight()}, getEps().convertToDouble(), "weight",
                         "weight");
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// `: type(q)` when the key has the query's type (multi-head attention),
/// else `: type(q), type(k)`. The value's type is the key's and the
/// result's the query's (AllTypesMatch).
static ParseResult parseAttentionTypes(OpAsmParser &parser, Type &query,
                                       Type &key) {
  if (parser.parseType(query))
    return failure();
  if (failed(parser.parseOptionalComma())) {
    key = query;
    return success();
  }
  return parser.parseType(key);
}

static void printAttentionTypes(OpAsmPrinter &printer, Operation *, Type query,
                                Type key) {
  printer << query;
  if (key != query)
    printer << ", " << key;
}

/// `[s0, s1, ...]`: the ALiBi slopes as f32, each read by the parser's float
/// rule, which takes a hexadecimal integer as the bit pattern (0x7FC00000
/// is a NaN, which the verifier refuses); the dense array's own parser reads
/// such a literal as 0.0.
static ParseResult parseSlopes(OpAsmParser &parser, DenseF32ArrayAttr &alibi) {
  SmallVector<float> slopes;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
            APFloat slope(0.0f);
            if (parser.parseFloat(APFloat::IEEEsingle(), slope))
              return failure();
            slopes.push_back(slope.convertToFloat());
            return success();
          }))
    return failure();
  alibi = DenseF32ArrayAttr::get(parser.getContext(), slopes);
  return success();
}

static void printSlopes(OpAsmPrinter &printer, Operation *,
                        DenseF32ArrayAttr alibi) {
  printer << "[";
  llvm::interleaveComma(alibi.asArrayRef(), printer,
                        [&](float s) { printer.printFloat(APFloat(s)); });
  printer << "]";
}

/// Key/value against query: rank 4, one element type, equal batch, seq and
/// head_dim, and kv_heads dividing heads. Key against value and query
/// against result (and the gradients) are checked by AllTypesMatch.
static LogicalResult checkAttention(EmitErrorFn emitError, Value query,
                                    Value key, std::optional<double> scale,
                                    bool causal, IntegerAttr window,
                                    FloatAttr softcap, DenseF32ArrayAttr alibi,
                                    Value sinks, Value segments) {
  auto q = ranked(query);
  auto k = ranked(key);
  if (q.getRank() != 4)
    return emitError()
           << "query must have rank 4 [batch, heads, seq, head_dim], got rank "
           << q.getRank();
  if (k.getRank() != 4)
    return emitError() << "key and value must have rank 4 [batch, kv_heads, "
                          "seq, head_dim], got rank "
                       << k.getRank();
  if (k.getElementType() != q.getElementType())
    return emitError() << "key and value element type " << k.getElementType()
                       << " differs from the query's " << q.getElementType();
  static constexpr std::pair<unsigned, StringLiteral> kSameDims[] = {
      {0, "batch"}, {2, "seq"}, {3, "head_dim"}};
  for (auto [dim, name] : kSameDims) {
    int64_t qd = q.getDimSize(dim), kd = k.getDimSize(dim);
    if (!ShapedType::isDynamic(qd) && !ShapedType::isDynamic(kd) && qd != kd)
      return emitError() << "key and value " << name << " " << kd
                         << " differs from the query's " << qd << " (key "
                         << shapeStr(k.getShape()) << ", query "
                         << shapeStr(q.getShape()) << ")";
  }
  int64_t heads = q.getDimSize(1), kvHeads = k.getDimSize(1);
  if (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(kvHeads) &&
      (kvHeads == 0 ? heads != 0 : heads % kvHeads != 0))
    return emitError() << "key and value heads " << kvHeads
                       << " must divide the query heads " << heads;
  if (scale && (!(*scale > 0.0) || !std::isfinite(*scale)))
    return emitError() << "scale must be positive, got " << *scale;
  if (window) {
    // A window only narrows the causal mask's past.
    if (!causal)
      return emitError() << "window requires causal";
    if (window.getInt() < 1)
      return emitError() << "window must be at least 1, got "
                         << window.getInt();
  }
  if (softcap) {
    double c = softcap.getValueAsDouble();
    if (!(c > 0.0) || !std::isfinite(c))
      return emitError() << "softcap must be positive, got " << c;
  }
  if (alibi) {
    // The kernels read one slope per query head.
    if (!ShapedType::isDynamic(heads) && alibi.size() != heads)
      return emitError() << "alibi has " << alibi.size()
                         << " slopes for the query's " << heads << " heads";
    for (float s : alibi.asArrayRef())
      if (!std::isfinite(s))
        return emitError() << "alibi slope " << s << " is not finite";
  }
  if (sinks) {
    // The sinks' kernels are plain f32 loops without the softcap or ALiBi
    // terms (gpt-oss uses neither).
    int64_t n = ranked(sinks).getDimSize(0);
    if (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(n) &&
        n != heads)
      return emitError() << "sinks has " << n << " logits for the query's "
                         << heads << " heads";
    if (!q.getElementType().isF32())
      return emitError() << "sinks need f32 tensors, got "
                         << q.getElementType();
    if (softcap || alibi)
      return emitError() << "sinks with softcap or alibi are not supported";
  }
  if (segments) {
    // One document id per token of each row.
    ArrayRef<int64_t> ids = ranked(segments).getShape();
    for (auto [dim, qdim, name] :
         {std::tuple(0, 0, "batch"), std::tuple(1, 2, "seq")}) {
      int64_t sd = ids[dim], qd = q.getDimSize(qdim);
      if (!ShapedType::isDynamic(sd) && !ShapedType::isDynamic(qd) && sd != qd)
        return emitError() << "segments " << shapeStr(ids) << " have " << name
                           << " " << sd << ", the query's is " << qd
                           << " (one document id per token: [batch, seq])";
    }
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  std::optional<double> scale;
  if (auto s = getScaleAttr())
    scale = s.getValueAsDouble();
  return checkAttention([&] { return emitOpError(); }, getQuery(), getKey(),
                        scale, getCausal(), getWindowAttr(), getSoftcapAttr(),
                        getAlibiAttr(), getSinks(), getSegments());
}

double AttentionOp::getScaleValue() {
  if (auto s = getScaleAttr())
    return s.getValueAsDouble();
  return 1.0 / std::sqrt(static_cast<double>(
                   getQuery().getType().getShape().back()));
}

LogicalResult AttentionGradOp::verify() {
  return checkAttention([&] { return emitOpError(); }, getQuery(), getKey(),
                        getScale().convertToDouble(), getCausal(),
                        getWindowAttr(), getSoftcapAttr(), getAlibiAttr(),
                        getSinks(), getSegments());
}

LogicalResult AttentionSinksGradOp::verify() {
  return checkAttention([&] { return emitOpError(); }, getQuery(), getKey(),
                        getScale().convertToDouble(), getCausal(),
                        getWindowAttr(), nullptr, nullptr, getSinks(),
                        getSegments());
}

LogicalResult ClampedSwigluOp::verify() {
  double limit = getLimit().convertToDouble();
  double alpha = getAlpha().convertToDouble();
  if (!(limit > 0.0) || !std::isfinite(limit))
    return emitOpError("limit must be positive, got ") << limit;
  if (!std::isfinite(alpha))
    return emitOpError("alpha must be finite, got ") << alpha;
  return success();
}

/// xIELU's coefficients are one element each of the input's type (the
/// kernels read alpha[0]); beta and eps are finite.
static LogicalResult checkXielu(Operation *op, Value input, Value alpha,
                                APFloat beta, APFloat eps) {
  auto a = ranked(alpha);
  if (a.getShape() != ArrayRef<int64_t>{1})
    return op->emitOpError("alpha_p and alpha_n must have shape [1], got ")
           << a;
  if (a.getElementType() != ranked(input).getElementType())
    return op->emitOpError("alpha_p and alpha_n must have the input's "
                           "element type, got ")
           << a.getElementType();
  if (!beta.isFinite())
    return op->emitOpError("beta must be finite, got ")
           << beta.convertToDouble();
  if (!eps.isFinite())
    return op->emitOpError("eps must be finite, got ") << eps.convertToDouble();
  return success();
}

LogicalResult XieluOp::verify() {
  return checkXielu(*this, getInput(), getAlphaP(), getBeta(), getEps());
}

LogicalResult XieluGradOp::verify() {
  return checkXielu(*this, getInput(), getAlphaP(), getBeta(), getEps());
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto table = ranked(adaptor.getTable());
  auto ids = ranked(adaptor.getIds());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "table must have rank 2 [vocab, dim], got rank ",
                             table.getRank());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

/// A static dimension as an index bound.
static std::optional<int64_t> boundOfDim(Value v, int64_t dim) {
  auto t = ranked(v);
  if (t.getRank() == 0)
    return std::nullopt;
  int64_t d = t.getDimSize(dim < 0 ? t.getRank() + dim : dim);
  return ShapedType::isDynamic(d) ? std::nullopt : std::optional<int64_t>(d);
}

/// A padding extent (`rows`, `classes`, `columns`, `contract`) must leave
/// some padding and some valid entries: 0 < valid < size.
static LogicalResult checkValidExtent(Operation *op, StringRef name,
                                      std::optional<int64_t> valid,
                                      int64_t size, StringRef what) {
  if (!valid)
    return success();
  if (*valid <= 0 || *valid >= size)
    return op->emitOpError(name) << " must lie in [1, " << size << "), the "
                                 << what << " without padding; got " << *valid;
  return success();
}

LogicalResult MatmulOp::verify() {
  auto lhs = ranked(getLhs()), result = ranked(getResult());
  // Shapes that do not multiply are the type inference's error.
  if (lhs.getRank() < 2 || result.getRank() < 2)
    return success();
  int64_t k = lhs.getShape()[lhs.getRank() - (getTransposeLhs() ? 2 : 1)];
  if (failed(checkValidExtent(*this, "columns", getColumns(),
                              result.getShape().back(), "result's columns")))
    return failure();
  return checkValidExtent(*this, "contract", getContract(), k,
                          "contraction's extent");
}

/// padding_idx, if any, names one of the `rows` rows ids may select.
static LogicalResult checkPaddingIdx(Operation *op,
                                     std::optional<int64_t> paddingIdx,
                                     int64_t rows) {
  if (paddingIdx && (*paddingIdx < 0 || *paddingIdx >= rows))
    return op->emitOpError("padding_idx must lie in [0, ")
           << rows << "), the rows ids select; got " << *paddingIdx;
  return success();
}

LogicalResult EmbeddingOp::verify() {
  // A table of another rank is the type inference's error.
  if (ranked(getTable()).getRank() != 2)
    return success();
  int64_t rows = ranked(getTable()).getDimSize(0);
  if (failed(checkValidExtent(*this, "rows", getRows(), rows, "table's rows")))
    return failure();
  return checkPaddingIdx(*this, getPaddingIdx(), getRows().value_or(rows));
}

std::optional<int64_t> EmbeddingOp::getIndexBound(OpOperand &operand) {
  if (&operand != &getIdsMutable())
    return std::nullopt;
  if (std::optional<int64_t> rows = getRows())
    return rows;
  return boundOfDim(getTable(), 0);
}

std::optional<int64_t> EmbeddingGradOp::getIndexBound(OpOperand &operand) {
  return &operand == &getIdsMutable() ? boundOfDim(getResult(), 0)
                                      : std::nullopt;
}

LogicalResult EmbeddingGradOp::verify() {
  auto dy = ranked(getResultGrad());
  auto ids = ranked(getIds());
  auto table = ranked(getResult());
  if (table.getRank() != 2)
    return emitOpError("result must have rank 2 [vocab, dim], got rank ")
           << table.getRank();
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  if (dy.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("result_grad shape ")
           << shapeStr(dy.getShape()) << " must be ids shape + [dim] = "
           << shapeStr(shape);
  if (dy.getElementType() != table.getElementType())
    return emitOpError("element types of result_grad and result differ: ")
           << dy.getElementType() << " vs " << table.getElementType();
  return checkPaddingIdx(*this, getPaddingIdx(), table.getDimSize(0));
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

Value ReshapeOp::getViewSource() { return getInput(); }

LogicalResult ReshapeOp::verify() {
  auto in = ranked(getInput()), out = ranked(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type must be preserved, got ")
           << in.getElementType() << " -> " << out.getElementType();
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return emitOpError("shapes must be static");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("element count must be preserved: ")
           << shapeStr(in.getShape()) << " has " << in.getNumElements()
           << " elements, " << shapeStr(out.getShape()) << " has "
           << out.getNumElements();
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = ranked(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for an input of rank ", in.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "permutation ", shapeStr(perm),
                               " is not a permutation of [0, ", in.getRank(),
                               ")");
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = ranked(inputs.front());
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of bounds [0, ",
                             first.getRank(), ")");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : inputs) {
    auto t = ranked(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "inputs must have the same rank and element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "inputs differ in dimension ", d,
                                 " which is not the concatenation axis");
    shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Loss, casts, constants, reductions
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto logits = ranked(adaptor.getLogits()), labels = ranked(adaptor.getLabels());
  if (logits.getRank() < 1)
    return emitOptionalError(loc, "logits must have rank >= 1");
  if (labels.getShape() != logits.getShape().drop_back())
    return emitOptionalError(loc, "labels shape ", shapeStr(labels.getShape()),
                             " must be the logits shape without its class "
                             "dimension, ",
                             shapeStr(logits.getShape().drop_back()));
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

/// The classes of a loss over `logits`: `classes`, or the last dimension.
static int64_t numClasses(Value logits, std::optional<int64_t> classes) {
  return classes ? *classes : ranked(logits).getShape().back();
}

int64_t SoftmaxCrossEntropyOp::getNumClasses() {
  return numClasses(getLogits(), getClasses());
}

int64_t SoftmaxCrossEntropyGradOp::getNumClasses() {
  return numClasses(getLogits(), getClasses());
}

/// An ignored label (or a shift's fill) must be a value the labels' integer
/// type can hold, or no position could ever be ignored.
static LogicalResult checkIgnoreIndex(Operation *op, Value labels,
                                      std::optional<int64_t> ignoreIndex,
                                      StringRef name = "ignore_index") {
  if (!ignoreIndex)
    return success();
  unsigned width = ranked(labels).getElementType().getIntOrFloatBitWidth();
  if (width < 64 && (*ignoreIndex < -(int64_t(1) << (width - 1)) ||
                     *ignoreIndex >= (int64_t(1) << (width - 1))))
    return op->emitOpError() << name << " " << *ignoreIndex
                             << " does not fit the labels' i" << width;
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  if (failed(checkIgnoreIndex(*this, getLabels(), getIgnoreIndex())))
    return failure();
  // Scalar logits are the type inference's error.
  if (ranked(getLogits()).getRank() < 1)
    return success();
  return checkValidExtent(*this, "classes", getClasses(),
                          ranked(getLogits()).getShape().back(),
                          "logits' last dimension");
}

std::optional<int64_t>
SoftmaxCrossEntropyOp::getIndexBound(OpOperand &operand) {
  return &operand == &getLabelsMutable()
             ? std::optional<int64_t>(getNumClasses())
             : std::nullopt;
}

std::optional<int64_t>
SoftmaxCrossEntropyGradOp::getIndexBound(OpOperand &operand) {
  return &operand == &getLabelsMutable()
             ? std::optional<int64_t>(getNumClasses())
             : std::nullopt;
}

std::optional<int64_t>
SoftmaxCrossEntropyOp::getIgnoredIndex(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? getIgnoreIndex() : std::nullopt;
}

std::optional<int64_t>
SoftmaxCrossEntropyGradOp::getIgnoredIndex(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? getIgnoreIndex() : std::nullopt;
}

zero::IndexRole SoftmaxCrossEntropyOp::getIndexRole(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? zero::IndexRole::label
                                         : zero::IndexRole::none;
}

zero::IndexRole SoftmaxCrossEntropyGradOp::getIndexRole(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? zero::IndexRole::label
                                         : zero::IndexRole::none;
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  auto logits = ranked(getLogits()), labels = ranked(getLabels());
  if (logits.getRank() < 1)
    return emitOpError("logits must have rank >= 1");
  if (labels.getShape() != logits.getShape().drop_back())
    return emitOpError("labels shape ")
           << shapeStr(labels.getShape())
           << " must be the logits shape without its class dimension, "
           << shapeStr(logits.getShape().drop_back());
  if (getResult().getType() != logits)
    return emitOpError("result type must equal the logits type");
  if (failed(checkIgnoreIndex(*this, getLabels(), getIgnoreIndex())))
    return failure();
  return checkValidExtent(*this, "classes", getClasses(),
                          logits.getShape().back(), "logits' last dimension");
}

LogicalResult
LinearCrossEntropyOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location>, Adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

/// The operands of a chunked output projection and loss: input [..., H],
/// weight [V, H], labels the input's shape without H, a positive chunk.
static LogicalResult verifyLinearLoss(Operation *op, Value input, Value weight,
                                      Value labels, int64_t chunk,
                                      std::optional<int64_t> ignoreIndex) {
  auto x = ranked(input), w = ranked(weight), l = ranked(labels);
  if (x.getRank() < 2)
    return op->emitOpError("input must have rank >= 2, got ") << x.getRank();
  if (w.getRank() != 2)
    return op->emitOpError("weight must be a [vocab, hidden] matrix, got ")
           << shapeStr(w.getShape());
  if (w.getDimSize(1) != x.getShape().back())
    return op->emitOpError("weight ")
           << shapeStr(w.getShape()) << " must have the input's hidden size "
           << x.getShape().back() << " as its second dimension";
  if (w.getDimSize(0) < 1)
    return op->emitOpError("weight must have at least one row (class)");
  if (l.getShape() != x.getShape().drop_back())
    return op->emitOpError("labels shape ")
           << shapeStr(l.getShape())
           << " must be the input shape without its hidden dimension, "
           << shapeStr(x.getShape().drop_back());
  if (x.getElementType() != w.getElementType())
    return op->emitOpError("input and weight must have one element type, got ")
           << x.getElementType() << " input and " << w.getElementType()
           << " weight";
  if (chunk < 1)
    return op->emitOpError("chunk must be at least 1, got ") << chunk;
  return checkIgnoreIndex(op, labels, ignoreIndex);
}

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyLinearLoss(*this, getInput(), getWeight(), getLabels(),
                          getChunk(), getIgnoreIndex());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  return verifyLinearLoss(*this, getInput(), getWeight(), getLabels(),
                          getChunk(), getIgnoreIndex());
}

std::optional<int64_t> LinearCrossEntropyOp::getIndexBound(OpOperand &operand) {
  return &operand == &getLabelsMutable()
             ? std::optional<int64_t>(ranked(getWeight()).getDimSize(0))
             : std::nullopt;
}

std::optional<int64_t>
LinearCrossEntropyGradOp::getIndexBound(OpOperand &operand) {
  return &operand == &getLabelsMutable()
             ? std::optional<int64_t>(ranked(getWeight()).getDimSize(0))
             : std::nullopt;
}

std::optional<int64_t>
LinearCrossEntropyOp::getIgnoredIndex(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? getIgnoreIndex() : std::nullopt;
}

std::optional<int64_t>
LinearCrossEntropyGradOp::getIgnoredIndex(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? getIgnoreIndex() : std::nullopt;
}

zero::IndexRole LinearCrossEntropyOp::getIndexRole(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? zero::IndexRole::label
                                         : zero::IndexRole::none;
}

zero::IndexRole LinearCrossEntropyGradOp::getIndexRole(OpOperand &operand) {
  return &operand == &getLabelsMutable() ? zero::IndexRole::label
                                         : zero::IndexRole::none;
}

/// The operands of a tiled SwiGLU MLP: input [..., H], gate and up weights
/// [I, H], down weight [H, I], f32, a positive tile count.
static LogicalResult verifyTiledMlp(Operation *op, Value input, Value gate,
                                    Value down, int64_t tiles) {
  auto x = ranked(input), g = ranked(gate), d = ranked(down);
  if (x.getRank() < 2)
    return op->emitOpError("input must have rank >= 2, got ") << x.getRank();
  int64_t hidden = x.getShape().back();
  if (g.getRank() != 2 || g.getDimSize(1) != hidden)
    return op->emitOpError("gate and up weights must be [intermediate, ")
           << hidden << "] matrices (the input's hidden size last), got "
           << shapeStr(g.getShape());
  if (d.getRank() != 2 || d.getDimSize(0) != hidden ||
      d.getDimSize(1) != g.getDimSize(0))
    return op->emitOpError("down weight must be [")
           << hidden << ", " << g.getDimSize(0)
           << "] (hidden, intermediate), got " << shapeStr(d.getShape());
  if (!x.getElementType().isF32() || !g.getElementType().isF32() ||
      !d.getElementType().isF32())
    return op->emitOpError("computes in f32 only, got ")
           << x.getElementType() << " input and " << g.getElementType()
           << " weights (the 16-bit weight gradients would need fp32 "
              "accumulators of the weights' size)";
  if (tiles < 1)
    return op->emitOpError("tiles must be at least 1, got ") << tiles;
  return success();
}

LogicalResult TiledMlpOp::verify() {
  return verifyTiledMlp(*this, getInput(), getGateWeight(), getDownWeight(),
                        getTiles());
}

LogicalResult TiledMlpGradOp::verify() {
  return verifyTiledMlp(*this, getInput(), getGateWeight(), getDownWeight(),
                        getTiles());
}

/// The shift runs along the last dimension, so there must be one.
LogicalResult DocumentIdsOp::inferReturnTypes(MLIRContext *ctx,
                                              std::optional<Location>,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto positions = cast<RankedTensorType>(adaptor.getPositions().getType());
  inferred.push_back(
      RankedTensorType::get(positions.getShape(), IntegerType::get(ctx, 32)));
  return success();
}

// A packed row's positions restart at each document and stay below its
// length.
std::optional<int64_t> DocumentIdsOp::getIndexBound(OpOperand &) {
  int64_t seq = ranked(getPositions()).getDimSize(1);
  return ShapedType::isDynamic(seq) ? std::nullopt : std::optional(seq);
}

zero::IndexRole DocumentIdsOp::getIndexRole(OpOperand &) {
  return zero::IndexRole::position;
}

LogicalResult ShiftLabelsOp::verify() {
  if (ranked(getLabels()).getRank() < 1)
    return emitOpError("labels must have rank >= 1 (the shift is along the "
                       "last dimension)");
  return checkIgnoreIndex(*this, getLabels(), getFill(), "fill");
}

// The shifted labels are the ones read as indices: the input's values must
// lie where the result's users need theirs, and may be the value they
// ignore.
std::optional<int64_t> ShiftLabelsOp::getIndexBound(OpOperand &) {
  return zero::getIndexBound(getResult());
}

std::optional<int64_t> ShiftLabelsOp::getIgnoredIndex(OpOperand &) {
  return zero::getIgnoredIndex(getResult());
}

zero::IndexRole ShiftLabelsOp::getIndexRole(OpOperand &) {
  return zero::getIndexRole(getResult());
}

LogicalResult CastOp::verify() {
  auto in = ranked(getInput()), out = ranked(getResult());
  if (in.getShape() != out.getShape())
    return emitOpError("shape must be preserved: ")
           << shapeStr(in.getShape()) << " vs " << shapeStr(out.getShape());
  return success();
}

/// Softmax runs over the last dimension, so there must be one.
LogicalResult SoftmaxOp::verify() {
  if (ranked(getInput()).getRank() < 1)
    return emitOpError("input must have rank >= 1 (softmax is over the last "
                       "dimension)");
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  if (ranked(getForward()).getRank() < 1)
    return emitOpError("forward must have rank >= 1 (softmax is over the last "
                       "dimension)");
  return success();
}

/// The rotation pairs the two halves of the innermost (head) dimension of a
/// [batch, heads, seq, head_dim] tensor, or its neighbours when interleaved,
/// and takes positions along seq, with theta's frequencies or a table of one
/// per pair.
LogicalResult RopeOp::verify() {
  auto in = ranked(getInput());
  if (in.getRank() != 4)
    return emitOpError("input must have rank 4 [batch, heads, seq, head_dim], "
                       "got rank ")
           << in.getRank();
  int64_t headDim = in.getDimSize(3);
  if (ShapedType::isDynamic(headDim))
    return emitOpError("head_dim must be static");
  if (headDim % 2 != 0)
    return emitOpError("head_dim must be even (")
           << (getInterleaved() ? "its neighbours" : "its halves")
           << " are rotated in pairs), got " << headDim;
  if (getTheta().has_value() == getInvFreq().has_value())
    return emitOpError("needs exactly one of theta and inv_freq");
  if (getTheta()) {
    double theta = getTheta()->convertToDouble();
    if (!(theta > 0.0) || !std::isfinite(theta))
      return emitOpError("theta must be positive and finite, got ") << theta;
  } else {
    SmallVector<float> table = getInvFreqValues();
    if (static_cast<int64_t>(table.size()) != headDim / 2)
      return emitOpError("inv_freq must hold one value per rotated pair (")
             << headDim / 2 << "), got " << table.size();
    for (auto [i, f] : llvm::enumerate(table))
      if (!std::isfinite(f))
        return emitOpError("inv_freq[") << i << "] must be finite, got " << f;
  }
  double scale = getScaleOrOne();
  if (!(scale > 0.0) || !std::isfinite(scale))
    return emitOpError("scale must be positive and finite, got ") << scale;
  if (Value positions = getPositions()) {
    // One position per row of each batch entry: [batch, seq].
    ArrayRef<int64_t> pos = ranked(positions).getShape();
    for (auto [dim, xdim] : {std::pair(0, 0), std::pair(1, 2)})
      if (!ShapedType::isDynamic(pos[dim]) &&
          !ShapedType::isDynamic(in.getDimSize(xdim)) &&
          pos[dim] != in.getDimSize(xdim))
        return emitOpError("positions ")
               << shapeStr(pos) << " must be [batch, seq] of the input "
               << shapeStr(in.getShape());
  }
  return success();
}

/// Positions are read as integers >= 0, with no bound: a rotation has no
/// table.
std::optional<int64_t> RopeOp::getIndexBound(OpOperand &) {
  return std::nullopt;
}

zero::IndexRole RopeOp::getIndexRole(OpOperand &operand) {
  return getPositions() && &operand == &getPositionsMutable()[0]
             ? zero::IndexRole::position
             : zero::IndexRole::none;
}

LogicalResult ScaleOp::verify() {
  if (!std::isfinite(getFactor().convertToDouble()))
    return emitOpError("factor must be finite, got ")
           << getFactor().convertToDouble();
  return success();
}

LogicalResult FillOp::verify() {
  if (!getResult().getType().hasStaticShape())
    return emitOpError("result must have a static shape");
  if (!std::isfinite(getValue().convertToDouble()))
    return emitOpError("fill value must be finite, got ")
           << getValue().convertToDouble();
  return success();
}

LogicalResult ReduceSumOp::verify() {
  auto in = ranked(getInput()), out = ranked(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types differ: ")
           << in.getElementType() << " vs " << out.getElementType();
  if (!isSuffix(out.getShape(), in.getShape()))
    return emitOpError("result shape ")
           << shapeStr(out.getShape()) << " must be a suffix of input shape "
           << shapeStr(in.getShape());
  return success();
}

LogicalResult ReduceSumGradOp::verify() {
  auto in = ranked(getInput()), dy = ranked(getResultGrad());
  if (in.getElementType() != dy.getElementType())
    return emitOpError("element types differ: ")
           << in.getElementType() << " vs " << dy.getElementType();
  if (!isSuffix(dy.getShape(), in.getShape()))
    return emitOpError("gradient shape ")
           << shapeStr(dy.getShape()) << " must be a suffix of input shape "
           << shapeStr(in.getShape());
  return success();
}

/// beta divides the softplus, so it must be positive; both are finite.
static LogicalResult checkSoftplus(Operation *op, APFloat beta,
                                   APFloat threshold) {
  double b = beta.convertToDouble(), t = threshold.convertToDouble();
  if (!(b > 0.0) || !std::isfinite(b))
    return op->emitOpError("beta must be positive and finite, got ") << b;
  if (!std::isfinite(t))
    return op->emitOpError("threshold must be finite, got ") << t;
  return success();
}

LogicalResult SoftplusOp::verify() {
  return checkSoftplus(*this, getBeta(), getThreshold());
}

LogicalResult SoftplusGradOp::verify() {
  return checkSoftplus(*this, getBeta(), getThreshold());
}

/// A reduction over the last dimension: [..., N] -> [...], N >= 1 (torch's
/// amax refuses an empty one).
static FailureOr<RankedTensorType>
inferLastAxisReduction(std::optional<Location> loc, Value input) {
  auto in = ranked(input);
  if (in.getRank() < 1)
    return emitOptionalError(loc, "input must have rank >= 1 (the reduction "
                                  "is over the last dimension)");
  if (in.getShape().back() == 0)
    return emitOptionalError(loc, "the last dimension must not be empty");
  return RankedTensorType::get(in.getShape().drop_back(), in.getElementType());
}

LogicalResult LogsumexpOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = inferLastAxisReduction(loc, adaptor.getInput());
  if (failed(type))
    return failure();
  inferred.push_back(*type);
  return success();
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = inferLastAxisReduction(loc, adaptor.getInput());
  if (failed(type))
    return failure();
  inferred.push_back(*type);
  return success();
}

/// The backward of a reduction over the last dimension: its forward result
/// (and that result's gradient) is the reduction of its input.
static LogicalResult verifyLastAxisReductionGrad(Operation *op, Value input,
                                                 Value output) {
  auto in = ranked(input);
  if (in.getRank() < 1 || in.getShape().back() == 0)
    return op->emitOpError("input must have a non-empty last dimension (the "
                           "reduction is over it), got ")
           << in;
  auto want =
      RankedTensorType::get(in.getShape().drop_back(), in.getElementType());
  if (ranked(output) != want)
    return op->emitOpError("output type ")
           << output.getType() << " must be the input's without its last "
           << "dimension, " << want;
  return success();
}

LogicalResult LogsumexpGradOp::verify() {
  return verifyLastAxisReductionGrad(*this, getInput(), getOutput());
}

LogicalResult ReduceMaxGradOp::verify() {
  return verifyLastAxisReductionGrad(*this, getInput(), getOutput());
}

//===----------------------------------------------------------------------===//
// Split verification (results are explicit)
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::verify() {
  SplitOp op = *this;
  {
    auto in = ranked(op.getInput());
    int64_t axis = static_cast<int64_t>(op.getAxis());
    if (axis < 0 || axis >= in.getRank())
      return op.emitOpError("axis ")
             << axis << " is out of bounds [0, " << in.getRank() << ")";
    int64_t parts = op.getNumResults();
    if (parts < 1)
      return op.emitOpError("needs at least one result");
    if (in.isDynamicDim(axis))
      return op.emitOpError("dimension ")
             << axis << " must be static to be split";
    int64_t total = 0;
    for (Type t : op.getResultTypes()) {
      auto r = cast<RankedTensorType>(t);
      SmallVector<int64_t> shape(in.getShape());
      shape[axis] = r.getRank() == in.getRank() ? r.getDimSize(axis) : 0;
      auto expected = RankedTensorType::get(shape, in.getElementType());
      if (r != expected || shape[axis] < 1)
        return op.emitOpError("each result must be the input's type with a "
                              "positive size along axis ")
               << axis << ", got " << t;
      total += shape[axis];
    }
    if (total != in.getDimSize(axis))
      return op.emitOpError("results add up to ")
             << total << " along axis " << axis << ", the input has "
             << in.getDimSize(axis);
    return success();
  }
}

#define GET_OP_CLASSES
#include "zero/Dialect/NN/IR/NNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// PaddingOpInterface
//===----------------------------------------------------------------------===//

/// `type` with dimension `dim` of size `size`.
static RankedTensorType withDimSize(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[size_t(dim)] = size;
  return t.clone(shape);
}

/// A shared rank-2 weight's column dimension (its rows when transposed)
/// is the result's last one: padding it pads the result's columns.
FailureOr<zero::PaddingEffect> MatmulOp::getPaddingEffect(OpOperand &operand,
                                                          int64_t dim) {
  if (&operand != &getRhsMutable() || ranked(getRhs()).getRank() != 2 ||
      dim != (getTransposeRhs() ? 0 : 1))
    return failure();
  zero::PaddingEffect effect;
  effect.paddedResults.push_back({0, ranked(getResult()).getRank() - 1});
  return effect;
}

void MatmulOp::padOperand(OpOperand &operand, int64_t dim, int64_t size) {
  auto result = ranked(getResult());
  getResult().setType(withDimSize(result, result.getRank() - 1,
                                  ranked(operand.get()).getDimSize(dim)));
  if (!getColumns())
    setColumns(size);
}

/// The ids never select a padded row: the lookup is unchanged.
FailureOr<zero::PaddingEffect> EmbeddingOp::getPaddingEffect(OpOperand &operand,
                                                             int64_t dim) {
  if (&operand != &getTableMutable() || dim != 0)
    return failure();
  return zero::PaddingEffect();
}

void EmbeddingOp::padOperand(OpOperand &, int64_t, int64_t size) {
  if (!getRows())
    setRows(size);
}

FailureOr<zero::PaddingEffect>
SoftmaxCrossEntropyOp::getPaddingEffect(OpOperand &operand, int64_t dim) {
  if (&operand != &getLogitsMutable() ||
      dim != ranked(getLogits()).getRank() - 1 || getClasses())
    return failure();
  zero::PaddingEffect effect;
  effect.masks = true;
  return effect;
}

void SoftmaxCrossEntropyOp::padOperand(OpOperand &, int64_t, int64_t size) {
  setClasses(size);
}

//===----------------------------------------------------------------------===//
// Bias fusion
//===----------------------------------------------------------------------===//

/// The bias's shape must be a suffix of the input's, as nn.add's rhs.
static LogicalResult verifyBias(Operation *op, Value input, Value bias) {
  ArrayRef<int64_t> is = ranked(input).getShape(), bs = ranked(bias).getShape();
  if (!isSuffix(bs, is))
    return op->emitOpError("bias shape ")
           << shapeStr(bs) << " is not a suffix of input shape "
           << shapeStr(is);
  return success();
}

LogicalResult BiasGeluOp::verify() {
  return verifyBias(*this, getInput(), getBias());
}

LogicalResult BiasGeluGradOp::verify() {
  return verifyBias(*this, getInput(), getBias());
}

bool GeluOp::canAbsorbBias(OpOperand &operand) {
  return &operand == &getInputMutable();
}

ValueRange GeluOp::buildWithBias(OpBuilder &b, OpOperand &, Value input,
                                 Value bias) {
  return BiasGeluOp::create(b, getLoc(), input, bias)->getResults();
}

/// The forward input only: the incoming gradient is not a GELU's input.
bool GeluGradOp::canAbsorbBias(OpOperand &operand) {
  return &operand == &getForwardMutable();
}

ValueRange GeluGradOp::buildWithBias(OpBuilder &b, OpOperand &, Value input,
                                     Value bias) {
  return BiasGeluGradOp::create(b, getLoc(), input, bias, getResultGrad())
      ->getResults();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// `v` has static shape `shape`; `what` names it in the error.
static LogicalResult expectShape(Operation *op, Value v, StringRef what,
                                 ArrayRef<int64_t> shape) {
  auto t = ranked(v);
  if (!t.hasStaticShape() || t.getShape() != shape)
    return op->emitOpError() << what << " must have shape " << shapeStr(shape)
                             << ", got " << shapeStr(t.getShape());
  return success();
}

/// `v` is a static matrix: its [rows, cols].
static FailureOr<std::pair<int64_t, int64_t>>
matrixShape(Operation *op, Value v, StringRef what) {
  auto t = ranked(v);
  if (t.getRank() != 2 || !t.hasStaticShape())
    return op->emitOpError() << what << " must be a static matrix, got "
                             << shapeStr(t.getShape());
  return std::make_pair(t.getDimSize(0), t.getDimSize(1));
}

static LogicalResult sameElementType(Operation *op, Value a, StringRef aName,
                                     Value b, StringRef bName) {
  if (ranked(a).getElementType() != ranked(b).getElementType())
    return op->emitOpError() << "element types of " << aName << " and " << bName
                             << " differ: " << ranked(a).getElementType()
                             << " vs " << ranked(b).getElementType();
  return success();
}

/// The routing attributes shared by the router and its gradient.
static LogicalResult verifyRouting(Operation *op, std::optional<APFloat> scale,
                                   std::optional<APFloat> eps) {
  if (eps) {
    double e = eps->convertToDouble();
    if (!(std::isfinite(e) && e >= 0))
      return op->emitOpError("eps must be finite and non-negative, got ") << e;
  }
  if (!scale)
    return success();
  double s = scale->convertToDouble();
  if (!(std::isfinite(s) && s > 0))
    return op->emitOpError("scale must be finite and positive, got ") << s;
  return success();
}

/// `v` is a static matrix: its [rows, cols] (type inference's form).
static FailureOr<std::pair<int64_t, int64_t>>
inferMatrix(std::optional<Location> loc, Value v, StringRef what) {
  auto t = ranked(v);
  if (t.getRank() != 2 || !t.hasStaticShape())
    return emitOptionalError(loc, what, " must be a static matrix, got ",
                             shapeStr(t.getShape()));
  return std::make_pair(t.getDimSize(0), t.getDimSize(1));
}

// The MoE ops' results have a row per token or per (token, expert) pair, so
// a divided batch (fewer tokens) re-infers them: S = tokens * k follows.

LogicalResult MoeRouterOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto shape = inferMatrix(loc, adaptor.getLogits(), "logits");
  if (failed(shape))
    return failure();
  auto [tokens, experts] = *shape;
  int64_t k = adaptor.getTopK();
  if (k < 1 || k > experts)
    return emitOptionalError(loc, "top_k must lie in [1, ", experts,
                             "] (the experts), got ", k);
  inferred.push_back(RankedTensorType::get(
      {tokens, k}, ranked(adaptor.getLogits()).getElementType()));
  inferred.push_back(
      RankedTensorType::get({tokens, k}, IntegerType::get(context, 32)));
  return success();
}

LogicalResult MoeDispatchOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto in = inferMatrix(loc, adaptor.getInput(), "input");
  auto sel = inferMatrix(loc, adaptor.getIndices(), "indices");
  if (failed(in) || failed(sel))
    return failure();
  if (sel->first != in->first)
    return emitOptionalError(loc, "indices must have a row per input row (",
                             in->first, "), got ", sel->first);
  int64_t experts = adaptor.getExperts();
  if (experts < 1)
    return emitOptionalError(loc, "experts must be positive, got ", experts);
  auto idx = ranked(adaptor.getIndices());
  inferred.push_back(
      RankedTensorType::get({in->first * sel->second, in->second},
                            ranked(adaptor.getInput()).getElementType()));
  inferred.push_back(idx);
  inferred.push_back(RankedTensorType::get({experts}, idx.getElementType()));
  return success();
}

LogicalResult MoeDispatchGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto rows = inferMatrix(loc, adaptor.getRowsGrad(), "rows_grad");
  auto pos = inferMatrix(loc, adaptor.getPositions(), "positions");
  if (failed(rows) || failed(pos))
    return failure();
  inferred.push_back(
      RankedTensorType::get({pos->first, rows->second},
                            ranked(adaptor.getRowsGrad()).getElementType()));
  return success();
}

LogicalResult GroupedMatmulOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto in = inferMatrix(loc, adaptor.getInput(), "input");
  if (failed(in))
    return failure();
  auto w = ranked(adaptor.getWeight());
  if (w.getRank() != 3 || !w.hasStaticShape())
    return emitOptionalError(loc, "weight must be a static [E, D, F] tensor, "
                                  "got ",
                             shapeStr(w.getShape()));
  int64_t f = w.getDimSize(adaptor.getTransposeRhs() ? 1 : 2);
  inferred.push_back(RankedTensorType::get(
      {in->first, f}, ranked(adaptor.getInput()).getElementType()));
  return success();
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto rows = inferMatrix(loc, adaptor.getRows(), "rows");
  auto pos = inferMatrix(loc, adaptor.getPositions(), "positions");
  if (failed(rows) || failed(pos))
    return failure();
  inferred.push_back(
      RankedTensorType::get({pos->first, rows->second},
                            ranked(adaptor.getRows()).getElementType()));
  return success();
}

LogicalResult MoeRouterOp::verify() {
  auto shape = matrixShape(*this, getLogits(), "logits");
  if (failed(shape))
    return failure();
  auto [tokens, experts] = *shape;
  int64_t k = getTopK();
  if (k < 1 || k > experts)
    return emitOpError("top_k must lie in [1, ")
           << experts << "] (the experts), got " << k;
  if (Value bias = getBias()) {
    if (failed(expectShape(*this, bias, "bias", {experts})) ||
        failed(sameElementType(*this, getLogits(), "logits", bias, "bias")))
      return failure();
  }
  if (failed(expectShape(*this, getWeights(), "weights", {tokens, k})) ||
      failed(expectShape(*this, getIndices(), "indices", {tokens, k})) ||
      failed(sameElementType(*this, getLogits(), "logits", getWeights(),
                             "weights")))
    return failure();
  std::optional<int64_t> groups = getNGroup(), top = getTopkGroup();
  if (groups.has_value() != top.has_value())
    return emitOpError("groups and top go together");
  if (groups) {
    // The CUDA kernel keeps the groups in a 64-bit mask; torch's group
    // score sums each group's 2 largest; past top * E / G choices torch
    // would pick -inf experts in an unspecified order.
    if (*groups < 1 || *groups > 64 || experts % *groups != 0)
      return emitOpError("groups must divide the ")
             << experts << " experts and lie in [1, 64], got " << *groups;
    int64_t size = experts / *groups;
    if (size < 2)
      return emitOpError("groups must hold at least 2 experts each, got ")
             << size;
    if (*top < 1 || *top > *groups)
      return emitOpError("top must lie in [1, ")
             << *groups << "] (the groups), got " << *top;
    if (k > *top * size)
      return emitOpError("top_k ") << k << " exceeds the " << *top * size
                                   << " experts of the top groups";
  }
  return verifyRouting(*this, getScale(), getNormEps());
}

LogicalResult MoeRouterGradOp::verify() {
  auto shape = matrixShape(*this, getLogits(), "logits");
  auto sel = matrixShape(*this, getIndices(), "indices");
  if (failed(shape) || failed(sel))
    return failure();
  if (sel->first != shape->first || sel->second > shape->second)
    return emitOpError("indices must be [")
           << shape->first << ", k <= " << shape->second << "], got "
           << shapeStr(ranked(getIndices()).getShape());
  if (failed(expectShape(*this, getWeightsGrad(), "weights_grad",
                         {sel->first, sel->second})) ||
      failed(sameElementType(*this, getLogits(), "logits", getWeightsGrad(),
                             "weights_grad")))
    return failure();
  return verifyRouting(*this, getScale(), getNormEps());
}

LogicalResult MoeDispatchOp::verify() {
  auto in = matrixShape(*this, getInput(), "input");
  auto sel = matrixShape(*this, getIndices(), "indices");
  if (failed(in) || failed(sel))
    return failure();
  if (sel->first != in->first)
    return emitOpError("indices must have a row per input row (")
           << in->first << "), got " << sel->first;
  auto offs = ranked(getOffsets());
  if (offs.getRank() != 1 || !offs.hasStaticShape() || offs.getDimSize(0) < 1)
    return emitOpError("offsets must be a static vector of one end per "
                       "expert, got ")
           << shapeStr(offs.getShape());
  if (offs.getElementType() != ranked(getIndices()).getElementType())
    return emitOpError("offsets must have the indices' element type ")
           << ranked(getIndices()).getElementType();
  if (failed(expectShape(*this, getRows(), "rows",
                         {in->first * sel->second, in->second})))
    return failure();
  return sameElementType(*this, getInput(), "input", getRows(), "rows");
}

std::optional<int64_t> MoeDispatchOp::getIndexBound(OpOperand &operand) {
  return &operand == &getIndicesMutable() ? boundOfDim(getOffsets(), 0)
                                          : std::nullopt;
}

LogicalResult MoeDispatchGradOp::verify() {
  auto rows = matrixShape(*this, getRowsGrad(), "rows_grad");
  auto pos = matrixShape(*this, getPositions(), "positions");
  if (failed(rows) || failed(pos))
    return failure();
  if (rows->first != pos->first * pos->second)
    return emitOpError("rows_grad must have a row per pair (")
           << pos->first * pos->second << "), got " << rows->first;
  if (failed(expectShape(*this, getResult(), "result",
                         {pos->first, rows->second})))
    return failure();
  return sameElementType(*this, getRowsGrad(), "rows_grad", getResult(),
                         "result");
}

/// The [S, D], [E, D, F] and [S, F] of a grouped product (`weight` in the
/// op's layout) and the offsets [E].
static LogicalResult verifyGroupedShapes(Operation *op, Value input,
                                         Value weight, Value offsets,
                                         Value output, bool transposeRhs,
                                         StringRef weightName) {
  auto in = matrixShape(op, input, "input");
  auto out = matrixShape(op, output, "the product");
  if (failed(in) || failed(out))
    return failure();
  auto offs = ranked(offsets);
  if (offs.getRank() != 1 || !offs.hasStaticShape() || offs.getDimSize(0) < 1)
    return op->emitOpError("offsets must be a static vector of one end per "
                           "expert, got ")
           << shapeStr(offs.getShape());
  if (out->first != in->first)
    return op->emitOpError("input and product rows differ: ")
           << in->first << " vs " << out->first;
  int64_t e = offs.getDimSize(0), d = in->second, f = out->second;
  SmallVector<int64_t> w{e, d, f};
  if (transposeRhs)
    std::swap(w[1], w[2]);
  if (failed(expectShape(op, weight, weightName, w)))
    return failure();
  if (failed(sameElementType(op, input, "input", weight, weightName)) ||
      failed(sameElementType(op, input, "input", output, "the product")))
    return failure();
  // The op is defined in every float type, so that a 16-bit step plans;
  // the runtime's kernels are f32 only and the lowering says so.
  return success();
}

LogicalResult GroupedMatmulOp::verify() {
  return verifyGroupedShapes(*this, getInput(), getWeight(), getOffsets(),
                             getResult(), getTransposeRhs(), "weight");
}

LogicalResult GroupedMatmulWeightGradOp::verify() {
  return verifyGroupedShapes(*this, getInput(), getResult(), getOffsets(),
                             getResultGrad(), getTransposeRhs(), "result");
}

/// rows [T*k, D], positions and weights [T, k], per-token [T, D].
static LogicalResult verifyCombineShapes(Operation *op, Value rows,
                                         Value positions, Value weights,
                                         Value perToken, StringRef tokenName) {
  auto r = matrixShape(op, rows, "rows");
  auto pos = matrixShape(op, positions, "positions");
  if (failed(r) || failed(pos))
    return failure();
  auto [tokens, k] = *pos;
  if (r->first != tokens * k)
    return op->emitOpError("rows must have a row per pair (")
           << tokens * k << "), got " << r->first;
  if (failed(expectShape(op, weights, "weights", {tokens, k})) ||
      failed(expectShape(op, perToken, tokenName, {tokens, r->second})) ||
      failed(sameElementType(op, rows, "rows", weights, "weights")) ||
      failed(sameElementType(op, rows, "rows", perToken, tokenName)))
    return failure();
  return success();
}

LogicalResult MoeCombineOp::verify() {
  return verifyCombineShapes(*this, getRows(), getPositions(), getWeights(),
                             getResult(), "result");
}

LogicalResult MoeCombineGradOp::verify() {
  return verifyCombineShapes(*this, getRows(), getPositions(), getWeights(),
                             getResultGrad(), "result_grad");
}

/// The logits, top k and, when given, the counts [E] and their rows G (at
/// least the logits' rows: a divided batch's part is never larger).
static LogicalResult verifyAuxLoss(Operation *op, Value logits, int64_t k,
                                   Value counts, std::optional<int64_t> rows) {
  auto shape = matrixShape(op, logits, "logits");
  if (failed(shape))
    return failure();
  if (k < 1 || k > shape->second)
    return op->emitOpError("top_k must lie in [1, ")
           << shape->second << "] (the experts), got " << k;
  if (static_cast<bool>(counts) != rows.has_value())
    return op->emitOpError("takes counts and their rows together, or "
                           "neither");
  if (!counts)
    return success();
  if (ranked(counts).getDimSize(0) != shape->second)
    return op->emitOpError("counts must hold one count per expert (")
           << shape->second << "), got " << ranked(counts);
  if (*rows < shape->first)
    return op->emitOpError("rows ")
           << *rows << " (the global batch's) must be at least the logits' "
           << shape->first;
  return success();
}

LogicalResult MoeAuxLossOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location>, Adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  // A scalar whatever the rows: a divided batch re-infers it, and
  // zero-moe-aux-counts gives each part the global batch's counts.
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult MoeAuxLossOp::verify() {
  return verifyAuxLoss(*this, getLogits(), getTopK(), getCounts(), getRows());
}

LogicalResult MoeExpertCountsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto logits = inferMatrix(loc, adaptor.getLogits(), "logits");
  if (failed(logits))
    return failure();
  inferred.push_back(
      RankedTensorType::get({logits->second}, IntegerType::get(context, 64)));
  return success();
}

LogicalResult MoeExpertCountsOp::verify() {
  return verifyAuxLoss(*this, getLogits(), getTopK(), Value(), std::nullopt);
}

LogicalResult MoeAuxLossGradOp::verify() {
  return verifyAuxLoss(*this, getLogits(), getTopK(), getCounts(), getRows());
}

//===----------------------------------------------------------------------===//
// Roles (NNInterfaces.td)
//===----------------------------------------------------------------------===//

bool mlir::nn::isNNOp(Operation *op) {
  return isa<NNDialect>(op->getDialect());
}

SmallVector<Value> MatmulOp::getWeightOperands() {
  return {getLhs(), getRhs()};
}

SmallVector<Value> TiledMlpOp::getWeightOperands() {
  return {getGateWeight(), getUpWeight(), getDownWeight()};
}

Value CastOp::getLeadingDimSource() { return getInput(); }

Value ReshapeOp::getLeadingDimSource() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getRank() >= 1 && out.getRank() >= 1 &&
      in.getDimSize(0) == out.getDimSize(0))
    return getInput();
  return Value();
}

/// rhs is a suffix of lhs's shape; shorter, it is the same for every slice
/// of lhs's dimension 0.
static Value getBroadcastLeadingDimSource(Value lhs, Value rhs) {
  if (ranked(rhs).getRank() < ranked(lhs).getRank())
    return lhs;
  return Value();
}

Value AddOp::getLeadingDimSource() {
  return getBroadcastLeadingDimSource(getLhs(), getRhs());
}

Value MulOp::getLeadingDimSource() {
  return getBroadcastLeadingDimSource(getLhs(), getRhs());
}

SmallVector<OpOperand *> SoftmaxCrossEntropyOp::getGradSeeds() {
  SmallVector<OpOperand *> seeds;
  for (Operation *user : getLogits().getUsers())
    if (auto grad = dyn_cast<SoftmaxCrossEntropyGradOp>(user);
        grad && grad.getLabels() == getLabels() &&
        grad.getIgnoreIndex() == getIgnoreIndex())
      seeds.push_back(&grad.getLossGradMutable());
  return seeds;
}

SmallVector<Value> SoftmaxCrossEntropyOp::getHeadOperands() {
  // The logits' projection, through the views before the loss.
  Value logits = getLogits();
  while (auto reshape = logits.getDefiningOp<ReshapeOp>())
    logits = reshape.getInput();
  if (auto matmul = logits.getDefiningOp<MatmulOp>())
    return {matmul.getLhs(), matmul.getRhs()};
  return {};
}

SmallVector<OpOperand *> LinearCrossEntropyOp::getGradSeeds() {
  SmallVector<OpOperand *> seeds;
  for (Operation *user : getInput().getUsers())
    if (auto grad = dyn_cast<LinearCrossEntropyGradOp>(user);
        grad && grad.getWeight() == getWeight() &&
        grad.getLabels() == getLabels() &&
        grad.getIgnoreIndex() == getIgnoreIndex())
      seeds.push_back(&grad.getLossGradMutable());
  return seeds;
}

SmallVector<Value> LinearCrossEntropyOp::getHeadOperands() {
  return {getWeight()};
}

SmallVector<MoeAuxLossGradOp> MoeAuxLossOp::getGrads() {
  SmallVector<MoeAuxLossGradOp> grads;
  for (Operation *user : getLogits().getUsers())
    if (auto grad = dyn_cast<MoeAuxLossGradOp>(user);
        grad && grad.getTopK() == getTopK())
      grads.push_back(grad);
  return grads;
}

//===----------------------------------------------------------------------===//
// Reinforcement learning: clamp, minimum/maximum, where, stop_gradient,
// gather
//===----------------------------------------------------------------------===//

/// At least one bound, and neither NaN (an infinite bound is none).
static LogicalResult checkClampBounds(Operation *op, std::optional<APFloat> min,
                                      std::optional<APFloat> max) {
  if (!min && !max)
    return op->emitOpError("needs a bound: min, max or both");
  for (auto [name, bound] : {std::make_pair("min", min), {"max", max}})
    if (bound && bound->isNaN())
      return op->emitOpError(name) << " must not be NaN";
  return success();
}

LogicalResult ClampOp::verify() {
  return checkClampBounds(*this, getMin(), getMax());
}

LogicalResult ClampGradOp::verify() {
  return checkClampBounds(*this, getMin(), getMax());
}

Value StopGradientOp::getViewSource() { return getInput(); }

/// What is wrong with gathering along the last dimension of x [..., N] by
/// indices [..., K] (or [...], one per row), which need x's leading
/// dimensions; empty if nothing.
static std::string gatherProblem(RankedTensorType x, RankedTensorType indices,
                                 StringRef xName) {
  std::string problem;
  llvm::raw_string_ostream os(problem);
  int64_t rank = x.getRank(), r = indices.getRank();
  if (rank < 1)
    os << xName << " must have rank >= 1";
  else if (r != rank && r != rank - 1)
    os << "indices must have rank " << rank << " ([..., K]) or " << rank - 1
       << " ([...]), got " << r;
  else if (x.getShape().take_front(rank - 1) !=
           indices.getShape().take_front(std::min(r, rank - 1)))
    os << "indices '" << indices << "' must have the leading dimensions of "
       << xName << " '" << x << "'";
  return problem;
}

/// The indices' shape of x's element type. Inferred, so that a local batch
/// re-infers it (and reports a divided batch that no longer matches x).
LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto x = ranked(adaptor.getInput()), indices = ranked(adaptor.getIndices());
  std::string problem = gatherProblem(x, indices, "input");
  if (!problem.empty())
    return emitOptionalError(loc, problem);
  inferred.push_back(
      RankedTensorType::get(indices.getShape(), x.getElementType()));
  return success();
}

LogicalResult GatherGradOp::verify() {
  // As the forward's, with dx for x and dy for its result.
  auto dx = ranked(getResult()), dy = ranked(getResultGrad());
  auto indices = ranked(getIndices());
  std::string problem = gatherProblem(dx, indices, "the result");
  if (!problem.empty())
    return emitOpError(problem);
  auto want = RankedTensorType::get(indices.getShape(), dx.getElementType());
  if (dy != want)
    return emitOpError("expected a result gradient of type ")
           << want << ", got " << dy;
  return success();
}

std::optional<int64_t> GatherOp::getIndexBound(OpOperand &operand) {
  return &operand == &getIndicesMutable() ? boundOfDim(getInput(), -1)
                                          : std::nullopt;
}

std::optional<int64_t> GatherGradOp::getIndexBound(OpOperand &operand) {
  return &operand == &getIndicesMutable() ? boundOfDim(getResult(), -1)
                                          : std::nullopt;
}
