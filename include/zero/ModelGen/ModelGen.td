//===- ModelGen.td - What zero-model-gen built a model from -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_MODELGEN_MODELGEN
#define ZERO_MODELGEN_MODELGEN

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def ModelGen_Dialect : Dialect {
  let name = "model_gen";
  let cppNamespace = "::mlir::zero";
  let summary = "The specification zero-model-gen built a model from";
  let description = [{
    `zero-model-gen --record-spec` records on the module, as
    `model_gen.spec = #model_gen.spec<...>`, the generator and the options
    that define the model, so that a tool can build the same model again
    with another sequence length (`zero-tune --max-seq`).
  }];
  let hasOperationAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let discardableAttrs = (ins "::mlir::zero::ModelSpecAttr":$spec);
}

def ModelGen_ModelKind : I32EnumAttr<"ModelKind", "generated model", [
    I32EnumAttrCase<"mlp", 0>, I32EnumAttrCase<"gpt2", 1>,
    I32EnumAttrCase<"llama", 2>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}

def ModelGen_ModelSpecAttr : AttrDef<ModelGen_Dialect, "ModelSpec"> {
  let mnemonic = "spec";
  let summary = "A generator and the options it was given";
  let description = [{
    `kind` is the generator (zero-model-gen's positional argument) and
    `seq` the sequence length of the model built (absent for an MLP, which
    has none). `options` holds every other option given on the command
    line under its name without the dashes, typed: integers as i64, numbers
    as f64, flags as booleans, text as strings and the repeatable `freeze`
    as an array of strings. Options not given keep the generator's
    defaults (a Llama preset's sizes), so the same options at another
    `seq` build the same model at that length.

    ```mlir
    module attributes {model_gen.spec = #model_gen.spec<llama, seq = 8192, options = {batch = 1 : i64, dtype = "bf16", preset = "llama-3-8b"}>} {
    ```
  }];
  let parameters = (ins EnumParameter<ModelGen_ModelKind>:$kind,
                        DefaultValuedParameter<"int64_t", "0">:$seq,
                        "::mlir::DictionaryAttr":$options);
  let assemblyFormat = "`<` $kind `,` struct($seq, $options) `>`";
  let genVerifyDecl = 1;
}

#endif // ZERO_MODELGEN_MODELGEN
