//===- ModelGen.h - MLP, GPT-2 and Llama training steps ---------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// zero-model-gen's generators: an MLP, GPT-2 and Llama (with Hugging Face's
// names and presets) as a module of zero.params and one zero.train_step,
// built from the options given on zero-model-gen's command line. With
// `recordSpec` the module carries those options (model_gen.spec), from
// which the same model can be built again at another sequence length.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_MODELGEN_MODELGEN_H
#define ZERO_MODELGEN_MODELGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>
#include <vector>

#include "zero/ModelGen/ModelGenEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "zero/ModelGen/ModelGenAttrs.h.inc"

#include "zero/ModelGen/ModelGenDialect.h.inc"

namespace mlir::zero {

/// A Llama configuration --preset names: Hugging Face config.json values.
struct LlamaPreset {
  const char *name;
  int64_t layers, hidden, heads, kvHeads, ffn, vocab, seq, batch;
  double ropeTheta, normEps;
  bool tied;
};

/// The presets, tinyllama-1.1b (the default) first.
llvm::ArrayRef<LlamaPreset> getLlamaPresets();

/// The preset's sizes and parameter count in words, for --help.
std::string describeLlamaPreset(const LlamaPreset &preset);

/// zero-model-gen's options: a set one was given on the command line, an
/// unset one takes the generator's default (for a Llama, the preset's).
struct ModelGenOptions {
  /// The generator: mlp, gpt2 or llama (anything else is refused).
  std::string model;
  std::optional<std::string> sizes;
  std::optional<int64_t> batch, layers, hidden, heads, vocab, seq;
  std::optional<bool> untied;
  std::optional<std::string> preset;
  std::optional<int64_t> kvHeads, ffn;
  std::optional<double> ropeTheta, normEps;
  std::optional<bool> tied;
  std::optional<std::string> dtype, optimizer;
  std::optional<double> lr, weightDecay, gradientClipping;
  std::optional<std::string> lrSchedule;
  std::optional<bool> biasCorrection;
  std::optional<double> momentum, dampening;
  std::optional<bool> nesterov;
  std::optional<std::string> optimizerStates;
  /// bf16 parameters as their own masters (#zero.optimizer's bf16_masters).
  std::optional<bool> bf16Masters;
  std::optional<bool> noDecayBiasNorm, noDecayEmbeddings;
  std::optional<std::string> labelType;
  std::optional<int64_t> ignoreIndex;
  /// --freeze's patterns, in order.
  std::vector<std::string> freeze;
  std::optional<std::string> lora;
  /// Record the options on the module as model_gen.spec.
  bool recordSpec = false;
};

/// Checks what the options say without building the model (the values, the
/// options of another model family, --lora and --freeze); emits the first
/// problem as an error on `ctx` and fails.
LogicalResult checkModelGenOptions(MLIRContext *ctx,
                                   const ModelGenOptions &options);

/// The verified model the options describe, or none after emitting the
/// errors on `ctx` (which must have the nn, zero and model_gen dialects).
OwningOpRef<ModuleOp> generateModel(MLIRContext *ctx,
                                    const ModelGenOptions &options);

/// The options `spec` records (the sequence its `seq`), or failure after
/// emitting why not through `emitError`.
FailureOr<ModelGenOptions>
getModelGenOptions(ModelSpecAttr spec,
                   llvm::function_ref<InFlightDiagnostic()> emitError);

/// The model's spec, or none where it has no model_gen.spec.
ModelSpecAttr getModelSpec(ModuleOp module);

/// Registers the external models the generators' printing uses (the names
/// of nn.split's results).
void registerModelGenExtensions(DialectRegistry &registry);

} // namespace mlir::zero

#endif // ZERO_MODELGEN_MODELGEN_H
