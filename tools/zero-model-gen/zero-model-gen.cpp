//===- zero-model-gen.cpp - MLP, GPT-2 and Llama training steps as .mlir --===//
//
// Part of the zero-mlir project.
//
// Prints the models as text (no MLIR context), so that a 96-layer,
// 175B-parameter model is written in milliseconds; every form it prints is
// parsed and verified by the lit tests.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

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
static cl::opt<std::string> optimizer("optimizer",
                                      cl::desc("adam or adamw (default: adam "
                                               "MLP, adamw GPT-2 and llama)"),
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

/// The loss op's ` ignore_index N`, or nothing.
std::string ignoreIndexSuffix() {
  return ignoreIndex.getNumOccurrences()
             ? " ignore_index " + std::to_string(ignoreIndex.getValue())
             : "";
}

std::string fmt(double v) {
  std::string s;
  raw_string_ostream os(s);
  os << format("%e", v);
  return s;
}

std::string tensor(ArrayRef<int64_t> shape, StringRef et) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  s += et.str() + ">";
  return s;
}

/// Emits the body of a train step with readable SSA names.
class Emitter {
public:
  explicit Emitter(raw_ostream &os) : os(os) {}

  void param(StringRef name, ArrayRef<int64_t> shape, StringRef init,
             double std = 0.0) {
    header += "  zero.param @" + name.str() + " : " + tensor(shape, "f32") +
              " init " + init.str();
    if (init == "normal")
      header += " std " + fmt(std);
    // Weight-decay groups: the 1-D parameters are the biases and norm
    // weights of every model here; the token embeddings end in these names.
    if ((noDecayBiasNorm && shape.size() == 1) ||
        (noDecayEmbeddings && (name.ends_with("wte.weight") ||
                               name.ends_with("embed_tokens.weight"))))
      header += " weight_decay " + fmt(0.0);
    // With --lora every parameter but the adapters is the frozen base.
    if (freezeState.isFrozen(name) || (loraSpec && !LoraSpec::isAdapter(name)))
      header += " frozen";
    header += "\n";
    shapes[name.str()] = SmallVector<int64_t>(shape);
  }

  std::string getParam(StringRef name) {
    std::string v = fresh("p");
    body << "    " << v << " = zero.get_param @" << name << " : "
         << tensor(shapes[name.str()], "f32") << "\n";
    return v;
  }

  std::string fresh(StringRef hint) {
    return "%" + hint.str() + std::to_string(counter++);
  }

  std::string header;
  std::string bodyText;
  raw_string_ostream body{bodyText};
  raw_ostream &os;
  std::map<std::string, SmallVector<int64_t>> shapes;
  int64_t counter = 0;
};

void emitStep(raw_ostream &os, Emitter &e, StringRef args, StringRef opt,
              StringRef prec, std::string loss) {
  os << "// Generated by zero-model-gen.\n";
  os << "module {\n" << e.header;
  os << "  zero.train_step @train(" << args << ") optimizer " << opt
     << " precision " << prec;
  if (clip > 0)
    os << " gradient_clipping " << fmt(clip);
  os << " {\n" << e.bodyText;
  os << "    zero.return " << loss << " : tensor<f32>\n  }\n}\n";
}

/// --lr-schedule as #zero.lr_schedule text: DeepSpeed's type names to the
/// attribute's kinds, name=value to `name = value`. The parser of the
/// generated file checks names and values (zero-opt reports them).
std::string scheduleAttr(StringRef spec) {
  auto [type, rest] = spec.split(':');
  std::string kind = StringSwitch<std::string>(type.trim())
                         .Case("WarmupLR", "warmup_lr")
                         .Case("WarmupDecayLR", "warmup_decay_lr")
                         .Case("WarmupCosineLR", "warmup_cosine_lr")
                         .Case("OneCycle", "one_cycle")
                         .Case("LRRangeTest", "lr_range_test")
                         .Default(type.trim().str());
  std::string attr = "#zero.lr_schedule<kind = " + kind;
  SmallVector<StringRef> items;
  rest.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, value] = item.split('=');
    name = name.trim();
    value = value.trim();
    // The whole numbers, flags and words as written; the rest are doubles,
    // which MLIR writes with a fraction (1e-3 would not parse).
    bool verbatim =
        StringSwitch<bool>(name)
            .Cases({"warmup_num_steps", "total_num_steps", "warmup_type",
                    "cycle_first_step_size", "cycle_second_step_size",
                    "decay_step_size", "cycle_momentum",
                    "lr_range_test_step_size", "lr_range_test_staircase"},
                   true)
            .Default(false);
    double d;
    std::string text = value.str();
    if (!verbatim && !value.getAsDouble(d))
      text = fmt(d);
    attr += ", " + name.str() + " = " + text;
  }
  return attr + ">";
}

std::string optimizerAttr(StringRef defKind, double defLr, double beta2,
                          double defWd, double eps = 1e-8) {
  std::string kind = optimizer.empty() ? defKind.str() : optimizer.getValue();
  double l = lr > 0 ? lr.getValue() : defLr;
  double wd = weightDecay >= 0 ? weightDecay.getValue() : defWd;
  std::string attr = "#zero.optimizer<kind = " + kind + ", lr = " + fmt(l) +
                     ", beta1 = " + fmt(0.9) + ", beta2 = " + fmt(beta2) +
                     ", eps = " + fmt(eps) + ", weight_decay = " + fmt(wd);
  if (!biasCorrection)
    attr += ", bias_correction = false";
  if (!lrSchedule.empty())
    attr += ", schedule = " + scheduleAttr(lrSchedule);
  return attr + ">";
}

std::string precisionAttr() {
  std::string kind = dtype == "bf16"  ? "bf16"
                     : dtype == "f16" ? "fp16"
                                      : "fp32";
  return "#zero.precision<kind = " + kind + ">";
}

bool genMLP(raw_ostream &os) {
  SmallVector<StringRef> parts;
  StringRef(sizes).split(parts, ',');
  SmallVector<int64_t> widths;
  for (StringRef p : parts) {
    int64_t w;
    if (p.trim().getAsInteger(10, w) || w <= 0) {
      WithColor::error() << "--sizes: '" << p
                         << "' is not a positive integer\n";
      return false;
    }
    widths.push_back(w);
  }
  if (widths.size() < 2) {
    WithColor::error()
        << "--sizes needs at least an input and an output width\n";
    return false;
  }
  std::string lt = labelType.empty() ? "i64" : labelType.getValue();
  Emitter e(os);
  std::string x = "%x";
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    std::string fc = "fc" + std::to_string(i + 1);
    e.param(fc + ".weight", {widths[i], widths[i + 1]}, "normal",
            1.0 / std::sqrt(static_cast<double>(widths[i])));
    e.param(fc + ".bias", {widths[i + 1]}, "zeros");
  }
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    std::string fc = "fc" + std::to_string(i + 1);
    std::string act = tensor({batch, widths[i + 1]}, "f32");
    std::string w = e.getParam(fc + ".weight");
    std::string y = e.fresh("mm");
    e.body << "    " << y << " = nn.matmul " << x << ", " << w << " : "
           << tensor({batch, widths[i]}, "f32") << ", "
           << tensor({widths[i], widths[i + 1]}, "f32") << " -> " << act
           << "\n";
    std::string b = e.getParam(fc + ".bias");
    std::string z = e.fresh("fc");
    e.body << "    " << z << " = nn.add " << y << ", " << b << " : " << act
           << ", " << tensor({widths[i + 1]}, "f32") << "\n";
    x = z;
    if (i + 2 < widths.size()) {
      std::string r = e.fresh("relu");
      e.body << "    " << r << " = nn.relu " << x << " : " << act << "\n";
      x = r;
    }
  }
  e.body << "    %loss = nn.softmax_cross_entropy " << x << ", %y"
         << ignoreIndexSuffix() << " : "
         << tensor({batch, widths.back()}, "f32") << ", " << tensor({batch}, lt)
         << " -> tensor<f32>\n";
  std::string args = "%x: " + tensor({batch, widths.front()}, "f32") +
                     ", %y: " + tensor({batch}, lt);
  emitStep(os, e, args, optimizerAttr("adam", 1e-3, 0.999, 0.0),
           precisionAttr(), "%loss");
  return true;
}

bool genGPT2(raw_ostream &os) {
  int64_t B = batch, T = seq, C = hidden, H = heads, V = vocab, L = layers;
  if (B <= 0 || T <= 0 || C <= 0 || H <= 0 || V <= 0 || L <= 0) {
    WithColor::error() << "gpt2 sizes must be positive\n";
    return false;
  }
  if (C % H != 0) {
    WithColor::error() << "--hidden " << C << " is not divisible by --heads "
                       << H << "\n";
    return false;
  }
  int64_t D = C / H;
  std::string lt = labelType.empty() ? "i32" : labelType.getValue();
  std::string f = "f32";
  Emitter e(os);
  double projStd = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  // Hugging Face GPT2LMHeadModel's state-dict names; the Conv1D weights are
  // [in, out] as there, so exported files load into it unchanged.
  e.param("transformer.wte.weight", {V, C}, "normal", 0.02);
  e.param("transformer.wpe.weight", {T, C}, "normal", 0.01);
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    e.param(p + "ln_1.weight", {C}, "ones");
    e.param(p + "ln_1.bias", {C}, "zeros");
    e.param(p + "attn.c_attn.weight", {C, 3 * C}, "normal", 0.02);
    e.param(p + "attn.c_attn.bias", {3 * C}, "zeros");
    e.param(p + "attn.c_proj.weight", {C, C}, "normal", projStd);
    e.param(p + "attn.c_proj.bias", {C}, "zeros");
    e.param(p + "ln_2.weight", {C}, "ones");
    e.param(p + "ln_2.bias", {C}, "zeros");
    e.param(p + "mlp.c_fc.weight", {C, 4 * C}, "normal", 0.02);
    e.param(p + "mlp.c_fc.bias", {4 * C}, "zeros");
    e.param(p + "mlp.c_proj.weight", {4 * C, C}, "normal", projStd);
    e.param(p + "mlp.c_proj.bias", {C}, "zeros");
  }
  e.param("transformer.ln_f.weight", {C}, "ones");
  e.param("transformer.ln_f.bias", {C}, "zeros");
  if (untied)
    e.param("lm_head.weight", {V, C}, "normal", 0.02);

  std::string xt = tensor({B, T, C}, f);
  auto &b = e.body;
  auto layerNorm = [&](std::string x, const std::string &name) {
    std::string w = e.getParam(name + ".weight");
    std::string bb = e.getParam(name + ".bias");
    std::string y = e.fresh("ln");
    b << "    " << y << " = nn.layer_norm " << x << ", " << w << ", " << bb
      << " eps " << fmt(1e-5) << " : " << xt << ", " << tensor({C}, f) << ", "
      << tensor({C}, f) << "\n";
    return y;
  };
  auto linear = [&](std::string x, const std::string &name, int64_t in,
                    int64_t out) {
    std::string w = e.getParam(name + ".weight");
    std::string y = e.fresh("mm");
    std::string yt = tensor({B, T, out}, f);
    b << "    " << y << " = nn.matmul " << x << ", " << w << " : "
      << tensor({B, T, in}, f) << ", " << tensor({in, out}, f) << " -> " << yt
      << "\n";
    std::string bias = e.getParam(name + ".bias");
    std::string z = e.fresh("lin");
    b << "    " << z << " = nn.add " << y << ", " << bias << " : " << yt << ", "
      << tensor({out}, f) << "\n";
    return z;
  };

  std::string wte = e.getParam("transformer.wte.weight");
  std::string tok = e.fresh("tok");
  b << "    " << tok << " = nn.embedding " << wte
    << "[%tokens] : " << tensor({V, C}, f) << ", " << tensor({B, T}, lt)
    << " -> " << xt << "\n";
  std::string wpe = e.getParam("transformer.wpe.weight");
  std::string x = e.fresh("x");
  b << "    " << x << " = nn.add " << tok << ", " << wpe << " : " << xt << ", "
    << tensor({T, C}, f) << "\n";
  std::string headT = tensor({B, T, H, D}, f), bhtd = tensor({B, H, T, D}, f);
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    std::string h = layerNorm(x, p + "ln_1");
    std::string qkv = linear(h, p + "attn.c_attn", C, 3 * C);
    std::string q = e.fresh("q"), k = e.fresh("k"), v = e.fresh("v");
    b << "    " << q << ", " << k << ", " << v << " = nn.split " << qkv
      << " axis 2 : " << tensor({B, T, 3 * C}, f) << " -> " << xt << ", " << xt
      << ", " << xt << "\n";
    SmallVector<std::string, 3> heads4;
    for (const std::string &t : {q, k, v}) {
      std::string r = e.fresh("heads");
      b << "    " << r << " = nn.reshape " << t << " : " << xt << " -> "
        << headT << "\n";
      std::string tr = e.fresh("bhtd");
      b << "    " << tr << " = nn.transpose " << r
        << " [0, 2, 1, 3] : " << headT << " -> " << bhtd << "\n";
      heads4.push_back(tr);
    }
    std::string att = e.fresh("att");
    b << "    " << att << " = nn.attention " << heads4[0] << ", " << heads4[1]
      << ", " << heads4[2] << " causal : " << bhtd << "\n";
    std::string back = e.fresh("bthd");
    b << "    " << back << " = nn.transpose " << att
      << " [0, 2, 1, 3] : " << bhtd << " -> " << headT << "\n";
    std::string merged = e.fresh("merged");
    b << "    " << merged << " = nn.reshape " << back << " : " << headT
      << " -> " << xt << "\n";
    std::string proj = linear(merged, p + "attn.c_proj", C, C);
    std::string r1 = e.fresh("res");
    b << "    " << r1 << " = nn.add " << x << ", " << proj << " : " << xt
      << ", " << xt << "\n";
    std::string h2 = layerNorm(r1, p + "ln_2");
    std::string fc = linear(h2, p + "mlp.c_fc", C, 4 * C);
    std::string g = e.fresh("gelu");
    b << "    " << g << " = nn.gelu " << fc << " : " << tensor({B, T, 4 * C}, f)
      << "\n";
    std::string mp = linear(g, p + "mlp.c_proj", 4 * C, C);
    std::string r2 = e.fresh("res");
    b << "    " << r2 << " = nn.add " << r1 << ", " << mp << " : " << xt << ", "
      << xt << "\n";
    x = r2;
  }
  std::string xf = layerNorm(x, "transformer.ln_f");
  std::string head =
      e.getParam(untied ? "lm_head.weight" : "transformer.wte.weight");
  std::string logitsT = tensor({B, T, V}, f);
  b << "    %logits = nn.matmul " << xf << ", " << head
    << " transpose_rhs : " << xt << ", " << tensor({V, C}, f) << " -> "
    << logitsT << "\n";
  b << "    %loss = nn.softmax_cross_entropy %logits, %targets"
    << ignoreIndexSuffix() << " : " << logitsT << ", " << tensor({B, T}, lt)
    << " -> tensor<f32>\n";
  std::string args =
      "%tokens: " + tensor({B, T}, lt) + ", %targets: " + tensor({B, T}, lt);
  emitStep(os, e, args, optimizerAttr("adamw", 6e-4, 0.95, 0.1),
           precisionAttr(), "%loss");
  return true;
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
  int64_t B = pick(batch, pr.batch), T = pick(seq, pr.seq);
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

/// Hugging Face's LlamaForCausalLM, with its state-dict names and [out, in]
/// projection weights, so that exported files load into it unchanged.
bool genLlama(raw_ostream &os) {
  std::optional<LlamaShape> shape = getLlamaShape();
  if (!shape)
    return false;
  int64_t B = shape->B, T = shape->T, C = shape->C, H = shape->H;
  int64_t KV = shape->KV, F = shape->F, V = shape->V, L = shape->L;
  double theta = shape->theta, eps = shape->eps;
  bool isTied = shape->tied;
  int64_t D = C / H;
  std::string lt = labelType.empty() ? "i32" : labelType.getValue();
  std::string f = "f32";
  Emitter e(os);
  // In the order of Hugging Face's state dict; initializer_range 0.02.
  e.param("model.embed_tokens.weight", {V, C}, "normal", 0.02);
  // A projection's weight [out, in]; with LoRA on it, PEFT's base layer
  // and adapters in PEFT's state-dict order.
  auto proj = [&](const std::string &module, int64_t out, int64_t in) {
    if (!loraSpec || !loraSpec->isTarget(module)) {
      e.param(module + ".weight", {out, in}, "normal", 0.02);
      return;
    }
    int64_t r = loraSpec->r;
    e.param(module + ".base_layer.weight", {out, in}, "normal", 0.02);
    e.param(module + ".lora_A.default.weight", {r, in}, "normal", 1.0 / r);
    e.param(module + ".lora_B.default.weight", {out, r}, "zeros");
  };
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    proj(p + "self_attn.q_proj", C, C);
    proj(p + "self_attn.k_proj", KV * D, C);
    proj(p + "self_attn.v_proj", KV * D, C);
    proj(p + "self_attn.o_proj", C, C);
    proj(p + "mlp.gate_proj", F, C);
    proj(p + "mlp.up_proj", F, C);
    proj(p + "mlp.down_proj", C, F);
    e.param(p + "input_layernorm.weight", {C}, "ones");
    e.param(p + "post_attention_layernorm.weight", {C}, "ones");
  }
  e.param("model.norm.weight", {C}, "ones");
  if (!isTied)
    e.param("lm_head.weight", {V, C}, "normal", 0.02);

  std::string xt = tensor({B, T, C}, f);
  auto &b = e.body;
  auto rmsNorm = [&](const std::string &x, const std::string &name) {
    std::string w = e.getParam(name + ".weight");
    std::string y = e.fresh("norm");
    b << "    " << y << " = nn.rms_norm " << x << ", " << w << " eps "
      << fmt(eps) << " : " << xt << ", " << tensor({C}, f) << "\n";
    return y;
  };
  // x @ W^T with W [out, in].
  auto matmulT = [&](const std::string &x, const std::string &w, int64_t in,
                     int64_t out) {
    std::string y = e.fresh("mm");
    b << "    " << y << " = nn.matmul " << x << ", " << w
      << " transpose_rhs : " << tensor({B, T, in}, f) << ", "
      << tensor({out, in}, f) << " -> " << tensor({B, T, out}, f) << "\n";
    return y;
  };
  // nn.Linear without bias; with LoRA on it (PEFT's lora.Linear, dropout
  // 0): W x + (alpha / r) B (A x).
  auto linear = [&](const std::string &x, const std::string &name, int64_t in,
                    int64_t out) {
    if (!loraSpec || !loraSpec->isTarget(name))
      return matmulT(x, e.getParam(name + ".weight"), in, out);
    int64_t r = loraSpec->r;
    std::string y =
        matmulT(x, e.getParam(name + ".base_layer.weight"), in, out);
    std::string ax =
        matmulT(x, e.getParam(name + ".lora_A.default.weight"), in, r);
    std::string bax =
        matmulT(ax, e.getParam(name + ".lora_B.default.weight"), r, out);
    std::string outT = tensor({B, T, out}, f);
    std::string scaled = e.fresh("lora");
    b << "    " << scaled << " = nn.scale " << bax << " by "
      << fmt(loraSpec->alpha / r) << " : " << outT << "\n";
    std::string sum = e.fresh("mm");
    b << "    " << sum << " = nn.add " << y << ", " << scaled << " : " << outT
      << ", " << outT << "\n";
    return sum;
  };
  // [B, T, n * D] -> [B, n, T, D].
  auto toHeads = [&](const std::string &x, int64_t n) {
    std::string btnd = tensor({B, T, n, D}, f);
    std::string r = e.fresh("heads");
    b << "    " << r << " = nn.reshape " << x << " : "
      << tensor({B, T, n * D}, f) << " -> " << btnd << "\n";
    std::string t = e.fresh("bhtd");
    b << "    " << t << " = nn.transpose " << r << " [0, 2, 1, 3] : " << btnd
      << " -> " << tensor({B, n, T, D}, f) << "\n";
    return t;
  };
  auto rope = [&](const std::string &x, int64_t n) {
    std::string y = e.fresh("rope");
    b << "    " << y << " = nn.rope " << x << " theta " << fmt(theta) << " : "
      << tensor({B, n, T, D}, f) << "\n";
    return y;
  };

  std::string embed = e.getParam("model.embed_tokens.weight");
  std::string x = e.fresh("x");
  b << "    " << x << " = nn.embedding " << embed
    << "[%tokens] : " << tensor({V, C}, f) << ", " << tensor({B, T}, lt)
    << " -> " << xt << "\n";
  std::string qT = tensor({B, H, T, D}, f), kvT = tensor({B, KV, T, D}, f);
  std::string ffT = tensor({B, T, F}, f);
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    std::string h = rmsNorm(x, p + "input_layernorm");
    std::string q = linear(h, p + "self_attn.q_proj", C, C);
    std::string k = linear(h, p + "self_attn.k_proj", C, KV * D);
    std::string v = linear(h, p + "self_attn.v_proj", C, KV * D);
    std::string qr = rope(toHeads(q, H), H);
    std::string kr = rope(toHeads(k, KV), KV);
    std::string vh = toHeads(v, KV);
    std::string att = e.fresh("att");
    b << "    " << att << " = nn.attention " << qr << ", " << kr << ", " << vh
      << " causal : " << qT;
    if (KV != H)
      b << ", " << kvT;
    b << "\n";
    std::string headT = tensor({B, T, H, D}, f);
    std::string back = e.fresh("bthd");
    b << "    " << back << " = nn.transpose " << att << " [0, 2, 1, 3] : " << qT
      << " -> " << headT << "\n";
    std::string merged = e.fresh("merged");
    b << "    " << merged << " = nn.reshape " << back << " : " << headT
      << " -> " << xt << "\n";
    std::string o = linear(merged, p + "self_attn.o_proj", C, C);
    std::string r1 = e.fresh("res");
    b << "    " << r1 << " = nn.add " << x << ", " << o << " : " << xt << ", "
      << xt << "\n";
    std::string h2 = rmsNorm(r1, p + "post_attention_layernorm");
    std::string gate = linear(h2, p + "mlp.gate_proj", C, F);
    std::string up = linear(h2, p + "mlp.up_proj", C, F);
    std::string act = e.fresh("swiglu");
    b << "    " << act << " = nn.swiglu " << gate << ", " << up << " : " << ffT
      << "\n";
    std::string down = linear(act, p + "mlp.down_proj", F, C);
    std::string r2 = e.fresh("res");
    b << "    " << r2 << " = nn.add " << r1 << ", " << down << " : " << xt
      << ", " << xt << "\n";
    x = r2;
  }
  std::string xf = rmsNorm(x, "model.norm");
  std::string head =
      e.getParam(isTied ? "model.embed_tokens.weight" : "lm_head.weight");
  std::string logitsT = tensor({B, T, V}, f);
  b << "    %logits = nn.matmul " << xf << ", " << head
    << " transpose_rhs : " << xt << ", " << tensor({V, C}, f) << " -> "
    << logitsT << "\n";
  b << "    %loss = nn.softmax_cross_entropy %logits, %targets"
    << ignoreIndexSuffix() << " : " << logitsT << ", " << tensor({B, T}, lt)
    << " -> tensor<f32>\n";
  std::string args =
      "%tokens: " + tensor({B, T}, lt) + ", %targets: " + tensor({B, T}, lt);
  // The Llama 2 paper's AdamW: beta2 0.95, eps 1e-5, weight decay 0.1.
  emitStep(os, e, args, optimizerAttr("adamw", 3e-4, 0.95, 0.1, 1e-5),
           precisionAttr(), "%loss");
  return true;
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
  if (!optimizer.empty() && optimizer != "adam" && optimizer != "adamw") {
    WithColor::error() << "--optimizer must be adam or adamw\n";
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
  // The model is checked against --freeze before anything is written.
  std::string text;
  raw_string_ostream os(text);
  bool ok;
  if (modelKind == "mlp")
    ok = genMLP(os);
  else if (modelKind == "gpt2")
    ok = genGPT2(os);
  else if (modelKind == "llama")
    ok = genLlama(os);
  else {
    WithColor::error() << "unknown model '" << modelKind
                       << "' (expected mlp, gpt2 or llama)\n";
    return 1;
  }
  if (!ok)
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
  out.os() << text;
  out.keep();
  return 0;
}
