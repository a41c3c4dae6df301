//===- zero-model-gen.cpp - MLP, GPT-2 and Llama training steps as .mlir --===//
//
// Part of the zero-mlir project.
//
// The command line of the generators in lib/ModelGen: builds the model the
// options describe and prints it with MLIR's printer, SSA values named as a
// reader would name them.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/ModelGen/ModelGen.h"
#include "zero/Support/CommandLine.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

using namespace llvm;
using namespace mlir;

namespace {

/// Indices into getLlamaPresets().
enum class PresetId { TinyLlama, Llama3_8B, Llama3_70B };

cl::OptionEnumValue presetValue(PresetId id) {
  // The --preset help lines, built once before the option that points at
  // them.
  static const std::vector<std::string> descs = [] {
    std::vector<std::string> d;
    for (const mlir::zero::LlamaPreset &p : mlir::zero::getLlamaPresets())
      d.push_back(mlir::zero::describeLlamaPreset(p));
    return d;
  }();
  int i = static_cast<int>(id);
  return {mlir::zero::getLlamaPresets()[i].name, i, descs[i]};
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
              cl::desc("an optimizer kind of optimizers.def, as "
                       "#zero.optimizer names it (default: adam MLP, adamw "
                       "GPT-2 and llama)"),
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
    cl::desc("Precision of the optimizer's states: f32, or bf16 or int8 "
             "(Adam/AdamW's moments in bf16 or 8 bits)"),
    cl::init("f32"), cl::cat(genCat));
static cl::opt<bool> bf16Masters(
    "bf16-masters",
    cl::desc("bf16 parameters as their own masters, no fp32 copy (DeepSpeed's "
             "bf16_master_weights_and_grads; Adam/AdamW with --dtype bf16)"),
    cl::init(false), cl::cat(genCat));
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
static cl::opt<bool> recordSpec(
    "record-spec",
    cl::desc("Record the generator and the options given on the module "
             "(model_gen.spec), so that zero-tune --max-seq can build the "
             "same model at other sequence lengths"),
    cl::init(false), cl::cat(genCat));

/// `opt`'s value where it was given.
template <typename T, typename Parser>
static std::optional<T> given(const cl::opt<T, false, Parser> &opt) {
  if (!opt.getNumOccurrences())
    return std::nullopt;
  return opt.getValue();
}

/// The options given on the command line.
static mlir::zero::ModelGenOptions getOptions() {
  mlir::zero::ModelGenOptions o;
  o.model = modelKind;
  o.sizes = given(sizes);
  o.batch = given(batch);
  o.layers = given(layers);
  o.hidden = given(hidden);
  o.heads = given(heads);
  o.vocab = given(vocab);
  o.seq = given(::seq);
  o.untied = given(untied);
  if (preset.getNumOccurrences())
    o.preset =
        mlir::zero::getLlamaPresets()[static_cast<int>(preset.getValue())].name;
  o.kvHeads = given(kvHeads);
  o.ffn = given(ffn);
  o.ropeTheta = given(ropeTheta);
  o.normEps = given(normEps);
  o.tied = given(tied);
  o.dtype = given(dtype);
  o.optimizer = given(optimizer);
  o.lr = given(lr);
  o.weightDecay = given(weightDecay);
  o.gradientClipping = given(clip);
  o.lrSchedule = given(lrSchedule);
  o.biasCorrection = given(biasCorrection);
  o.momentum = given(momentum);
  o.dampening = given(dampening);
  o.nesterov = given(nesterov);
  o.optimizerStates = given(optimizerStates);
  o.bf16Masters = given(bf16Masters);
  o.noDecayBiasNorm = given(noDecayBiasNorm);
  o.noDecayEmbeddings = given(noDecayEmbeddings);
  o.labelType = given(labelType);
  o.ignoreIndex = given(ignoreIndex);
  o.freeze.assign(freeze.begin(), freeze.end());
  o.lora = given(lora);
  o.recordSpec = recordSpec;
  return o;
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(genCat);
  // `--zeropp false` as --help shows a flag with its value.
  ::zero::FlagArgs args(argc, argv);
  cl::ParseCommandLineOptions(
      args.argc(), args.argv(),
      "zero-model-gen: write an MLP, GPT-2 or Llama training step as .mlir\n\n"
      "  zero-model-gen mlp --sizes 784,256,256,10 --batch 64 -o mlp.mlir\n"
      "  zero-model-gen gpt2 --layers 12 --hidden 768 --heads 12 --vocab 50257 "
      "--seq 1024 --batch 8 -o gpt2.mlir\n"
      "  zero-model-gen llama --preset llama-3-8b --seq 4096 --dtype bf16 "
      "-o llama.mlir\n");
  DialectRegistry registry;
  registry.insert<nn::NNDialect, mlir::zero::ZeroDialect,
                  mlir::zero::ModelGenDialect>();
  mlir::zero::registerModelGenExtensions(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  ScopedDiagnosticHandler diagnostics(&ctx, [](Diagnostic &diag) {
    WithColor::error() << diag.str() << "\n";
    return success();
  });
  mlir::zero::ModelGenOptions options = getOptions();
  if (failed(mlir::zero::checkModelGenOptions(&ctx, options)))
    return 1;
  std::error_code ec;
  ToolOutputFile out(outputFile, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error() << "cannot open '" << outputFile << "': " << ec.message()
                       << "\n";
    return 1;
  }
  // The model is checked against --freeze before anything is written.
  OwningOpRef<ModuleOp> module = mlir::zero::generateModel(&ctx, options);
  if (!module)
    return 1;
  out.os() << "// Generated by zero-model-gen.\n";
  (*module)->print(out.os(), OpPrintingFlags().printNameLocAsPrefix());
  out.keep();
  return 0;
}
