//===- zero-model-gen.cpp - MLP, GPT-2 and Llama training steps as .mlir --===//
//
// Part of the zero-mlir project.
//
// Builds the models with the nn and zero dialects' builders, verifies them
// and prints them with MLIR's printer, SSA values named as a reader would
// name them.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/LrSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;
using namespace mlir;

namespace {

/// The Llama configurations --preset names: Hugging Face config.json values.
struct LlamaPreset {
  const char *name;
  int64_t layers, hidden, heads, kvHeads, ffn, vocab, seq, batch;
  double ropeTheta, normEps;
  bool tied;
};

// The default batch is one sequence per device of a cluster on which the
// model's mixed-precision training state (16 bytes a parameter) fits at
// stage 3 on 80 GB devices: one 8-device node up to 8B, eight for 70B.
constexpr LlamaPreset llamaPresets[] = {
    {"tinyllama-1.1b", 22, 2048, 32, 4, 5632, 32000, 2048, 8, 1e4, 1e-5, false},
    {"llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8, 5e5, 1e-5, false},
    {"llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 64, 5e5, 1e-5, false},
};
constexpr int numLlamaPresets = std::size(llamaPresets);

/// Parameters of a Llama: the token embedding, per layer two norms, the
/// q/k/v/o projections and the three MLP projections, the final norm and
/// the head unless it is tied.
int64_t llamaParams(int64_t L, int64_t C, int64_t H, int64_t KV, int64_t F,
                    int64_t V, bool tied) {
  int64_t kvDim = C / H * KV;
  int64_t layer = 2 * C + 2 * C * C + 2 * C * kvDim + 3 * C * F;
  return V * C + L * layer + C + (tied ? 0 : V * C);
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      s += ',';
    s += digits[i];
  }
  return s;
}

/// The --preset help lines, built once before the option that points at
/// them.
const std::vector<std::string> &presetDescriptions() {
  static const std::vector<std::string> descs = [] {
    std::vector<std::string> d;
    for (const LlamaPreset &p : llamaPresets) {
      std::string s;
      raw_string_ostream os(s);
      os << p.layers << " layers, hidden " << p.hidden << ", " << p.heads
         << " heads, " << p.kvHeads << " kv heads, ffn " << p.ffn << ", vocab "
         << p.vocab << ", rope theta " << static_cast<int64_t>(p.ropeTheta)
         << ", seq " << p.seq << ", batch " << p.batch << ", "
         << (p.tied ? "tied" : "untied") << ": "
         << withCommas(llamaParams(p.layers, p.hidden, p.heads, p.kvHeads,
                                   p.ffn, p.vocab, p.tied))
         << " parameters";
      d.push_back(s);
    }
    return d;
  }();
  return descs;
}

/// Indices into llamaPresets.
enum class PresetId { TinyLlama, Llama3_8B, Llama3_70B };
static_assert(static_cast<int>(PresetId::Llama3_70B) + 1 == numLlamaPresets);

cl::OptionEnumValue presetValue(PresetId id) {
  int i = static_cast<int>(id);
  return {llamaPresets[i].name, i, presetDescriptions()[i]};
}

} // namespace

static cl::OptionCategory genCat("zero-model-gen options");

static cl::opt<std::string> modelKind(cl::Positional, cl::Required,
                                      cl::desc("<mlp|gpt2|llama>"),
                                      cl::cat(genCat));
static cl::opt<std::string> outputFile("o",
                                       cl::desc("Output file (- for stdout)"),
                                       cl::init("-"), cl::cat(genCat));
static cl::opt<std::string>
    sizes("sizes",
          cl::desc("MLP layer widths, input first (default: 784,256,256,10)"),
          cl::init("784,256,256,10"), cl::cat(genCat));
static cl::opt<int64_t> batch("batch",
                              cl::desc("Global batch size (default: 8; llama: "
                                       "the preset's)"),
                              cl::init(8), cl::cat(genCat));
static cl::opt<int64_t> layers("layers",
                               cl::desc("Transformer blocks (default: 12, "
                                        "GPT-2 124M; llama: the preset's)"),
                               cl::init(12), cl::cat(genCat));
static cl::opt<int64_t> hidden("hidden",
                               cl::desc("Hidden size (default: 768; llama: "
                                        "the preset's)"),
                               cl::init(768), cl::cat(genCat));
static cl::opt<int64_t> heads("heads",
                              cl::desc("Attention heads (default: 12; llama: "
                                       "the preset's)"),
                              cl::init(12), cl::cat(genCat));
static cl::opt<int64_t> vocab("vocab",
                              cl::desc("Vocabulary size (default: 50257; "
                                       "llama: the preset's)"),
                              cl::init(50257), cl::cat(genCat));
static cl::opt<int64_t> seq("seq",
                            cl::desc("Sequence length (GPT-2: = positions; "
                                     "default: 1024; llama: the preset's)"),
                            cl::init(1024), cl::cat(genCat));
static cl::opt<bool>
    untied("untied",
           cl::desc("GPT-2: separate lm_head.weight instead of "
                    "the tied token embedding"),
           cl::init(false), cl::cat(genCat));
static cl::opt<PresetId>
    preset("preset",
           cl::desc("Llama configuration; explicit options override its values "
                    "(default: tinyllama-1.1b)"),
           cl::values(presetValue(PresetId::TinyLlama),
                      presetValue(PresetId::Llama3_8B),
                      presetValue(PresetId::Llama3_70B)),
           cl::init(PresetId::TinyLlama), cl::cat(genCat));
static cl::opt<int64_t> kvHeads("kv-heads",
                                cl::desc("Llama: key/value heads, dividing "
                                         "--heads (default: the preset's)"),
                                cl::init(0), cl::cat(genCat));
static cl::opt<int64_t> ffn("ffn",
                            cl::desc("Llama: MLP intermediate size (default: "
                                     "the preset's)"),
                            cl::init(0), cl::cat(genCat));
static cl::opt<double> ropeTheta("rope-theta",
                                 cl::desc("Llama: RoPE base (default: the "
                                          "preset's, 10000 or 500000)"),
                                 cl::init(0.0), cl::cat(genCat));
static cl::opt<double> normEps("norm-eps",
                               cl::desc("Llama: RMSNorm epsilon (default: "
                                        "1e-5)"),
                               cl::init(0.0), cl::cat(genCat));
static cl::opt<bool> tied("tied",
                          cl::desc("Llama: lm_head is the token embedding "
                                   "(model.embed_tokens.weight)"),
                          cl::init(false), cl::cat(genCat));
static cl::opt<std::string>
    dtype("dtype", cl::desc("Training precision: f32 (default), bf16 or f16"),
          cl::init("f32"), cl::cat(genCat));
static cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("adam, adamw, lion or sgd (default: "
                       "adam MLP, adamw GPT-2 and "
                       "llama)"),
              cl::init(""), cl::cat(genCat));
static cl::opt<double> lr("lr",
                          cl::desc("Learning rate (default: 1e-3 MLP, 6e-4 "
                                   "GPT-2, 3e-4 llama)"),
                          cl::init(0.0), cl::cat(genCat));
static cl::opt<double> weightDecay("weight-decay",
                                   cl::desc("Weight decay (default: 0 MLP, 0.1 "
                                            "GPT-2 and llama)"),
                                   cl::init(-1.0), cl::cat(genCat));
static cl::opt<double> clip("gradient-clipping",
                            cl::desc("Global gradient-norm clipping (0 = off)"),
                            cl::init(0.0), cl::cat(genCat));
static cl::opt<std::string>
    lrSchedule("lr-schedule",
               cl::desc("Learning-rate schedule TYPE[:name=value,...] with "
                        "DeepSpeed's scheduler type and parameter names, e.g. "
                        "WarmupDecayLR:warmup_max_lr=6e-4,warmup_num_steps="
                        "100,total_num_steps=1000"),
               cl::init(""), cl::cat(genCat));
static cl::opt<bool> biasCorrection("bias-correction",
                                    cl::desc("Adam bias correction"),
                                    cl::init(true), cl::cat(genCat));
static cl::opt<double> momentum("momentum",
                                cl::desc("SGD momentum (default 0: no "
                                         "momentum buffer)"),
                                cl::init(0.0), cl::cat(genCat));
static cl::opt<double> dampening("dampening", cl::desc("SGD dampening"),
                                 cl::init(0.0), cl::cat(genCat));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                              cl::init(false), cl::cat(genCat));
static cl::opt<std::string> optimizerStates(
    "optimizer-states",
    cl::desc("Precision of the optimizer's states: f32, or int8 (8-bit "
             "Adam/AdamW)"),
    cl::init("f32"), cl::cat(genCat));
static cl::opt<bool> noDecayBiasNorm(
    "no-decay-bias-norm",
    cl::desc("No weight decay for biases and norm weights (1-D parameters)"),
    cl::init(false), cl::cat(genCat));
static cl::opt<bool>
    noDecayEmbeddings("no-decay-embeddings",
                      cl::desc("No weight decay for the token embedding table"),
                      cl::init(false), cl::cat(genCat));
static cl::opt<std::string> labelType("label-type",
                                      cl::desc("Integer type of labels/tokens: "
                                               "i32 or i64 (default: i64 MLP, "
                                               "i32 GPT-2 and llama)"),
                                      cl::init(""), cl::cat(genCat));
static cl::opt<int64_t> ignoreIndex(
    "ignore-index",
    cl::desc("A label value the loss ignores (PyTorch's ignore_index, -100 in "
             "Hugging Face models); the loss is then the mean over the other "
             "labels of the global batch (default: none, every label is a "
             "class)"),
    cl::cat(genCat));
static cl::list<std::string>
    freeze("freeze",
           cl::desc("Freeze the parameters whose name matches this regular "
                    "expression (POSIX extended, matched anywhere in the "
                    "name, e.g. 'embed_tokens|norm'): they train not "
                    "(zero.param ... frozen); may be given more than once"),
           cl::value_desc("REGEX"), cl::cat(genCat));

static cl::opt<std::string> lora(
    "lora",
    cl::desc("LoRA adapters as PEFT's LoraConfig (llama): "
             "r=N,alpha=A,target=NAME[,NAME...] with NAME among q_proj, "
             "k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj "
             "(alpha defaults to PEFT's 8). Each targeted Linear computes "
             "W x + (alpha/r) B (A x) with trainable A [r, in] (normal, std "
             "1/r) and B [out, r] (zeros), named as PEFT's: "
             "<module>.lora_A.default.weight and <module>.lora_B.default."
             "weight beside the base <module>.base_layer.weight; every "
             "other parameter is frozen"),
    cl::value_desc("SPEC"), cl::cat(genCat));

namespace {

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
std::optional<LoraSpec> loraSpec;

/// The Linear modules of a Llama layer --lora may target.
constexpr const char *kLoraTargets[] = {"q_proj",   "k_proj",    "v_proj",
                                        "o_proj",   "gate_proj", "up_proj",
                                        "down_proj"};

/// Parses --lora; prints the error and returns nothing when it is bad.
std::optional<LoraSpec> parseLora(StringRef spec) {
  LoraSpec out;
  bool haveR = false, inTargets = false;
  auto fail = [&](const Twine &why) -> std::optional<LoraSpec> {
    WithColor::error() << "--lora '" << spec << "': " << why << "\n";
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

/// The --freeze patterns, how many parameters each matched, and the
/// parameters seen and frozen.
struct FreezeState {
  SmallVector<std::unique_ptr<Regex>> patterns;
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
FreezeState freezeState;

/// `v` as the `%e` text this tool wrote before it built IR reads back (seven
/// significant digits): the models keep the values they always had, so that
/// they train bit for bit as before.
double asWritten(double v) {
  std::string s;
  raw_string_ostream os(s);
  os << format("%e", v);
  return std::strtod(s.c_str(), nullptr);
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

/// Builds a module of zero.params and one zero.train_step, the step's body
/// op by op; values are named with a hint and a counter (%mm3).
class StepBuilder {
public:
  explicit StepBuilder(MLIRContext *ctx)
      : b(ctx), module(ModuleOp::create(UnknownLoc::get(ctx))),
        body(std::make_unique<Block>()) {
    b.setInsertionPointToEnd(body.get());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elementType = {}) {
    return RankedTensorType::get(shape,
                                 elementType ? elementType : b.getF32Type());
  }
  /// i32 or i64, as --label-type or the model's default says.
  Type labelElementType(StringRef defaultType) {
    StringRef t = ::labelType.empty() ? defaultType : StringRef(::labelType);
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

  /// An input of the step.
  Value input(StringRef name, RankedTensorType type) {
    return body->addArgument(type, named(name));
  }

  void param(StringRef name, ArrayRef<int64_t> shape, zero::InitKind init,
             double std = 0.0) {
    RankedTensorType type = tensor(shape);
    // Weight-decay groups: the 1-D parameters are the biases and norm
    // weights of every model here; the token embeddings end in these names.
    bool noDecay =
        (noDecayBiasNorm && shape.size() == 1) ||
        (noDecayEmbeddings && (name.ends_with("wte.weight") ||
                               name.ends_with("embed_tokens.weight")));
    // With --lora every parameter but the adapters is the frozen base.
    bool frozen =
        freezeState.isFrozen(name) || (loraSpec && !LoraSpec::isAdapter(name));
    OpBuilder mb = OpBuilder::atBlockEnd(module->getBody());
    zero::ParamOp::create(mb, mb.getUnknownLoc(), name, type, init,
                          init == zero::InitKind::normal ? f64(std) : nullptr,
                          /*rows=*/nullptr, noDecay ? f64(0.0) : nullptr,
                          /*compute=*/nullptr, frozen);
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
    if (ignoreIndex.getNumOccurrences())
      ignore = b.getI64IntegerAttr(ignoreIndex);
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
        APFloat(clip > 0 ? asWritten(clip) : 0.0), /*schedule=*/nullptr,
        /*offload=*/nullptr);
    step.getBody().push_back(body.release());
    if (failed(verify(*module)))
      return nullptr;
    return std::move(module);
  }

  OpBuilder b;

private:
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<Block> body;
  llvm::StringMap<RankedTensorType> paramTypes;
  int64_t counter = 0;
};

/// The optimizer of a step: the model's defaults under the flags.
zero::OptimizerAttr optimizerAttr(MLIRContext *ctx, zero::OptimizerKind defKind,
                                  double defLr, double beta2, double defWd,
                                  double eps = 1e-8) {
  zero::OptimizerKind kind = defKind;
  if (!optimizer.empty())
    kind = *zero::symbolizeOptimizerKind(optimizer);
  double l = lr > 0 ? lr.getValue() : defLr;
  double wd = weightDecay >= 0 ? weightDecay.getValue() : defWd;
  zero::LrScheduleAttr schedule;
  if (!lrSchedule.empty()) {
    schedule = zero::parseLrScheduleSpec(ctx, lrSchedule, [&] {
      return emitError(UnknownLoc::get(ctx)) << "--lr-schedule: ";
    });
    if (!schedule)
      return {};
  }
  // What the optimizer does not read (Lion's eps, bias correction) keeps
  // its default.
  if (!zero::hasOptimizerParam(kind, "eps"))
    eps = 1e-8;
  bool bc = biasCorrection || !zero::hasOptimizerParam(kind, "bias_correction");
  if (!zero::hasOptimizerParam(kind, "beta2"))
    beta2 = 0.999;
  bool sgd = zero::hasOptimizerParam(kind, "momentum");
  std::optional<zero::StatePrecision> states =
      zero::symbolizeStatePrecision(optimizerStates);
  if (!states) {
    emitError(UnknownLoc::get(ctx))
        << "--optimizer-states must be f32, bf16 or int8, got '"
        << optimizerStates << "'";
    return {};
  }
  return zero::OptimizerAttr::getChecked(
      [&] { return emitError(UnknownLoc::get(ctx)) << "--optimizer: "; }, ctx,
      kind, APFloat(asWritten(l)), APFloat(asWritten(0.9)),
      APFloat(asWritten(beta2)), APFloat(asWritten(eps)),
      APFloat(asWritten(wd)), bc, APFloat(sgd ? asWritten(momentum) : 0.0),
      APFloat(sgd ? asWritten(dampening) : 0.0), sgd && nesterov, *states,
      schedule);
}

/// The precision of a step: --dtype with DeepSpeed's loss-scaler defaults.
zero::PrecisionAttr precisionAttr(MLIRContext *ctx) {
  zero::PrecisionKind kind = dtype == "bf16"  ? zero::PrecisionKind::bf16
                             : dtype == "f16" ? zero::PrecisionKind::fp16
                                              : zero::PrecisionKind::fp32;
  return zero::PrecisionAttr::get(ctx, kind, /*initial_scale_power=*/16,
                                  /*loss_scale_window=*/1000, /*hysteresis=*/2,
                                  /*min_loss_scale=*/APFloat(1.0),
                                  /*loss_scale=*/APFloat(0.0));
}

OwningOpRef<ModuleOp> genMLP(MLIRContext *ctx) {
  SmallVector<StringRef> parts;
  StringRef(sizes).split(parts, ',');
  SmallVector<int64_t> widths;
  for (StringRef p : parts) {
    int64_t w;
    if (p.trim().getAsInteger(10, w) || w <= 0) {
      WithColor::error() << "--sizes: '" << p
                         << "' is not a positive integer\n";
      return nullptr;
    }
    widths.push_back(w);
  }
  if (widths.size() < 2) {
    WithColor::error()
        << "--sizes needs at least an input and an output width\n";
    return nullptr;
  }
  StepBuilder s(ctx);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    std::string fc = "fc" + std::to_string(i + 1);
    s.param(fc + ".weight", {widths[i], widths[i + 1]}, zero::InitKind::normal,
            1.0 / std::sqrt(static_cast<double>(widths[i])));
    s.param(fc + ".bias", {widths[i + 1]}, zero::InitKind::zeros);
  }
  Value x = s.input("x", s.tensor({batch, widths.front()}));
  Value y = s.input("y", s.tensor({batch}, s.labelElementType("i64")));
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    x = s.affine(x, "fc" + std::to_string(i + 1), "fc");
    if (i + 2 < widths.size())
      x = nn::ReluOp::create(s.b, s.fresh("relu"), x);
  }
  zero::OptimizerAttr opt =
      optimizerAttr(ctx, zero::OptimizerKind::adam, 1e-3, 0.999, 0.0);
  if (!opt)
    return nullptr;
  return s.finish(s.loss(x, y), opt, precisionAttr(ctx));
}

/// What GPT-2 and Llama share: the token embedding, the heads layout,
/// causal attention, residual blocks and the output projection. Sizes:
/// batch B, sequence T, head dimension D.
class Decoder {
public:
  Decoder(StepBuilder &s, int64_t B, int64_t T, int64_t D)
      : s(s), B(B), T(T), D(D) {}

  Value embed(StringRef table, Value tokens, StringRef hint) {
    Value w = s.getParam(table);
    return nn::EmbeddingOp::create(s.b, s.fresh(hint), w, tokens,
                                   /*rows=*/nullptr, /*padding_idx=*/nullptr);
  }

  /// [B, T, n * D] -> [B, n, T, D].
  Value toHeads(Value x, int64_t n) {
    Value r =
        nn::ReshapeOp::create(s.b, s.fresh("heads"), s.tensor({B, T, n, D}), x);
    return nn::TransposeOp::create(s.b, s.fresh("bhtd"), r, kSwapTH);
  }

  /// Causal attention of [B, n, T, D] heads, back to [B, T, n * D].
  Value attend(Value q, Value k, Value v) {
    Value att = nn::AttentionOp::create(
        s.b, s.fresh("att"), q.getType(), q, k, v, /*causal=*/true,
        /*scale=*/nullptr, /*window=*/nullptr, /*softcap=*/nullptr,
        /*alibi=*/nullptr);
    Value back = nn::TransposeOp::create(s.b, s.fresh("bthd"), att, kSwapTH);
    auto heads = cast<RankedTensorType>(back.getType()).getShape();
    return nn::ReshapeOp::create(s.b, s.fresh("merged"),
                                 s.tensor({B, T, heads[2] * D}), back);
  }

  /// x + block(norm(x)): a pre-norm residual block.
  Value residual(Value x, llvm::function_ref<Value(Value)> norm,
                 llvm::function_ref<Value(Value)> block) {
    Value y = block(norm(x));
    return s.add(x, y, "res");
  }

  /// The final norm, the output projection by `head` [V, C] (%logits) and
  /// the loss against `targets`.
  Value lmLoss(Value x, llvm::function_ref<Value(Value)> norm, StringRef head,
               Value targets) {
    Value xf = norm(x);
    Value w = s.getParam(head);
    Value logits = s.matmul(xf, w, /*transposeW=*/true, s.named("logits"));
    return s.loss(logits, targets);
  }

private:
  static constexpr int64_t kSwapTH[] = {0, 2, 1, 3};
  StepBuilder &s;
  int64_t B, T, D;
};

void gpt2Params(StepBuilder &s, int64_t T, int64_t C, int64_t V, int64_t L) {
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  auto normal = zero::InitKind::normal, zeros = zero::InitKind::zeros,
       ones = zero::InitKind::ones;
  // Hugging Face GPT2LMHeadModel's state-dict names; the Conv1D weights are
  // [in, out] as there, so exported files load into it unchanged.
  s.param("transformer.wte.weight", {V, C}, normal, 0.02);
  s.param("transformer.wpe.weight", {T, C}, normal, 0.01);
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    s.param(p + "ln_1.weight", {C}, ones);
    s.param(p + "ln_1.bias", {C}, zeros);
    s.param(p + "attn.c_attn.weight", {C, 3 * C}, normal, 0.02);
    s.param(p + "attn.c_attn.bias", {3 * C}, zeros);
    s.param(p + "attn.c_proj.weight", {C, C}, normal, projStd);
    s.param(p + "attn.c_proj.bias", {C}, zeros);
    s.param(p + "ln_2.weight", {C}, ones);
    s.param(p + "ln_2.bias", {C}, zeros);
    s.param(p + "mlp.c_fc.weight", {C, 4 * C}, normal, 0.02);
    s.param(p + "mlp.c_fc.bias", {4 * C}, zeros);
    s.param(p + "mlp.c_proj.weight", {4 * C, C}, normal, projStd);
    s.param(p + "mlp.c_proj.bias", {C}, zeros);
  }
  s.param("transformer.ln_f.weight", {C}, ones);
  s.param("transformer.ln_f.bias", {C}, zeros);
  if (untied)
    s.param("lm_head.weight", {V, C}, normal, 0.02);
}

OwningOpRef<ModuleOp> genGPT2(MLIRContext *ctx) {
  int64_t B = batch, T = ::seq, C = hidden, H = heads, V = vocab, L = layers;
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0 || V <= 0 || L <= 0) {
    WithColor::error() << "gpt2 sizes must be positive\n";
    return nullptr;
  }
  if (C % H != 0) {
    WithColor::error() << "--hidden " << C << " is not divisible by --heads "
                       << H << "\n";
    return nullptr;
  }
  StepBuilder s(ctx);
  gpt2Params(s, T, C, V, L);
  Type lt = s.labelElementType("i32");
  Value tokens = s.input("tokens", s.tensor({B, T}, lt));
  Value targets = s.input("targets", s.tensor({B, T}, lt));
  Decoder d(s, B, T, C / H);
  auto layerNorm = [&](const std::string &name) {
    return [&s, name](Value x) -> Value {
      Value w = s.getParam(name + ".weight");
      Value bias = s.getParam(name + ".bias");
      return nn::LayerNormOp::create(s.b, s.fresh("ln"), x, w, bias,
                                     s.f64(1e-5));
    };
  };
  Value tok = d.embed("transformer.wte.weight", tokens, "tok");
  Value wpe = s.getParam("transformer.wpe.weight");
  Value x = s.add(tok, wpe, "x");
  RankedTensorType xt = s.tensor({B, T, C});
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    x = d.residual(x, layerNorm(p + "ln_1"), [&](Value h) {
      Value qkv = s.affine(h, p + "attn.c_attn", "lin");
      auto split = nn::SplitOp::create(s.b, s.namedResults({"q", "k", "v"}),
                                       TypeRange{xt, xt, xt}, qkv, 2);
      SmallVector<Value, 3> heads4;
      for (Value t : split.getResults())
        heads4.push_back(d.toHeads(t, H));
      Value merged = d.attend(heads4[0], heads4[1], heads4[2]);
      return s.affine(merged, p + "attn.c_proj", "lin");
    });
    x = d.residual(x, layerNorm(p + "ln_2"), [&](Value h) {
      Value fc = s.affine(h, p + "mlp.c_fc", "lin");
      Value g = nn::GeluOp::create(s.b, s.fresh("gelu"), fc);
      return s.affine(g, p + "mlp.c_proj", "lin");
    });
  }
  Value loss =
      d.lmLoss(x, layerNorm("transformer.ln_f"),
               untied ? "lm_head.weight" : "transformer.wte.weight", targets);
  return s.finish(
      loss, optimizerAttr(ctx, zero::OptimizerKind::adamw, 6e-4, 0.95, 0.1),
      precisionAttr(ctx));
}

/// A value given on the command line, else the preset's.
template <typename T, typename U>
T pick(const cl::opt<T> &opt, U presetValue) {
  return opt.getNumOccurrences() ? opt.getValue() : static_cast<T>(presetValue);
}

/// A Llama's sizes: the preset's, overridden by the flags.
struct LlamaShape {
  int64_t B, T, C, H, KV, F, V, L;
  double theta, eps;
  bool tied;
};

/// The sizes of the Llama to generate, or none (with an error) where they do
/// not make one.
std::optional<LlamaShape> getLlamaShape() {
  const LlamaPreset &pr = llamaPresets[static_cast<int>(preset.getValue())];
  int64_t B = pick(batch, pr.batch), T = pick(::seq, pr.seq);
  int64_t C = pick(hidden, pr.hidden), H = pick(heads, pr.heads);
  int64_t KV = pick(kvHeads, pr.kvHeads), F = pick(ffn, pr.ffn);
  int64_t V = pick(vocab, pr.vocab), L = pick(layers, pr.layers);
  double theta = pick(ropeTheta, pr.ropeTheta);
  double eps = pick(normEps, pr.normEps);
  bool isTied = pick(tied, pr.tied);
  struct {
    const char *flag;
    int64_t value;
  } dims[] = {{"--batch", B}, {"--seq", T},       {"--hidden", C},
              {"--heads", H}, {"--kv-heads", KV}, {"--ffn", F},
              {"--vocab", V}, {"--layers", L}};
  for (const auto &d : dims)
    if (d.value <= 0) {
      WithColor::error() << d.flag << " must be positive, got " << d.value
                         << "\n";
      return std::nullopt;
    }
  if (C % H != 0) {
    WithColor::error() << "--hidden " << C << " is not divisible by --heads "
                       << H << "\n";
    return std::nullopt;
  }
  if (H % KV != 0) {
    WithColor::error() << "--kv-heads " << KV << " does not divide --heads "
                       << H << "\n";
    return std::nullopt;
  }
  int64_t D = C / H;
  if (D % 2 != 0) {
    WithColor::error() << "the head dimension --hidden / --heads = " << C
                       << " / " << H << " = " << D
                       << " is odd; rope rotates pairs\n";
    return std::nullopt;
  }
  if (!(theta > 0 && std::isfinite(theta))) {
    WithColor::error() << "--rope-theta must be positive, got " << theta
                       << "\n";
    return std::nullopt;
  }
  if (!(eps > 0 && std::isfinite(eps))) {
    WithColor::error() << "--norm-eps must be positive, got " << eps << "\n";
    return std::nullopt;
  }
  return LlamaShape{B, T, C, H, KV, F, V, L, theta, eps, isTied};
}

/// A Llama's weights in the order of Hugging Face's state dict;
/// initializer_range 0.02. A projection's weight is [out, in]; with LoRA on
/// it, PEFT's base layer and adapters in PEFT's state-dict order.
void llamaParams(StepBuilder &s, const LlamaShape &m) {
  auto normal = zero::InitKind::normal, ones = zero::InitKind::ones;
  int64_t C = m.C, F = m.F, kvDim = m.C / m.H * m.KV;
  s.param("model.embed_tokens.weight", {m.V, C}, normal, 0.02);
  auto proj = [&](const std::string &module, int64_t out, int64_t in) {
    if (!loraSpec || !loraSpec->isTarget(module)) {
      s.param(module + ".weight", {out, in}, normal, 0.02);
      return;
    }
    int64_t r = loraSpec->r;
    s.param(module + ".base_layer.weight", {out, in}, normal, 0.02);
    s.param(module + ".lora_A.default.weight", {r, in}, normal, 1.0 / r);
    s.param(module + ".lora_B.default.weight", {out, r}, zero::InitKind::zeros);
  };
  for (int64_t l = 0; l < m.L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    proj(p + "self_attn.q_proj", C, C);
    proj(p + "self_attn.k_proj", kvDim, C);
    proj(p + "self_attn.v_proj", kvDim, C);
    proj(p + "self_attn.o_proj", C, C);
    proj(p + "mlp.gate_proj", F, C);
    proj(p + "mlp.up_proj", F, C);
    proj(p + "mlp.down_proj", C, F);
    s.param(p + "input_layernorm.weight", {C}, ones);
    s.param(p + "post_attention_layernorm.weight", {C}, ones);
  }
  s.param("model.norm.weight", {C}, ones);
  if (!m.tied)
    s.param("lm_head.weight", {m.V, C}, normal, 0.02);
}

/// nn.Linear without bias, x @ W^T; with LoRA on it (PEFT's lora.Linear,
/// dropout 0): W x + (alpha / r) B (A x).
Value llamaLinear(StepBuilder &s, Value x, const std::string &name) {
  auto matmulT = [&](Value in, const std::string &weight) {
    Value w = s.getParam(weight);
    return s.matmul(in, w, /*transposeW=*/true, s.fresh("mm"));
  };
  if (!loraSpec || !loraSpec->isTarget(name))
    return matmulT(x, name + ".weight");
  Value y = matmulT(x, name + ".base_layer.weight");
  Value ax = matmulT(x, name + ".lora_A.default.weight");
  Value bax = matmulT(ax, name + ".lora_B.default.weight");
  Value scaled = nn::ScaleOp::create(s.b, s.fresh("lora"), bax,
                                     s.f64(loraSpec->alpha / loraSpec->r));
  return s.add(y, scaled, "mm");
}

/// Hugging Face's LlamaForCausalLM, with its state-dict names and [out, in]
/// projection weights, so that exported files load into it unchanged.
OwningOpRef<ModuleOp> genLlama(MLIRContext *ctx) {
  std::optional<LlamaShape> shape = getLlamaShape();
  if (!shape)
    return nullptr;
  const LlamaShape &m = *shape;
  StepBuilder s(ctx);
  llamaParams(s, m);
  Type lt = s.labelElementType("i32");
  Value tokens = s.input("tokens", s.tensor({m.B, m.T}, lt));
  Value targets = s.input("targets", s.tensor({m.B, m.T}, lt));
  Decoder d(s, m.B, m.T, m.C / m.H);
  auto rmsNorm = [&](const std::string &name) {
    return [&s, &m, name](Value x) -> Value {
      Value w = s.getParam(name + ".weight");
      return nn::RmsNormOp::create(s.b, s.fresh("norm"), x, w, s.f64(m.eps));
    };
  };
  auto rope = [&](Value x) -> Value {
    return nn::RopeOp::create(s.b, s.fresh("rope"), x, s.f64(m.theta),
                              /*inv_freq=*/nullptr, /*scale=*/nullptr,
                              /*inverse=*/false, /*interleaved=*/false);
  };
  Value x = d.embed("model.embed_tokens.weight", tokens, "x");
  for (int64_t l = 0; l < m.L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    x = d.residual(x, rmsNorm(p + "input_layernorm"), [&](Value h) {
      Value q = llamaLinear(s, h, p + "self_attn.q_proj");
      Value k = llamaLinear(s, h, p + "self_attn.k_proj");
      Value v = llamaLinear(s, h, p + "self_attn.v_proj");
      Value qr = rope(d.toHeads(q, m.H));
      Value kr = rope(d.toHeads(k, m.KV));
      Value merged = d.attend(qr, kr, d.toHeads(v, m.KV));
      return llamaLinear(s, merged, p + "self_attn.o_proj");
    });
    x = d.residual(x, rmsNorm(p + "post_attention_layernorm"), [&](Value h) {
      Value gate = llamaLinear(s, h, p + "mlp.gate_proj");
      Value up = llamaLinear(s, h, p + "mlp.up_proj");
      Value act = nn::SwigluOp::create(s.b, s.fresh("swiglu"), gate, up);
      return llamaLinear(s, act, p + "mlp.down_proj");
    });
  }
  Value loss = d.lmLoss(x, rmsNorm("model.norm"),
                        m.tied ? "model.embed_tokens.weight" : "lm_head.weight",
                        targets);
  // The Llama 2 paper's AdamW: beta2 0.95, eps 1e-5, weight decay 0.1.
  return s.finish(
      loss,
      optimizerAttr(ctx, zero::OptimizerKind::adamw, 3e-4, 0.95, 0.1, 1e-5),
      precisionAttr(ctx));
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(genCat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "zero-model-gen: write an MLP, GPT-2 or Llama training step as .mlir\n\n"
      "  zero-model-gen mlp --sizes 784,256,256,10 --batch 64 -o mlp.mlir\n"
      "  zero-model-gen gpt2 --layers 12 --hidden 768 --heads 12 --vocab 50257 "
      "--seq 1024 --batch 8 -o gpt2.mlir\n"
      "  zero-model-gen llama --preset llama-3-8b --seq 4096 --dtype bf16 "
      "-o llama.mlir\n");
  if (dtype != "f32" && dtype != "bf16" && dtype != "f16") {
    WithColor::error() << "--dtype must be f32, bf16 or f16, got '" << dtype
                       << "'\n";
    return 1;
  }
  if (!labelType.empty() && labelType != "i32" && labelType != "i64") {
    WithColor::error() << "--label-type must be i32 or i64\n";
    return 1;
  }
  bool i32Labels =
      labelType == "i32" || (labelType.empty() && modelKind != "mlp");
  if (ignoreIndex.getNumOccurrences() && i32Labels &&
      (ignoreIndex < INT32_MIN || ignoreIndex > INT32_MAX)) {
    WithColor::error() << "--ignore-index " << ignoreIndex
                       << " does not fit the i32 labels\n";
    return 1;
  }
  if (!optimizer.empty() && !zero::symbolizeOptimizerKind(optimizer)) {
    WithColor::error() << "--optimizer must be adam, adamw, lion or sgd\n";
    return 1;
  }
  if (batch <= 0) {
    WithColor::error() << "--batch must be positive\n";
    return 1;
  }
  // lr and weight-decay use sentinels for "model default": reject explicit
  // values the sentinel check would otherwise silently replace.
  if (lr.getNumOccurrences() && !(lr > 0 && std::isfinite(lr))) {
    WithColor::error() << "--lr must be positive, got " << lr << "\n";
    return 1;
  }
  if (weightDecay.getNumOccurrences() &&
      !(weightDecay >= 0 && std::isfinite(weightDecay))) {
    WithColor::error() << "--weight-decay must be >= 0, got " << weightDecay
                       << "\n";
    return 1;
  }
  if (!(clip >= 0 && std::isfinite(clip))) {
    WithColor::error() << "--gradient-clipping must be >= 0 (0 = off), got "
                       << clip << "\n";
    return 1;
  }
  // Options of one model family are errors for the others, not ignored.
  if (modelKind != "llama")
    for (cl::Option *o : std::initializer_list<cl::Option *>{
             &preset, &kvHeads, &ffn, &ropeTheta, &normEps, &tied, &lora})
      if (o->getNumOccurrences()) {
        WithColor::error() << "--" << o->ArgStr << " is a llama option\n";
        return 1;
      }
  if (modelKind == "llama" && untied.getNumOccurrences()) {
    WithColor::error() << "--untied is a gpt2 option (llama is untied unless "
                          "--tied)\n";
    return 1;
  }
  if (lora.getNumOccurrences() && !(loraSpec = parseLora(lora)))
    return 1;
  for (const std::string &pattern : freeze) {
    auto regex = std::make_unique<Regex>(pattern, Regex::NoFlags);
    std::string why;
    if (!regex->isValid(why)) {
      WithColor::error() << "--freeze '" << pattern
                         << "' is not a valid regular expression: " << why
                         << "\n";
      return 1;
    }
    freezeState.patterns.push_back(std::move(regex));
    freezeState.matches.push_back(0);
  }
  std::error_code ec;
  ToolOutputFile out(outputFile, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error() << "cannot open '" << outputFile << "': " << ec.message()
                       << "\n";
    return 1;
  }
  DialectRegistry registry;
  registry.insert<nn::NNDialect, zero::ZeroDialect>();
  registry.addExtension(+[](MLIRContext *ctx, nn::NNDialect *) {
    nn::SplitOp::attachInterface<SplitResultNames>(*ctx);
  });
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  ScopedDiagnosticHandler diagnostics(&ctx, [](Diagnostic &diag) {
    WithColor::error() << diag.str() << "\n";
    return success();
  });
  // The model is checked against --freeze before anything is written.
  OwningOpRef<ModuleOp> module;
  if (modelKind == "mlp")
    module = genMLP(&ctx);
  else if (modelKind == "gpt2")
    module = genGPT2(&ctx);
  else if (modelKind == "llama")
    module = genLlama(&ctx);
  else {
    WithColor::error() << "unknown model '" << modelKind
                       << "' (expected mlp, gpt2 or llama)\n";
    return 1;
  }
  if (!module)
    return 1;
  for (auto [pattern, count] : llvm::zip(freeze, freezeState.matches))
    if (count == 0) {
      WithColor::error() << "--freeze '" << pattern
                         << "' matches no parameter of the model\n";
      return 1;
    }
  if (!freeze.empty() && freezeState.frozen == freezeState.params) {
    WithColor::error() << "--freeze '" << llvm::join(freeze, "', --freeze '")
                       << "' match every parameter of the model: nothing "
                          "would train\n";
    return 1;
  }
  out.os() << "// Generated by zero-model-gen.\n";
  (*module)->print(out.os(), OpPrintingFlags().printNameLocAsPrefix());
  out.keep();
  return 0;
}
