//===- Pipeline.td - zero-pipeline and its options ------------*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PIPELINE
#define ZERO_PIPELINES_PIPELINE

include "zero/Dialect/Zero/Analysis/Passes.td"
include "zero/Dialect/Zero/Transforms/Passes.td"
include "zero/Pipelines/PassPipelineBase.td"

def ZeroPipeline : PassPipeline<"zero-pipeline"> {
  let summary = "Autodiff, mixed precision and the ZeRO passes (partition, "
                "grad-sync, param-gather, prefetch at stage 3, optimizer), "
                "optionally driven by a DeepSpeed ds_config file";
  let description = [{
    Runs `zero-pad-vocab` (with `pad-vocab`, or for the cuda `target`'s
    16-bit steps), `zero-loss-chunk` (with
    `loss-chunk`), `zero-tiled-mlp` (with `tiled-mlp`), `zero-autodiff`,
    `zero-mixed-precision`, `zero-fuse-bias-activation` (with
    `fuse-bias-activation`), `zero-remat` (with `remat`), `zero-partition`,
    `zero-grad-sync`, `zero-param-gather`, `zero-prefetch` (at stage 3),
    `zero-optimizer`, `zero-offload-activations` (with
    `offload-activations`) and, with `verify`, `zero-verify-schedule`. The options
    of the passes from `zero-mixed-precision` to `zero-optimizer` are its
    own, under their names; one that several passes take (`offload-param`,
    `nvme-path`) sets it for all of them.

    With `config`, a DeepSpeed ds_config file sets the options that are not
    given explicitly. Its first pass then reads the train steps, resolves
    what the file leaves to the model (`"auto"`, the batch arithmetic),
    writes the file's optimizer, precision and logging settings into the
    steps, and runs the others with the resolved options.

    With `elastic-micro-batch` (zero-run --elastic's restarts), the train
    step's global batch is kept on this world size: the accumulation steps
    change first, then the micro batch (the largest up to the option's that
    divides the rows per rank); the config's micro batch and accumulation
    describe another world size and give way. A config's enabled
    `elasticity` section (DeepSpeed's version 0.1) chooses the split
    instead.

    With `memory-budget` (or `remat=auto`) the passes from `zero-remat` on
    run in a search: each candidate recomputation, then smaller buckets and
    prefetch windows, schedules a copy of the module, and the fastest plan
    whose peak fits the budget, by the memory planner and the cost model of
    `hardware`, is kept.
  }];
  let passes = [
    ZeroMixedPrecisionPass,
    ZeroPartitionPass,
    ZeroGradSyncPass,
    ZeroParamGatherPass,
    ZeroPrefetchPass,
    ZeroOptimizerPass,
  ];
  let options = [
    Option<"config", "config", "std::string", /*default=*/"",
           "DeepSpeed ds_config.json whose keys set the other options "
           "(explicit options win)">,
    Option<"padVocab", "pad-vocab", "int64_t", /*default=*/"0",
           "Pad the vocabulary table to a multiple of this many rows, masked "
           "out of the loss (zero-pad-vocab); 0: off. Unless given, the "
           "cuda target pads 16-bit steps to a multiple of 64">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The runtime backend the step is compiled for (zero-compile "
           "--target): cpu, or cuda, whose tensor cores want the vocabulary "
           "of a 16-bit step padded (see pad-vocab)">,
    Option<"lossChunk", "loss-chunk", "int64_t", /*default=*/"0",
           "Compute the output projection and the loss this many rows at a "
           "time, so the logits never exist whole (zero-loss-chunk); 0: off">,
    Option<"tiledMlp", "tiled-mlp", "int64_t", /*default=*/"0",
           "Compute each SwiGLU MLP in this many tiles of rows, forward and "
           "backward, so its intermediates never exist whole "
           "(zero-tiled-mlp); 0: off">,
    Option<"fuseBiasActivation", "fuse-bias-activation", "bool",
           /*default=*/"false",
           "Fold bias adds into the GELUs that read them "
           "(zero-fuse-bias-activation): same results, fewer passes over "
           "memory, and a different memory plan">,
    Option<"remat", "remat", "std::string", /*default=*/"\"none\"",
           "Activation recomputation (zero-remat): none, layer, selective, "
           "op (torchtitan's op-level policy), or auto (the cheapest of "
           "none, selective and layer that fits memory-budget)">,
    Option<"offloadActivations", "offload-activations", "std::string",
           /*default=*/"\"none\"",
           "Where saved activations wait between forward and backward "
           "(zero-offload-activations): none, cpu (pinned host memory; "
           "with remat, what it keeps), or auto (with memory-budget: the "
           "fewest that fit, chosen with each recomputation)">,
    Option<"memoryBudget", "memory-budget", "std::string", /*default=*/"",
           "Bytes per rank the plan's peak must fit (40GiB, 80GB): remat "
           "(auto unless remat is given), then smaller buckets and prefetch "
           "windows; if none fits, the same with the loss in chunks (unless "
           "loss-chunk is given); or an error">,
    Option<"elasticMicroBatch", "elastic-micro-batch", "int64_t",
           /*default=*/"0",
           "Keep the global batch on this world size (zero-run --elastic): "
           "the largest micro batch up to this that divides the rows per "
           "rank, the accumulation steps the rest; the file's micro batch "
           "and accumulation give way. 0: off">,
    ZeroHardwareOption,
    ZeroInterNodeBandwidthOption,
    Option<"verify", "verify", "bool", /*default=*/"true",
           "Run zero-verify-schedule at the end of the pipeline">,
    Option<"moeCapacityFactor", "moe-capacity-factor", "double",
           /*default=*/"0.0",
           "With ep-size: expert-parallel receive buffers of C times the "
           "balanced load (zero-expert-parallel; 0: dropless)">,
    Option<"moeDropTokens", "moe-drop-tokens", "bool", /*default=*/"false",
           "With ep-size: drop the rows past the capacity instead of "
           "stopping the step (DeepSpeed's capacity semantics)">,
  ];
}

#endif // ZERO_PIPELINES_PIPELINE
