//===- ModelGenDetail.h - The generators' shared pieces ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/ModelGen: the options with their defaults, the builder of
// a training step and the optimizer and precision every model takes, which
// ModelGen.cpp (the MLP, the options and the spec) and Decoders.cpp (GPT-2
// and Llama) share.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_LIB_MODELGEN_MODELGENDETAIL_H
#define ZERO_LIB_MODELGEN_MODELGENDETAIL_H

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/ModelGen/ModelGen.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Regex.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace mlir::zero::modelgen {

/// A parsed --lora.
struct LoraSpec {
  int64_t r = 0;
  double alpha = 8.0;
  std::set<std::string> targets;

  bool isTarget(StringRef module) const {
    return targets.count(module.rsplit('.').second.str());
  }
  static bool isAdapter(StringRef name) {
    return name.contains(".lora_A.") || name.contains(".lora_B.");
  }
};

/// The --freeze patterns, how many parameters each matched, and the
/// parameters seen and frozen.
struct FreezeState {
  SmallVector<std::unique_ptr<llvm::Regex>> patterns;
  SmallVector<int64_t> matches;
  int64_t params = 0, frozen = 0;

  bool isFrozen(StringRef name) {
    ++params;
    bool any = false;
    for (auto [pattern, count] : llvm::zip(patterns, matches))
      if (pattern->match(name)) {
        ++count;
        any = true;
      }
    frozen += any;
    return any;
  }
};

/// `v` as the `%e` text this tool wrote before it built IR reads back (seven
/// significant digits): the models keep the values they always had, so that
/// they train bit for bit as before.
inline double asWritten(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%e", v);
  return std::strtod(s.c_str(), nullptr);
}

/// The options with zero-model-gen's defaults filled in, and what one
/// generation keeps: the parsed --lora and the --freeze matches.
struct Gen {
  explicit Gen(const ModelGenOptions &o)
      : o(o), sizes(o.sizes.value_or("784,256,256,10")),
        batch(o.batch.value_or(8)), layers(o.layers.value_or(12)),
        hidden(o.hidden.value_or(768)), heads(o.heads.value_or(12)),
        vocab(o.vocab.value_or(50257)), seq(o.seq.value_or(1024)),
        untied(o.untied.value_or(false)), dtype(o.dtype.value_or("f32")),
        optimizer(o.optimizer.value_or("")), lr(o.lr.value_or(0.0)),
        weightDecay(o.weightDecay.value_or(-1.0)),
        clip(o.gradientClipping.value_or(0.0)),
        lrSchedule(o.lrSchedule.value_or("")),
        biasCorrection(o.biasCorrection.value_or(true)),
        momentum(o.momentum.value_or(0.0)),
        dampening(o.dampening.value_or(0.0)),
        nesterov(o.nesterov.value_or(false)),
        optimizerStates(o.optimizerStates.value_or("f32")),
        bf16Masters(o.bf16Masters.value_or(false)),
        noDecayBiasNorm(o.noDecayBiasNorm.value_or(false)),
        noDecayEmbeddings(o.noDecayEmbeddings.value_or(false)),
        labelType(o.labelType.value_or("")), ignoreIndex(o.ignoreIndex) {}

  const ModelGenOptions &o;
  std::string sizes;
  int64_t batch, layers, hidden, heads, vocab, seq;
  bool untied;
  std::string dtype, optimizer;
  double lr, weightDecay, clip;
  std::string lrSchedule;
  bool biasCorrection;
  double momentum, dampening;
  bool nesterov;
  std::string optimizerStates;
  bool bf16Masters;
  bool noDecayBiasNorm, noDecayEmbeddings;
  std::string labelType;
  std::optional<int64_t> ignoreIndex;
  std::optional<LoraSpec> loraSpec;
  FreezeState freezeState;
};

/// Builds a module of zero.params and one zero.train_step, the step's body
/// op by op; values are named with a hint and a counter (%mm3).
class StepBuilder {
public:
  StepBuilder(MLIRContext *ctx, Gen &g)
      : g(g), b(ctx), module(ModuleOp::create(UnknownLoc::get(ctx))),
        body(std::make_unique<Block>()) {
    b.setInsertionPointToEnd(body.get());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elementType = {}) {
    return RankedTensorType::get(shape,
                                 elementType ? elementType : b.getF32Type());
  }
  /// i32 or i64, as --label-type or the model's default says.
  Type labelElementType(StringRef defaultType) {
    StringRef t = g.labelType.empty() ? defaultType : StringRef(g.labelType);
    return b.getIntegerType(t == "i32" ? 32 : 64);
  }
  FloatAttr f64(double v) { return b.getF64FloatAttr(asWritten(v)); }

  /// A value's location: its name, `hint` and the next count.
  Location fresh(StringRef hint) { return named(hint + Twine(counter++)); }
  /// The location of an op whose results are named `hints` and counts.
  Location namedResults(ArrayRef<StringRef> hints) {
    SmallVector<Attribute> names;
    for (StringRef hint : hints)
      names.push_back(b.getStringAttr(hint + Twine(counter++)));
    return FusedLoc::get({}, b.getArrayAttr(names), b.getContext());
  }
  Location named(const Twine &name) {
    return NameLoc::get(b.getStringAttr(name));
  }

  /// An input of the step: its SSA name `name`, and `inputName` (the
  /// step's `input_names`, the manifest's) by which the runtime library
  /// takes it.
  Value input(StringRef name, StringRef inputName, RankedTensorType type) {
    inputNames.push_back(inputName);
    return body->addArgument(type, named(name));
  }

  void param(StringRef name, ArrayRef<int64_t> shape, zero::InitKind init,
             double std = 0.0) {
    RankedTensorType type = tensor(shape);
    // Weight-decay groups: the 1-D parameters are the biases and norm
    // weights of every model here; the token embeddings end in these names.
    bool noDecay =
        (g.noDecayBiasNorm && shape.size() == 1) ||
        (g.noDecayEmbeddings && (name.ends_with("wte.weight") ||
                                 name.ends_with("embed_tokens.weight")));
    // With --lora every parameter but the adapters is the frozen base.
    bool frozen = g.freezeState.isFrozen(name) ||
                  (g.loraSpec && !LoraSpec::isAdapter(name));
    OpBuilder mb = OpBuilder::atBlockEnd(module->getBody());
    zero::ParamOp::create(mb, mb.getUnknownLoc(), name, type, init,
                          init == zero::InitKind::normal ? f64(std) : nullptr,
                          /*rows=*/nullptr, noDecay ? f64(0.0) : nullptr,
                          /*compute=*/nullptr, frozen,
                          /*expert_parallel=*/nullptr);
    paramTypes[name] = type;
  }

  Value getParam(StringRef name) {
    return zero::GetParamOp::create(b, fresh("p"), paramTypes.lookup(name),
                                    name, /*source=*/nullptr);
  }

  /// x @ w, or x @ w^T (w [out, in]).
  Value matmul(Value x, Value w, bool transposeW, Location loc) {
    return nn::MatmulOp::create(b, loc, x, w, /*transpose_lhs=*/false,
                                transposeW);
  }
  Value add(Value x, Value y, StringRef hint) {
    return nn::AddOp::create(b, fresh(hint), x, y);
  }
  /// An affine layer with an [in, out] weight and a bias (nn.Linear as
  /// GPT-2's Conv1D stores it): x @ W + b, the sum named `hint`.
  Value affine(Value x, StringRef module, StringRef hint) {
    Value w = getParam((module + ".weight").str());
    Value y = matmul(x, w, /*transposeW=*/false, fresh("mm"));
    Value bias = getParam((module + ".bias").str());
    return add(y, bias, hint);
  }
  /// The mean cross-entropy of `logits` against `labels`, named %loss.
  Value loss(Value logits, Value labels) {
    IntegerAttr ignore;
    if (g.ignoreIndex)
      ignore = b.getI64IntegerAttr(*g.ignoreIndex);
    return nn::SoftmaxCrossEntropyOp::create(b, named("loss"), logits, labels,
                                             /*classes=*/nullptr, ignore);
  }

  /// The module with its train step returning `loss`, verified; none (with
  /// the verifier's errors) where it does not verify.
  OwningOpRef<ModuleOp> finish(Value loss, zero::OptimizerAttr optimizer,
                               zero::PrecisionAttr precision) {
    if (!optimizer)
      return nullptr;
    zero::ReturnOp::create(b, b.getUnknownLoc(), loss);
    OpBuilder mb = OpBuilder::atBlockEnd(module->getBody());
    auto step = zero::TrainStepOp::create(
        mb, mb.getUnknownLoc(), "train", optimizer, precision,
        APFloat(g.clip > 0 ? asWritten(g.clip) : 0.0), /*schedule=*/nullptr,
        /*offload=*/nullptr, LabelConvention::next_token,
        b.getStrArrayAttr(inputNames));
    step.getBody().push_back(body.release());
    if (failed(verify(*module)))
      return nullptr;
    return std::move(module);
  }

  Gen &g;
  OpBuilder b;

private:
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<Block> body;
  llvm::StringMap<RankedTensorType> paramTypes;
  SmallVector<StringRef> inputNames;
  int64_t counter = 0;
};

// ModelGen.cpp.
zero::OptimizerAttr optimizerAttr(MLIRContext *ctx, const Gen &g,
                                  zero::OptimizerKind defKind, double defLr,
                                  double beta2, double defWd,
                                  double eps = 1e-8);
zero::PrecisionAttr precisionAttr(MLIRContext *ctx, const Gen &g);
const LlamaPreset *findLlamaPreset(const std::optional<std::string> &name);

/// A value given on the command line, else the preset's.
template <typename T, typename U>
T pick(const std::optional<T> &opt, U presetValue) {
  return opt ? *opt : static_cast<T>(presetValue);
}

// Decoders.cpp.
OwningOpRef<ModuleOp> genGPT2(MLIRContext *ctx, Gen &g);
OwningOpRef<ModuleOp> genLlama(MLIRContext *ctx, Gen &g);

} // namespace mlir::zero::modelgen

#endif // ZERO_LIB_MODELGEN_MODELGENDETAIL_H
