//===- PassPipelineBase.td - Pass pipelines and their options -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PASSPIPELINEBASE
#define ZERO_PIPELINES_PASSPIPELINEBASE

include "mlir/Pass/PassBase.td"

// A pass pipeline whose options are those of the passes it runs, under the
// passes' own names, types, descriptions and defaults, plus its own.
// `zero-tblgen -gen-pass-pipeline-decls` emits `<Name>Options` (a
// PassPipelineOptions with one option each, and for each pass
// `get<Pass>Options()`, the pass's generated options struct filled from
// them; GEN_PASS_PIPELINE_DECL) and `register<Name>()`, which registers
// `build<Name>` (GEN_PASS_PIPELINE_REGISTRATION);
// `-gen-pass-pipeline-flags` `is<Name>Option(name)` and `is<Name>Flag(name)`
// (its options as a command line spells them, and which are bools, flags
// there); `-gen-pass-pipeline-doc` its documentation. An option that several passes
// take is one Option def that each of them lists: two Option records with
// one name are an error.
class PassPipeline<string pipelineArg> {
  // The pipeline's command-line argument.
  string argument = pipelineArg;
  // A one-line summary, its registered description.
  string summary = "";
  // Its documentation.
  string description = "";
  // The passes whose options are the pipeline's.
  list<PassBase> passes = [];
  // The pipeline's own options.
  list<Option> options = [];
}

#endif // ZERO_PIPELINES_PASSPIPELINEBASE
