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
static const LlamaPreset *
findLlamaPreset(const std::optional<std::string> &name) {
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
        /*offload=*/nullptr);
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
  int64_t counter = 0;
};

/// The optimizer of a step: the model's defaults under the flags.
zero::OptimizerAttr optimizerAttr(MLIRContext *ctx, const Gen &g,
                                  zero::OptimizerKind defKind, double defLr,
                                  double beta2, double defWd,
                                  double eps = 1e-8) {
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
  return zero::OptimizerAttr::getChecked(
      [&] { return emitError(UnknownLoc::get(ctx)) << "--optimizer: "; }, ctx,
      kind, APFloat(asWritten(l)), APFloat(asWritten(0.9)),
      APFloat(asWritten(beta2)), APFloat(asWritten(eps)),
      APFloat(asWritten(wd)), bc, APFloat(sgd ? asWritten(g.momentum) : 0.0),
      APFloat(sgd ? asWritten(g.dampening) : 0.0), sgd && g.nesterov, *states,
      // --lr is both of Muon's halves' (DeepSpeed's shared lr).
      schedule,
      APFloat(kind == zero::OptimizerKind::muon ? asWritten(l) : 1e-3),
      APFloat(0.95), true, int64_t(5), APFloat(3.4445), APFloat(-4.775),
      APFloat(2.0315), APFloat(1e-7), zero::MuonAdjustLr::original,
      APFloat(-0.8), APFloat(-1.0), APFloat(1e-3), APFloat(1.0), false,
      g.bf16Masters);
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
  Value x = s.input("x", s.tensor({g.batch, widths.front()}));
  Value y = s.input("y", s.tensor({g.batch}, s.labelElementType("i64")));
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
        /*alibi=*/nullptr, /*sinks=*/Value());
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
  if (s.g.untied)
    s.param("lm_head.weight", {V, C}, normal, 0.02);
}

OwningOpRef<ModuleOp> genGPT2(MLIRContext *ctx, Gen &g) {
  int64_t B = g.batch, T = g.seq, C = g.hidden, H = g.heads, V = g.vocab,
          L = g.layers;
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0 || V <= 0 || L <= 0) {
    emitError(UnknownLoc::get(ctx)) << "gpt2 sizes must be positive";
    return nullptr;
  }
  if (C % H != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--hidden " << C << " is not divisible by --heads " << H;
    return nullptr;
  }
  StepBuilder s(ctx, g);
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
               g.untied ? "lm_head.weight" : "transformer.wte.weight", targets);
  return s.finish(
      loss, optimizerAttr(ctx, g, zero::OptimizerKind::adamw, 6e-4, 0.95, 0.1),
      precisionAttr(ctx, g));
}

/// A value given on the command line, else the preset's.
template <typename T, typename U>
T pick(const std::optional<T> &opt, U presetValue) {
  return opt ? *opt : static_cast<T>(presetValue);
}

/// A Llama's sizes: the preset's, overridden by the flags.
struct LlamaShape {
  int64_t B, T, C, H, KV, F, V, L;
  double theta, eps;
  bool tied;
};

/// The sizes of the Llama to generate, or none (with an error) where they do
/// not make one.
std::optional<LlamaShape> getLlamaShape(MLIRContext *ctx,
                                        const ModelGenOptions &o) {
  const LlamaPreset &pr = *findLlamaPreset(o.preset);
  int64_t B = pick(o.batch, pr.batch), T = pick(o.seq, pr.seq);
  int64_t C = pick(o.hidden, pr.hidden), H = pick(o.heads, pr.heads);
  int64_t KV = pick(o.kvHeads, pr.kvHeads), F = pick(o.ffn, pr.ffn);
  int64_t V = pick(o.vocab, pr.vocab), L = pick(o.layers, pr.layers);
  double theta = pick(o.ropeTheta, pr.ropeTheta);
  double eps = pick(o.normEps, pr.normEps);
  bool isTied = pick(o.tied, pr.tied);
  struct {
    const char *flag;
    int64_t value;
  } dims[] = {{"--batch", B}, {"--seq", T},       {"--hidden", C},
              {"--heads", H}, {"--kv-heads", KV}, {"--ffn", F},
              {"--vocab", V}, {"--layers", L}};
  for (const auto &d : dims)
    if (d.value <= 0) {
      emitError(UnknownLoc::get(ctx))
          << d.flag << " must be positive, got " << d.value;
      return std::nullopt;
    }
  if (C % H != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--hidden " << C << " is not divisible by --heads " << H;
    return std::nullopt;
  }
  if (H % KV != 0) {
    emitError(UnknownLoc::get(ctx))
        << "--kv-heads " << KV << " does not divide --heads " << H;
    return std::nullopt;
  }
  int64_t D = C / H;
  if (D % 2 != 0) {
    emitError(UnknownLoc::get(ctx))
        << "the head dimension --hidden / --heads = " << C << " / " << H
        << " = " << D << " is odd; rope rotates pairs";
    return std::nullopt;
  }
  if (!(theta > 0 && std::isfinite(theta))) {
    emitError(UnknownLoc::get(ctx))
        << "--rope-theta must be positive, got " << theta;
    return std::nullopt;
  }
  if (!(eps > 0 && std::isfinite(eps))) {
    emitError(UnknownLoc::get(ctx))
        << "--norm-eps must be positive, got " << eps;
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
    if (!s.g.loraSpec || !s.g.loraSpec->isTarget(module)) {
      s.param(module + ".weight", {out, in}, normal, 0.02);
      return;
    }
    int64_t r = s.g.loraSpec->r;
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
  if (!s.g.loraSpec || !s.g.loraSpec->isTarget(name))
    return matmulT(x, name + ".weight");
  Value y = matmulT(x, name + ".base_layer.weight");
  Value ax = matmulT(x, name + ".lora_A.default.weight");
  Value bax = matmulT(ax, name + ".lora_B.default.weight");
  Value scaled = nn::ScaleOp::create(
      s.b, s.fresh("lora"), bax, s.f64(s.g.loraSpec->alpha / s.g.loraSpec->r));
  return s.add(y, scaled, "mm");
}

/// Hugging Face's LlamaForCausalLM, with its state-dict names and [out, in]
/// projection weights, so that exported files load into it unchanged.
OwningOpRef<ModuleOp> genLlama(MLIRContext *ctx, Gen &g) {
  std::optional<LlamaShape> shape = getLlamaShape(ctx, g.o);
  if (!shape)
    return nullptr;
  const LlamaShape &m = *shape;
  StepBuilder s(ctx, g);
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
      optimizerAttr(ctx, g, zero::OptimizerKind::adamw, 3e-4, 0.95, 0.1, 1e-5),
      precisionAttr(ctx, g));
}

} // namespace

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
  if (!g.optimizer.empty() && !zero::symbolizeOptimizerKind(g.optimizer))
    return error()
           << "--optimizer must be adam, adamw, lion, sgd, muon or adafactor";
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
