//===- ModelGen.cpp - MLP, GPT-2 and Llama training steps -----------------===//
//
// Part of the zero-mlir project.
//
// Builds the models with the nn and zero dialects' builders and verifies
// them; values are located by name so that MLIR's printer names them as a
// reader would (printNameLocAsPrefix).
//
//===----------------------------------------------------------------------===//

#include "zero/ModelGen/ModelGen.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"

#include "ModelGenDetail.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;
using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::modelgen;

// The default batch is one sequence per device of a cluster on which the
// model's mixed-precision training state (16 bytes a parameter) fits at
// stage 3 on 80 GB devices: one 8-device node up to 8B, eight for 70B.
static constexpr LlamaPreset llamaPresets[] = {
    {"tinyllama-1.1b", 22, 2048, 32, 4, 5632, 32000, 2048, 8, 1e4, 1e-5, false},
    {"llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8, 5e5, 1e-5, false},
    {"llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 64, 5e5, 1e-5, false},
};

ArrayRef<LlamaPreset> mlir::zero::getLlamaPresets() { return llamaPresets; }

/// The preset `name` names (the first, tinyllama, when unset), if any.
const LlamaPreset *
modelgen::findLlamaPreset(const std::optional<std::string> &name) {
  if (!name)
    return &llamaPresets[0];
  for (const LlamaPreset &p : llamaPresets)
    if (*name == p.name)
      return &p;
  return nullptr;
}

/// Parameters of a Llama: the token embedding, per layer two norms, the
/// q/k/v/o projections and the three MLP projections, the final norm and
/// the head unless it is tied.
static int64_t llamaParamCount(int64_t L, int64_t C, int64_t H, int64_t KV,
                               int64_t F, int64_t V, bool tied) {
  int64_t kvDim = C / H * KV;
  int64_t layer = 2 * C + 2 * C * C + 2 * C * kvDim + 3 * C * F;
  return V * C + L * layer + C + (tied ? 0 : V * C);
}

static std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      s += ',';
    s += digits[i];
  }
  return s;
}

std::string mlir::zero::describeLlamaPreset(const LlamaPreset &p) {
  std::string s;
  raw_string_ostream os(s);
  os << p.layers << " layers, hidden " << p.hidden << ", " << p.heads
     << " heads, " << p.kvHeads << " kv heads, ffn " << p.ffn << ", vocab "
     << p.vocab << ", rope theta " << static_cast<int64_t>(p.ropeTheta)
     << ", seq " << p.seq << ", batch " << p.batch << ", "
     << (p.tied ? "tied" : "untied") << ": "
     << withCommas(llamaParamCount(p.layers, p.hidden, p.heads, p.kvHeads,
                                   p.ffn, p.vocab, p.tied))
     << " parameters";
  return s;
}

namespace mlir::zero::modelgen {

/// The Linear modules of a Llama layer --lora may target.
constexpr const char *kLoraTargets[] = {"q_proj",   "k_proj",    "v_proj",
                                        "o_proj",   "gate_proj", "up_proj",
                                        "down_proj"};

/// Parses --lora; emits the error and returns nothing when it is bad.
std::optional<LoraSpec> parseLora(MLIRContext *ctx, StringRef spec) {
  LoraSpec out;
  bool haveR = false, inTargets = false;
  auto fail = [&](const Twine &why) -> std::optional<LoraSpec> {
    emitError(UnknownLoc::get(ctx)) << "--lora '" << spec << "': " << why;
    return std::nullopt;
  };
  SmallVector<StringRef> items;
  spec.split(items, ',');
  for (StringRef item : items) {
    auto [key, value] = item.split('=');
    bool keyed = item.contains('=');
    if (!keyed) {
      if (!inTargets || item.empty())
        return fail("expected r=N, alpha=A or target=NAME,..., got '" + item +
                    "'");
      value = item;
      key = "target";
    }
    key = key.trim();
    value = value.trim();
    if (key == "r") {
      if (value.getAsInteger(10, out.r) || out.r <= 0)
        return fail("r must be a positive integer, got '" + value + "'");
      haveR = true;
      inTargets = false;
    } else if (key == "alpha") {
      if (value.getAsDouble(out.alpha) || !(out.alpha > 0) ||
          !std::isfinite(out.alpha))
        return fail("alpha must be a positive number, got '" + value + "'");
      inTargets = false;
    } else if (key == "target") {
      if (!llvm::is_contained(kLoraTargets, value)) {
        std::string known;
        for (StringRef t : kLoraTargets)
          known += (known.empty() ? "" : ", ") + t.str();
        return fail("unknown target '" + value + "' (expected " + known + ")");
      }
      out.targets.insert(value.str());
      inTargets = true;
    } else {
      return fail("unknown key '" + key + "' (expected r, alpha or target)");
    }
  }
  if (!haveR)
    return fail("r=N is missing");
  if (out.targets.empty())
    return fail("target=NAME is missing");
  return out;
}

/// Names nn.split's results: the printer takes an op's first result name
/// from a NameLoc (printNameLocAsPrefix) and gives the other results that
/// name with a suffix, so a split's location is a FusedLoc whose metadata
/// lists its results' names.
struct SplitResultNames
    : OpAsmOpInterface::ExternalModel<SplitResultNames, nn::SplitOp> {
  void getAsmResultNames(Operation *op, OpAsmSetValueNameFn setName) const {
    auto fused = dyn_cast<FusedLoc>(op->getLoc());
    auto names =
        fused ? dyn_cast_or_null<ArrayAttr>(fused.getMetadata()) : ArrayAttr();
    if (!names)
      return;
    for (auto [result, name] :
         llvm::zip(op->getResults(), names.getAsValueRange<StringAttr>()))
      setName(result, name);
  }
};

/// The optimizer of a step: the model's defaults under the flags.
zero::OptimizerAttr optimizerAttr(MLIRContext *ctx, const Gen &g,
                                  zero::OptimizerKind defKind, double defLr,
                                  double beta2, double defWd, double eps) {
  zero::OptimizerKind kind = defKind;
  if (!g.optimizer.empty())
    kind = *zero::symbolizeOptimizerKind(g.optimizer);
  double l = g.lr > 0 ? g.lr : defLr;
  double wd = g.weightDecay >= 0 ? g.weightDecay : defWd;
  zero::LrScheduleAttr schedule;
  if (!g.lrSchedule.empty()) {
    schedule = zero::parseLrScheduleSpec(ctx, g.lrSchedule, [&] {
      return emitError(UnknownLoc::get(ctx)) << "--lr-schedule: ";
    });
    if (!schedule)
      return {};
  }
  // What the optimizer does not read (Lion's eps, bias correction) keeps
  // its default.
  if (!zero::hasOptimizerParam(kind, "eps"))
    eps = 1e-8;
  bool bc =
      g.biasCorrection || !zero::hasOptimizerParam(kind, "bias_correction");
  if (!zero::hasOptimizerParam(kind, "beta2"))
    beta2 = 0.999;
  bool sgd = zero::hasOptimizerParam(kind, "momentum");
  std::optional<zero::StatePrecision> states =
      zero::symbolizeStatePrecision(g.optimizerStates);
  if (!states) {
    emitError(UnknownLoc::get(ctx))
        << "--optimizer-states must be f32, bf16 or int8, got '"
        << g.optimizerStates << "'";
    return {};
  }
  zero::OptimizerParams p;
  p.beta1 = asWritten(0.9);
  p.beta2 = asWritten(beta2);
  p.eps = asWritten(eps);
  p.weight_decay = asWritten(wd);
  p.bias_correction = bc;
  if (sgd) {
    p.momentum = asWritten(g.momentum);
    p.dampening = asWritten(g.dampening);
    p.nesterov = g.nesterov;
  }
  // --lr is both of Muon's halves' (DeepSpeed's shared lr).
  if (kind == zero::OptimizerKind::muon)
    p.muon_lr = asWritten(l);
  return zero::OptimizerAttr::getChecked(
      [&] { return emitError(UnknownLoc::get(ctx)) << "--optimizer: "; }, ctx,
      kind, asWritten(l), p, *states, schedule, g.bf16Masters);
}

/// The precision of a step: --dtype with DeepSpeed's loss-scaler defaults.
zero::PrecisionAttr precisionAttr(MLIRContext *ctx, const Gen &g) {
  zero::PrecisionKind kind = g.dtype == "bf16"  ? zero::PrecisionKind::bf16
                             : g.dtype == "f16" ? zero::PrecisionKind::fp16
                                                : zero::PrecisionKind::fp32;
  return zero::PrecisionAttr::get(ctx, kind, /*initial_scale_power=*/16,
                                  /*loss_scale_window=*/1000, /*hysteresis=*/2,
                                  /*min_loss_scale=*/APFloat(1.0),
                                  /*loss_scale=*/APFloat(0.0));
}

OwningOpRef<ModuleOp> genMLP(MLIRContext *ctx, Gen &g) {
  SmallVector<StringRef> parts;
  StringRef(g.sizes).split(parts, ',');
  SmallVector<int64_t> widths;
  for (StringRef p : parts) {
    int64_t w;
    if (p.trim().getAsInteger(10, w) || w <= 0) {
      emitError(UnknownLoc::get(ctx))
          << "--sizes: '" << p << "' is not a positive integer";
      return nullptr;
    }
    widths.push_back(w);
  }
  if (widths.size() < 2) {
    emitError(UnknownLoc::get(ctx))
        << "--sizes needs at least an input and an output width";
    return nullptr;
  }
  StepBuilder s(ctx, g);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    std::string fc = "fc" + std::to_string(i + 1);
    s.param(fc + ".weight", {widths[i], widths[i + 1]}, zero::InitKind::normal,
            1.0 / std::sqrt(static_cast<double>(widths[i])));
    s.param(fc + ".bias", {widths[i + 1]}, zero::InitKind::zeros);
  }
  Value x = s.input("x", "inputs", s.tensor({g.batch, widths.front()}));
  Value y =
      s.input("y", "labels", s.tensor({g.batch}, s.labelElementType("i64")));
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    x = s.affine(x, "fc" + std::to_string(i + 1), "fc");
    if (i + 2 < widths.size())
      x = nn::ReluOp::create(s.b, s.fresh("relu"), x);
  }
  zero::OptimizerAttr opt =
      optimizerAttr(ctx, g, zero::OptimizerKind::adam, 1e-3, 0.999, 0.0);
  if (!opt)
    return nullptr;
  return s.finish(s.loss(x, y), opt, precisionAttr(ctx, g));
}

} // namespace mlir::zero::modelgen

LogicalResult mlir::zero::checkModelGenOptions(MLIRContext *ctx,
                                               const ModelGenOptions &o) {
  auto error = [&] { return emitError(UnknownLoc::get(ctx)); };
  Gen g(o);
  if (g.dtype != "f32" && g.dtype != "bf16" && g.dtype != "f16")
    return error() << "--dtype must be f32, bf16 or f16, got '" << g.dtype
                   << "'";
  if (!g.labelType.empty() && g.labelType != "i32" && g.labelType != "i64")
    return error() << "--label-type must be i32 or i64";
  bool i32Labels =
      g.labelType == "i32" || (g.labelType.empty() && o.model != "mlp");
  if (o.ignoreIndex && i32Labels &&
      (*o.ignoreIndex < INT32_MIN || *o.ignoreIndex > INT32_MAX))
    return error() << "--ignore-index " << *o.ignoreIndex
                   << " does not fit the i32 labels";
  if (!g.optimizer.empty() && !zero::symbolizeOptimizerKind(g.optimizer)) {
    // The kinds of optimizers.def, as the compiler's enum has them.
    SmallVector<StringRef> kinds;
    for (uint32_t i = 0; std::optional<zero::OptimizerKind> kind =
                             zero::symbolizeOptimizerKind(i);
         ++i)
      kinds.push_back(zero::stringifyOptimizerKind(*kind));
    std::string list = llvm::join(ArrayRef(kinds).drop_back(), ", ") + " or " +
                       kinds.back().str();
    return error() << "--optimizer must be " << list;
  }
  if (g.batch <= 0)
    return error() << "--batch must be positive";
  // lr and weight-decay use sentinels for "model default": reject explicit
  // values the sentinel check would otherwise silently replace.
  if (o.lr && !(*o.lr > 0 && std::isfinite(*o.lr)))
    return error() << "--lr must be positive, got " << *o.lr;
  if (o.weightDecay && !(*o.weightDecay >= 0 && std::isfinite(*o.weightDecay)))
    return error() << "--weight-decay must be >= 0, got " << *o.weightDecay;
  if (!(g.clip >= 0 && std::isfinite(g.clip)))
    return error() << "--gradient-clipping must be >= 0 (0 = off), got "
                   << g.clip;
  // Options of one model family are errors for the others, not ignored.
  if (o.model != "llama") {
    std::pair<StringRef, bool> llamaOnly[] = {
        {"preset", o.preset.has_value()},
        {"kv-heads", o.kvHeads.has_value()},
        {"ffn", o.ffn.has_value()},
        {"rope-theta", o.ropeTheta.has_value()},
        {"norm-eps", o.normEps.has_value()},
        {"tied", o.tied.has_value()},
        {"lora", o.lora.has_value()}};
    for (auto [name, given] : llamaOnly)
      if (given)
        return error() << "--" << name << " is a llama option";
  }
  if (o.model == "llama" && o.untied)
    return error() << "--untied is a gpt2 option (llama is untied unless "
                      "--tied)";
  if (o.lora && !parseLora(ctx, *o.lora))
    return failure();
  for (const std::string &pattern : o.freeze) {
    std::string why;
    if (!Regex(pattern, Regex::NoFlags).isValid(why))
      return error() << "--freeze '" << pattern
                     << "' is not a valid regular expression: " << why;
  }
  if (!findLlamaPreset(o.preset))
    return error() << "unknown --preset '" << *o.preset << "'";
  return success();
}

namespace {

/// Calls `fn(name, field)` for each option a spec's dictionary may hold,
/// under its command-line name (the sequence is the spec's `seq`).
template <typename Options, typename Fn>
void forEachSpecOption(Options &o, Fn &&fn) {
  fn("sizes", o.sizes);
  fn("batch", o.batch);
  fn("layers", o.layers);
  fn("hidden", o.hidden);
  fn("heads", o.heads);
  fn("vocab", o.vocab);
  fn("untied", o.untied);
  fn("preset", o.preset);
  fn("kv-heads", o.kvHeads);
  fn("ffn", o.ffn);
  fn("rope-theta", o.ropeTheta);
  fn("norm-eps", o.normEps);
  fn("tied", o.tied);
  fn("dtype", o.dtype);
  fn("optimizer", o.optimizer);
  fn("lr", o.lr);
  fn("weight-decay", o.weightDecay);
  fn("gradient-clipping", o.gradientClipping);
  fn("lr-schedule", o.lrSchedule);
  fn("bias-correction", o.biasCorrection);
  fn("momentum", o.momentum);
  fn("dampening", o.dampening);
  fn("nesterov", o.nesterov);
  fn("optimizer-states", o.optimizerStates);
  fn("bf16-masters", o.bf16Masters);
  fn("no-decay-bias-norm", o.noDecayBiasNorm);
  fn("no-decay-embeddings", o.noDecayEmbeddings);
  fn("label-type", o.labelType);
  fn("ignore-index", o.ignoreIndex);
  fn("freeze", o.freeze);
  fn("lora", o.lora);
}

/// Writes each given option as a typed attribute.
struct SpecEncoder {
  Builder b;
  SmallVector<NamedAttribute> entries;

  void add(StringRef name, Attribute value) {
    entries.push_back(b.getNamedAttr(name, value));
  }
  void operator()(StringRef name, const std::optional<int64_t> &v) {
    if (v)
      add(name, b.getI64IntegerAttr(*v));
  }
  void operator()(StringRef name, const std::optional<double> &v) {
    if (v)
      add(name, b.getF64FloatAttr(*v));
  }
  void operator()(StringRef name, const std::optional<bool> &v) {
    if (v)
      add(name, b.getBoolAttr(*v));
  }
  void operator()(StringRef name, const std::optional<std::string> &v) {
    if (v)
      add(name, b.getStringAttr(*v));
  }
  void operator()(StringRef name, const std::vector<std::string> &v) {
    if (!v.empty())
      add(name, b.getStrArrayAttr(SmallVector<StringRef>(v.begin(), v.end())));
  }
};

/// Reads one entry of a spec's dictionary into the option of its name.
struct SpecDecoder {
  NamedAttribute entry;
  bool found = false;
  /// What is wrong with the entry's value (empty: nothing).
  std::string expected;

  bool matches(StringRef name) {
    if (found || entry.getName() != name)
      return false;
    found = true;
    return true;
  }
  void operator()(StringRef name, std::optional<int64_t> &v) {
    if (!matches(name))
      return;
    auto a = dyn_cast<IntegerAttr>(entry.getValue());
    if (a && a.getType().isSignlessInteger(64))
      v = a.getInt();
    else
      expected = "an i64";
  }
  void operator()(StringRef name, std::optional<double> &v) {
    if (!matches(name))
      return;
    auto a = dyn_cast<FloatAttr>(entry.getValue());
    if (a && a.getType().isF64())
      v = a.getValueAsDouble();
    else
      expected = "an f64";
  }
  void operator()(StringRef name, std::optional<bool> &v) {
    if (!matches(name))
      return;
    if (auto a = dyn_cast<BoolAttr>(entry.getValue()))
      v = a.getValue();
    else
      expected = "a boolean";
  }
  void operator()(StringRef name, std::optional<std::string> &v) {
    if (!matches(name))
      return;
    if (auto a = dyn_cast<StringAttr>(entry.getValue()))
      v = a.str();
    else
      expected = "a string";
  }
  void operator()(StringRef name, std::vector<std::string> &v) {
    if (!matches(name))
      return;
    auto a = dyn_cast<ArrayAttr>(entry.getValue());
    if (!a || a.empty() ||
        !llvm::all_of(a, [](Attribute s) { return isa<StringAttr>(s); })) {
      expected = "a non-empty array of strings";
      return;
    }
    for (Attribute s : a)
      v.push_back(cast<StringAttr>(s).str());
  }
};

/// The options `dict` holds, or failure after emitting the first entry
/// that is no option or not of its option's type.
FailureOr<ModelGenOptions>
decodeSpecOptions(DictionaryAttr dict,
                  llvm::function_ref<InFlightDiagnostic()> emitError) {
  ModelGenOptions o;
  for (NamedAttribute entry : dict) {
    SpecDecoder decoder{entry};
    forEachSpecOption(o, decoder);
    if (!decoder.found) {
      if (entry.getName() == "seq")
        return emitError() << "option 'seq' is the spec's own seq";
      return emitError() << "no zero-model-gen option is named '"
                         << entry.getName().getValue() << "'";
    }
    if (!decoder.expected.empty())
      return emitError() << "option '" << entry.getName().getValue()
                         << "' must be " << decoder.expected << ", got "
                         << entry.getValue();
  }
  return o;
}

} // namespace

OwningOpRef<ModuleOp> mlir::zero::generateModel(MLIRContext *ctx,
                                                const ModelGenOptions &o) {
  if (failed(checkModelGenOptions(ctx, o)))
    return nullptr;
  Gen g(o);
  if (o.lora)
    g.loraSpec = parseLora(ctx, *o.lora);
  for (const std::string &pattern : o.freeze) {
    g.freezeState.patterns.push_back(
        std::make_unique<Regex>(pattern, Regex::NoFlags));
    g.freezeState.matches.push_back(0);
  }
  OwningOpRef<ModuleOp> module;
  std::optional<ModelKind> kind = symbolizeModelKind(o.model);
  if (!kind) {
    emitError(UnknownLoc::get(ctx))
        << "unknown model '" << o.model << "' (expected mlp, gpt2 or llama)";
    return nullptr;
  }
  int64_t seq = 0;
  switch (*kind) {
  case ModelKind::mlp:
    module = genMLP(ctx, g);
    break;
  case ModelKind::gpt2:
    module = genGPT2(ctx, g);
    seq = g.seq;
    break;
  case ModelKind::llama:
    module = genLlama(ctx, g);
    seq = pick(o.seq, findLlamaPreset(o.preset)->seq);
    break;
  }
  if (!module)
    return nullptr;
  for (auto [pattern, count] : llvm::zip(o.freeze, g.freezeState.matches))
    if (count == 0) {
      emitError(UnknownLoc::get(ctx))
          << "--freeze '" << pattern << "' matches no parameter of the model";
      return nullptr;
    }
  if (!o.freeze.empty() && g.freezeState.frozen == g.freezeState.params) {
    emitError(UnknownLoc::get(ctx))
        << "--freeze '" << llvm::join(o.freeze, "', --freeze '")
        << "' match every parameter of the model: nothing would train";
    return nullptr;
  }
  if (o.recordSpec) {
    SpecEncoder encoder{Builder(ctx)};
    forEachSpecOption(o, encoder);
    auto spec = ModelSpecAttr::getChecked(
        [&] { return emitError(UnknownLoc::get(ctx)) << "model_gen.spec: "; },
        ctx, *kind, seq, DictionaryAttr::get(ctx, encoder.entries));
    if (!spec)
      return nullptr;
    ctx->getOrLoadDialect<ModelGenDialect>()->getSpecAttrHelper().setAttr(
        *module, spec);
  }
  return module;
}

FailureOr<ModelGenOptions> mlir::zero::getModelGenOptions(
    ModelSpecAttr spec, llvm::function_ref<InFlightDiagnostic()> emitError) {
  FailureOr<ModelGenOptions> o =
      decodeSpecOptions(spec.getOptions(), emitError);
  if (failed(o))
    return failure();
  o->model = stringifyModelKind(spec.getKind()).str();
  if (spec.getKind() != ModelKind::mlp)
    o->seq = spec.getSeq();
  return o;
}

ModelSpecAttr mlir::zero::getModelSpec(ModuleOp module) {
  return module->getAttrOfType<ModelSpecAttr>(
      ModelGenDialect::SpecAttrHelper::getNameStr());
}

void mlir::zero::registerModelGenExtensions(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, nn::NNDialect *) {
    nn::SplitOp::attachInterface<SplitResultNames>(*ctx);
  });
}

//===----------------------------------------------------------------------===//
// The model_gen dialect
//===----------------------------------------------------------------------===//

#include "zero/ModelGen/ModelGenDialect.cpp.inc"
#include "zero/ModelGen/ModelGenEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "zero/ModelGen/ModelGenAttrs.cpp.inc"

void ModelGenDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zero/ModelGen/ModelGenAttrs.cpp.inc"
      >();
}

LogicalResult
ModelSpecAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                      ModelKind kind, int64_t seq, DictionaryAttr options) {
  if (kind == ModelKind::mlp && seq != 0)
    return emitError() << "an mlp has no sequence, got seq = " << seq;
  if (kind != ModelKind::mlp && seq <= 0)
    return emitError() << "a " << stringifyModelKind(kind)
                       << " needs a positive seq, got " << seq;
  return decodeSpecOptions(options, emitError);
}

LogicalResult ModelGenDialect::verifyOperationAttribute(Operation *op,
                                                        NamedAttribute attr) {
  if (attr.getName() != getSpecAttrHelper().getName())
    return op->emitOpError("attribute '")
           << attr.getName().getValue() << "' is no model_gen attribute";
  if (!isa<ModelSpecAttr>(attr.getValue()))
    return op->emitOpError("attribute 'model_gen.spec' must be a "
                           "#model_gen.spec, got ")
           << attr.getValue();
  if (!isa<ModuleOp>(op))
    return op->emitOpError("attribute 'model_gen.spec' is only valid on a "
                           "module");
  return success();
}
