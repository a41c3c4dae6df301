//===- Passes.td - ZeRO passes --------------------------------*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_TRANSFORMS_PASSES
#define ZERO_DIALECT_ZERO_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Options several passes take: one declaration each, which every such pass
// lists (and zero-pipeline takes once, for all of them).
//===----------------------------------------------------------------------===//

def ZeroOffloadParamOption
    : Option<"offloadParam", "offload-param", "std::string",
             /*default=*/"\"none\"",
             "Where stage-3 parameter shards live: none, cpu or nvme "
             "(DeepSpeed: zero_optimization.offload_param.device)">;
def ZeroNvmePathOption
    : Option<"nvmePath", "nvme-path", "std::string", /*default=*/"\"\"",
             "Directory of nvme offload (DeepSpeed: "
             "offload_optimizer.nvme_path; also the parameters' without "
             "param-nvme-path)">;

def ZeroPadVocabPass : Pass<"zero-pad-vocab", "::mlir::ModuleOp"> {
  let summary = "Pad the vocabulary table to a multiple of rows, masked out of the loss";
  let description = [{
    Pads each vocabulary table (the embedding and the LM head, one parameter
    when they are tied) with zero rows up to a multiple of `multiple`, so
    that the LM head's GEMMs and the loss run on aligned shapes, and keeps
    the losses and updates exactly those of the unpadded model. Runs on the
    forward, before `zero-autodiff`.

    Which parameter is a vocabulary table is not read from its name: the
    pass follows each rank-2 parameter's rows through the ops that use it
    (`PaddingOpInterface`). A parameter is padded when every use takes the
    padding, at least one masks it out of a loss, and its rows are not a
    multiple already: an `nn.embedding` of it absorbs the padding (its ids
    must stay below the old row count, `rows`), an `nn.matmul` with it as
    the shared right operand pads the logits' last dimension, and
    `nn.softmax_cross_entropy` masks the padded classes out (`classes`), so
    their gradient is exactly zero; the parameter records its rows
    (`zero.param ... rows N`). Other parameters are left alone.

    The padded rows start at zero, get a zero gradient and so never move
    under Adam or AdamW (zero moments, zero decay of zero). Exported weights
    keep the unpadded shape.

    With `only-16-bit`, a module is padded only when its train steps compute
    in bf16 or fp16 (`dtype`, as `zero-mixed-precision` reads it, which runs
    later): tensor cores want aligned 16-bit GEMMs, and an fp32 step keeps
    its shapes. This is zero-pipeline's default for the CUDA target.
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"128",
           "Pad the vocabulary's rows to a multiple of this (> 0)">,
    Option<"only16Bit", "only-16-bit", "bool", /*default=*/"false",
           "Pad only modules whose train steps compute in bf16 or fp16">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"auto\"",
           "With only-16-bit: the compute precision zero-mixed-precision "
           "will give the steps (auto: each step's own)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroLossChunkPass : Pass<"zero-loss-chunk", "::mlir::ModuleOp"> {
  let summary = "The output projection and the loss fused, in chunks of rows, "
                "so the logits never exist whole";
  let description = [{
    Rewrites the train step's loss, an `nn.softmax_cross_entropy` of the
    logits of a bias-free output projection (`nn.matmul %h, %w
    transpose_rhs` with the shared `[V, H]` head `%w`, the logits used by
    the loss only), into one `nn.linear_cross_entropy %h, %w, %labels chunk
    K`: forward and backward compute the logits `K` rows at a time, so the
    memory plan holds one `[K, V]` chunk of logits as kernel scratch
    instead of the whole `[rows, V]` logits and their gradient. The losses
    are the unchunked ones to fp32 rounding. `K` need not divide the rows.

    Runs on the forward, before `zero-autodiff`. What it cannot fuse is an
    error naming the reason: a head with a bias, logits with another use,
    a padded vocabulary (`zero-pad-vocab`), a head that is not `[V, H]`
    applied with `transpose_rhs`.
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"1024",
           "Rows of logits computed at a time (>= 1)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroTiledMlpPass : Pass<"zero-tiled-mlp", "::mlir::ModuleOp"> {
  let summary = "Each SwiGLU MLP fused and computed in tiles of rows, so "
                "its intermediates never exist whole";
  let description = [{
    Rewrites each MLP of the train step written as Llama's (Hugging Face's
    `LlamaMLP`: `nn.matmul %x, %wg transpose_rhs` and `nn.matmul %x, %wu
    transpose_rhs` into `nn.swiglu`, then `nn.matmul ..., %wd
    transpose_rhs`, each intermediate used once) into one `nn.tiled_mlp
    %x, %wg, %wu, %wd tiles K`: forward and backward compute `ceil(rows /
    K)` rows at a time, the backward recomputing each tile's gate and up
    (as ALST's TiledMLP), so the memory plan holds one tile's `[tile, I]`
    intermediates as kernel scratch instead of the `[rows, I]` gate, up
    and activation kept for the backward. The losses are the untiled ones
    to fp32 rounding (the weight gradients are summed tile by tile). `K`
    need not divide the rows.

    Runs on the forward, before `zero-autodiff`. Matmuls outside such an
    MLP are left alone. What it cannot tile is an error naming the reason:
    an `nn.swiglu` whose gate or up is not such a projection of one input,
    or is used elsewhere, or whose activation is not read by one down
    projection only; a step without any SwiGLU MLP (GPT-2's MLP, a biased
    fc with GELU, is not tiled); 16-bit operands.
  }];
  let options = [
    Option<"tiles", "tiles", "int64_t", /*default=*/"4",
           "Tiles of rows each MLP is computed in (>= 1)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroSequenceParallelPass
    : Pass<"zero-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "Ulysses sequence parallelism: each rank of a group of P "
                "holds T / P tokens, and attention runs on H / P heads";
  let description = [{
    DeepSpeed Ulysses. The P ranks of a sequence-parallel group read the
    same rows; rank s of the group holds tokens `[s * T / P, (s + 1) * T /
    P)` of each. The pass divides the sequence dimension (dim 1) of every
    train step input by P and re-infers the types derived from them: every
    op but attention works per token. Around each `nn.attention` a
    `zero.all_to_all` turns the `[B, H, T / P, D]`
    sequence shards of the query, key and value into `[B, H / P, T, D]`
    head shards, attention runs over the whole sequence on H / P heads (its
    causal mask unchanged), and a second all-to-all turns its result back.
    An `nn.rope` of the query or key moves after the first all-to-all, so it
    rotates the whole sequence's positions on every rank. Key/value heads
    fewer than P are replicated before the exchange, as DeepSpeed does; the
    autodiff of an all-to-all is the inverse all-to-all, and the replicas'
    gradients sum.

    Packed rows' positions (an input the step reads as positions:
    `nn.document_ids`, `nn.rope`'s `positions`) are not divided: every rank
    takes the rows' positions whole, so that the documents masking the
    attention on the whole sequence are the whole row's (those crossing a
    shard boundary included) and the rotations after the exchange turn each
    token by its own position. Any other reader of them, and segments that
    are not the document ids of those positions, are refused.

    The label shift of a loss that shifts inside (`nn.shift_labels`, Hugging
    Face's causal LMs) crosses shard boundaries: the next-token label of a
    shard's last position lives on the next rank. The pass removes the
    shift and marks the step `labels shifted`, by which the training driver
    shifts each whole row before handing a rank its shard (DeepSpeed's
    `shift_labels`).

    Runs on the forward, before `zero-autodiff`; `zero-partition` takes the
    same `sp-size`, which must divide its world size: the all-to-alls run
    over the `sequence` rank set (the P ranks of this rank's group), and
    world size / P groups are data parallel beside them. Refused, naming the
    option: heads or the sequence not divisible by P, key/value heads that
    neither divide P nor are divisible by it, a step with no attention, a
    MoE block (`nn.moe_dispatch`: it routes the flattened tokens of the
    whole sequence).
  }];
  let options = [
    Option<"spSize", "sp-size", "int64_t", /*default=*/"1",
           "Ranks per sequence-parallel group (1: off)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect",
                           "::mlir::zero::ZeroDialect"];
}

def ZeroAutodiffPass : Pass<"zero-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of each train step";
  let description = [{
    Appends the backward pass to every `zero.train_step`: the derivative rules
    of the forward ops (`DerivativeOpInterface`) are emitted in reverse program
    order, seeded with `d loss / d loss = 1` (a `nn.fill` tagged
    `zero.loss_seed`, which `zero-mixed-precision` replaces by the loss scale
    at fp16). Contributions to a value used several times are summed. Each
    parameter gets exactly one `zero.grad`, placed right after its gradient is
    complete, i.e. after the derivative of its earliest use in the forward.
    A parameter that does not influence the loss gets a zero gradient and a
    warning (DeepSpeed's `ignore_unused_parameters`). An op on the path from a
    parameter to the loss without a derivative rule is an error.

    A `frozen` parameter gets no `zero.grad` (and no warning), and its values
    start no derivative: only values that depend on a trainable parameter
    are differentiated, so a frozen first layer computes neither its weight
    gradient nor its input's, while the backward through a frozen weight
    between trainable layers still carries their gradient. A step whose
    parameters are all frozen is an error (nothing to train).
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroMixedPrecisionPass : Pass<"zero-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "fp32 master parameters with bf16/fp16 compute and loss scaling";
  let description = [{
    Keeps every `zero.param` as the fp32 master copy and gives it a 16-bit
    `compute` type; forward and backward then run on 16-bit copies
    (`zero.get_param` yields the compute type, float inputs are cast once, and
    every non-scalar float value of the step becomes 16-bit, so gradients are
    16-bit). The scalar loss and its seed stay fp32. With `fp16`, the backward
    is seeded with the current dynamic loss scale (`zero.loss_scale`), which is
    the same as multiplying the loss by the scale before backward; the scale is
    optimizer state that lives across steps and follows the train step's
    `#zero.precision` rules.

    `dtype=auto` (the default) follows the train step's precision attribute;
    an explicit dtype overrides it and rewrites the attribute.

    A module whose parameters already have `compute` types was written (or
    converted before) in mixed precision: its types stay as they are, and a
    parameter without one computes in fp32, its own master, as Hugging
    Face's `_keep_in_fp32_modules` keep some modules in fp32 beside 16-bit
    ones. Only the fp16 seed becomes the loss scale. A `compute` type other
    than f32 and the precision's is an error.

    A frozen parameter gets its `compute` type like the others: the copy
    forward and backward read. It has no master (`zero-partition` gives it
    a partition with `params` only, held in the compute type alone).
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"auto\"",
           "Compute precision: auto, fp32, bf16 or fp16 (auto: the train "
           "step's; DeepSpeed: fp16.enabled, bf16.enabled)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroFuseBiasActivationPass
    : Pass<"zero-fuse-bias-activation", "::mlir::ModuleOp"> {
  let summary = "Fold bias adds into the activations that read them";
  let description = [{
    Removes each `nn.add` of a broadcast bias whose every user can take the
    sum as its input and the bias separately (`BiasFusionOpInterface`): a
    GELU becomes `nn.bias_gelu %x, %b` and its gradient `nn.bias_gelu_grad
    %x, %b, %dy`, which add the bias in the pass they already make over
    `%x`. The sum is then neither written nor kept for the backward (`%x`
    is kept in its place), which saves two of the four passes over memory
    of the forward's add and GELU; the results are those of the unfused ops
    bit for bit.

    It runs after `zero-autodiff` (both the forward use and the gradient's
    are rewritten, so a partial rewrite never keeps the sum alive) and
    before `zero-partition`: a scheduled step is refused, since its memory
    plan counts the sums. `zero-pipeline` runs it with
    `fuse-bias-activation`.

    ```mlir
    %s = nn.add %x, %b : tensor<4x128x1536xf32>, tensor<1536xf32>
    %y = nn.gelu %s : tensor<4x128x1536xf32>
    ...
    %dx = nn.gelu_grad %s, %dy : tensor<4x128x1536xf32>
    ```
    becomes
    ```mlir
    %y = nn.bias_gelu %x, %b : tensor<4x128x1536xf32>, tensor<1536xf32>
    ...
    %dx = nn.bias_gelu_grad %x, %b, %dy : tensor<4x128x1536xf32>, tensor<1536xf32>
    ```
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroRematPass : Pass<"zero-remat", "::mlir::ModuleOp"> {
  let summary = "Activation checkpointing: recompute forward values right before their backward uses";
  let description = [{
    Trades compute for memory on a differentiated, not yet partitioned train
    step (after `zero-autodiff` and `zero-mixed-precision`, before
    `zero-partition`). The forward is cut into segments at the parameter
    groups of `zero-partition`'s stage-3 layout: a segment starts at the first
    `zero.get_param` of a group and runs to the next group's first one. A
    segment whose group is a numbered layer (`transformer.h.3`,
    `model.layers.3`) is a transformer block; the others (embeddings, the
    final norm, the head) are never recomputed.

    In each chosen block, a value is kept (alive from the forward to its
    backward uses, as without remat) when a forward op outside the block uses
    it (the block's output), when it is a parameter, or when the policy keeps
    it; every other value the backward uses is recomputed: the ops computing
    it are cloned, in forward order, right before the block's first backward
    use, and the backward uses the clones. The forward copies then die in the
    forward, which shortens their live ranges and lowers the planned peak.
    Clones are the same ops on the same values, so the losses are bitwise
    those without remat; they carry `zero.recompute`, by which the cost model
    and the report count the recompute time (and which keeps CSE from folding
    them back into the forward).

    - `policy=none`: nothing changes.
    - `policy=layer`: keep only each block's input and output (Megatron's
      full recompute, DeepSpeed's checkpointed transformer layer).
    - `policy=selective`: also keep matmul outputs; recompute the cheap
      elementwise, normalization and attention work (Megatron's selective
      recompute).
    - `policy=op`: torchtitan's op-level selective checkpointing (the
      `_custom_policy` of its Llama `parallelize_llama.py`): keep each
      attention output and every second matmul output, counting the block's
      matmuls in forward order from the first (kept); recompute the other
      matmuls and all elementwise and normalization work (in a Llama block
      `k_proj`, `o_proj` and `up_proj` are recomputed). It keeps less than
      `selective` and recomputes more.

    `blocks` restricts the policy to those blocks (0-based, in forward order;
    empty: all), `first-blocks=N` to the first N. Recomputing an early block saves more than a late one: the
    last block's backward comes right after the forward. At stage 3 the
    clones use the block's parameters again in the backward, so
    `zero-param-gather` gathers them for the recompute. `remat=auto` of
    `zero-pipeline` picks the policy and blocks that fit a memory budget.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "What to recompute: none, layer, selective or op">,
    ListOption<"blocks", "blocks", "int64_t",
               "Blocks (0-based, forward order) the policy applies to; "
               "empty: every block">,
    Option<"firstBlocks", "first-blocks", "int64_t", /*default=*/"-1",
           "Only the first N blocks (-1: as `blocks` says; more than the "
           "step has: all; DeepSpeed: activation_checkpointing."
           "number_checkpoints)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroOffloadActivationsPass
    : Pass<"zero-offload-activations", "::mlir::ModuleOp"> {
  let summary = "Activation offload: saved activations wait in pinned host memory between forward and backward";
  let description = [{
    Runs on a scheduled train step (after `zero-optimizer`). A saved
    activation is a value a forward compute op produces and a backward
    compute op reads (with `zero-remat`, what it keeps). After its last
    forward use it is copied into the pinned host arena
    (`zero.offload_activation`, asynchronous: its `zero.wait` follows the
    next forward op, so the copy overlaps it), and before its first backward
    use it is copied back into a new step-arena buffer
    (`zero.reload_activation`, issued one op before that use and waited
    right before it), which every backward use reads. The device copy then
    lives only in the forward and the reloaded one only in the backward,
    which lowers the planned device peak; the host copies are planned in the
    host arena. The copies are exact, so the losses are bitwise those
    without offload.

    Values read through views, step inputs, and values a non-compute op
    reads in the backward (the loss, which `zero.return` reads) stay on the
    device.

    - `device=none`: nothing changes.
    - `device=cpu`: every saved activation goes to pinned host memory.
    - `device=auto`: the fewest saved activations, in forward order (the
      earliest wait longest for their backward), whose offload brings the
      memory plan's device peak within `budget`; all of them when none
      does. Under `zero-pipeline`'s `memory-budget` search each
      recomputation candidate offloads what it needs this way, and the
      fastest plan that fits wins.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"cpu\"",
           "Where saved activations wait for the backward: none, cpu, or "
           "auto (pinned host memory for the fewest that fit budget)">,
    Option<"budget", "budget", "std::string", /*default=*/"",
           "With device=auto: the bytes per rank the device peak must fit "
           "(40GiB, 80GB)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

//===----------------------------------------------------------------------===//
// ZeRO schedule passes
//===----------------------------------------------------------------------===//

def ZeroPartitionPass : Pass<"zero-partition", "::mlir::ModuleOp"> {
  let summary = "Flat parameter layout, per-rank slices and the local batch";
  let description = [{
    Flattens the parameters in declaration order into contiguous groups and
    emits one `zero.partition` per group at module level, right after the last
    `zero.param`. The layout depends only on the parameters and the options,
    so it is identical on every rank.

    - Stages 0-2: one group `@flat` holding every parameter. At stage 0
      nothing is sharded (`padded == numel`); at stages 1-2 the group is
      padded to a multiple of `world-size * alignment` and rank `r` owns
      `[r * shard, (r + 1) * shard)`.
    - Stage 3: one group per layer. The layer key of a parameter is its name
      up to and including the first all-digit dot-component
      (`transformer.h.3.attn.c_attn.weight` -> `transformer.h.3`); without
      one, the name without its last component (`transformer.ln_f.weight` ->
      `transformer.ln_f`), or the whole name if it has a single component
      (`scale`). Consecutive parameters with the same key form one group
      named by the key.

    A group's buffers hold one compute type, so a parameter whose compute
    type differs from the one before it starts a new group (at stages 0-2
    too). A group holds only trainable or only frozen parameters: a run of
    frozen ones in declaration order is a `frozen` partition of its own,
    named `frozen` at stages 0-2 and `<layer>.frozen` at stage 3, with
    `params` as its only buffer. If a group's name is already a symbol (a
    parameter `@scale`, or the same key or `flat` further down), `_1`, `_2`,
    ... is appended.

    Muon (the train step's `#zero.optimizer<kind = muon>`, stages 1-3 on
    several ranks): Newton-Schulz needs each hidden matrix whole, so a
    trainable group holding Muon matrices is ordered instead so that every
    matrix lies whole in one rank's shard, its owner, with the same `numel`
    and padding (the collectives move AdamW's bytes); the owners, balanced
    by Newton-Schulz FLOPs, are recorded per parameter as `owners` (-1 for
    AdamW's). At stage 3 a layer whose group has no such order (an MLP
    matrix larger than a rank's shard of its layer) is grouped with the
    layers after it, as few as give one (`muon-group-layers` at most; 0: up
    to as many layers as the group has ranks), named by the first layer's
    key and the last layer's number (`model.layers.0-7`): its layers are
    then gathered together. Where no such run exists (or with
    `muon-group-layers=1`) the group is laid out with gaps: each rank's
    slot enlarged to hold its owner's matrices whole, the rest of the
    slots elements of no parameter (`padded` beyond a multiple of
    `world-size * alignment`).

    Data parallelism: the batch dimension (dim 0) of every train step input
    is divided by `world-size`, and the types of every value that carries the
    batch are re-inferred; parameters, their gradients and the scalar loss
    keep their shapes. The loss becomes the mean over the local batch; the
    optimizer divides the summed gradients by `world_size * accumulation` to
    get the gradient of the global mean. An indivisible batch is an error.

    The stage, world size and global batch are recorded as the train step's
    `schedule`, `#zero.schedule<stage = 2, world_size = 4, global_batch =
    64>` (one micro step until `zero-grad-sync` records its accumulation),
    from which the later passes, the analyses and the lowering read them;
    so is `ranks-per-node` (`ranks_per_node = 2`, not printed when 0: every
    rank on one node), the topology by which the report splits each
    collective's bytes between the links within and across nodes and the
    cost model prices them.
    `hpz-partition-size` h > 1 (ZeRO++ hpZ, stage 3, h dividing the world
    size) is recorded there too (`hpz_partition_size`), for
    `zero-param-gather`.

    MiCS (`mics-shard-size` m > 0, stage 3 only): every group is partitioned
    over a shard group of m consecutive ranks instead of the world, and the
    world_size / m shard groups hold replicas of the same layout. Each
    partition's `world_size` is m (padded to a multiple of `m * alignment`,
    rank r owns shard r % m), so the model states per rank are those of
    ZeRO-3 at world size m; the batch is still divided by the world size, and
    the schedule records `mics_shard_size = m`.

    Sequence parallelism (`sp-size` P > 1, after `zero-sequence-parallel`):
    the P consecutive ranks of a sequence-parallel group read the same rows,
    so the batch is divided by the data-parallel ranks, `world-size / P`,
    while every group is still partitioned over the whole world (DP x SP);
    the schedule records `sequence_parallel = P`. P must divide the world
    size.

    ```mlir
    zero.partition @flat stage 2 world_size 4 alignment 2 numel 269322 padded 269328
        params [@fc1.weight, @fc1.bias, ...] offsets [0, 200704, ...]
    ```
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"0",
           "ZeRO stage 0-3 (DeepSpeed: zero_optimization.stage)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of data-parallel ranks">,
    Option<"spSize", "sp-size", "int64_t", /*default=*/"1",
           "Ulysses sequence parallelism: ranks per sequence-parallel group, "
           "which read the same rows (zero-sequence-parallel; DeepSpeed: "
           "sequence_parallel_size)">,
    Option<"micsShardSize", "mics-shard-size", "int64_t", /*default=*/"0",
           "MiCS: partition stage-3 groups over shard groups of this many "
           "consecutive ranks, replicated across them (0 or -1: off; "
           "DeepSpeed: zero_optimization.mics_shard_size)">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"2",
           "Padding granule per rank in elements (DeepSpeed: "
           "nccl_start_alignment_factor)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "Ranks per node, rank r on node r / ranks-per-node; a divisor "
           "of world-size (0: every rank on one node)">,
    Option<"hpzPartitionSize", "hpz-partition-size", "int64_t",
           /*default=*/"1",
           "ZeRO++ hpZ: ranks of a secondary parameter partition, 1 for none "
           "(DeepSpeed: zero_hpz_partition_size; stage 3, a divisor of the "
           "world size)">,
    Option<"muonGroupLayers", "muon-group-layers", "int64_t",
           /*default=*/"0",
           "Muon at stage 3: the most consecutive layers one group may hold "
           "to lay out every Muon matrix whole in one rank's shard without "
           "gaps (0: as many as the ranks; 1: a group per layer, with gaps "
           "where needed)">,
    Option<"epSize", "ep-size", "int64_t", /*default=*/"1",
           "Expert parallelism: ranks that split each MoE layer's experts "
           "(zero-expert-parallel; expert parameters are partitioned over "
           "world-size / ep-size ranks; DeepSpeed: expert_parallel."
           "autoep_size)">,
    Option<"epPlacement", "ep-placement", "std::string",
           /*default=*/"\"contiguous\"",
           "Where an expert-parallel set's ranks lie: contiguous (ep-size "
           "consecutive ranks; the expert replicas stride ep-size) or "
           "strided (stride world-size / ep-size; the expert replicas "
           "consecutive. DeepSpeed: use_data_before_expert_parallel_)">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroGradSyncPass : Pass<"zero-grad-sync", "::mlir::ModuleOp"> {
  let summary = "Gradient reduction: all-reduce, reduce-scatter or bucketed reduce + free";
  let description = [{
    Emits the gradient collectives of a partitioned train step. Buckets fill
    in the order gradients complete (`zero.grad`, i.e. reverse declaration
    order, so ranges go downward through the layout). A bucket is a
    contiguous layout range: it is flushed when it reaches
    `reduce-bucket-size` elements (a large gradient is split across buckets)
    or when the next completed gradient is not adjacent in the layout (tied
    weights, another stage-3 group).

    - Stage 0: in-place `zero.all_reduce sum group @flat in grads [b, e)` of
      each bucket right after its last gradient, in phase `boundary`.
    - Stage 1: in-place `zero.reduce_scatter group @flat in grads [b, e)`
      (`zero.reduce` with `reduce-scatter=false`) in buckets after the last
      `zero.grad`, in phase `boundary`: gradients stay whole until then.
    - Stages 2-3: source-form `zero.reduce_scatter group @g [b, e) from %g...
      at [offsets]` (`zero.reduce` with `reduce-scatter=false`) of each
      bucket, as soon as it fills, in every micro step, followed by
      `zero.free` of exactly the gradient elements the bucket consumed
      (`zero.free %g[off, size]` for a gradient split across buckets):
      gradients are released at bucket (hence shard) granularity, so a
      parameter spanning several ranks never keeps its whole gradient alive.

    At stages 0-1 `zero.grad @p, %g` means "add %g into the persistent full
    `grads` buffer at p's offset" (without accumulation the memory planner
    computes %g there directly). At stages 2-3 it only marks completion and
    lowers to nothing: the reduction adds the owned part into the `grads`
    shard accumulator.

    A frozen partition has no gradients: nothing reduces it at any stage.

    `overlap-comm`: collectives return a `!zero.token`; two bucket buffers
    alternate, so the `zero.wait` of bucket k is emitted right before bucket
    k+2 is issued (and the remaining ones at the end of the step, before the
    optimizer); frees follow the wait. Without it, collectives are synchronous.

    `gradient-accumulation-steps` K: the step's inputs are then K micro
    batches; the batch is divided by K again (the inputs become one micro
    batch of one rank) and K is the `accumulation_steps` of the step's
    `#zero.schedule`. The runtime runs the body K times over consecutive
    micro batches; ops of phase `boundary` (`StepPhaseOpInterface`) run only
    once per optimizer step, after the last one. Stages 0-1 communicate only
    at the boundary (their collectives and waits have phase `boundary`;
    `zero.grad` accumulates locally), stages 2-3 reduce every micro step into
    the owner's accumulator (phase `micro_step`), as DeepSpeed.

    `quantized-gradients` (ZeRO++ qgZ, DeepSpeed's `zero_quantized_gradients`;
    stage 3 with reduce-scatter, not with MiCS) makes the bucket
    reduce-scatters `quantized`: INT4 all-to-alls within and then across
    nodes (see `zero.reduce_scatter`). As DeepSpeed, it quantizes the
    gradients of parameters that are not 1-D and whose size is a multiple of
    twice the world size; the others take the plain reduce-scatter, so a
    bucket holds gradients of one kind only (a gradient of the other kind
    closes it). When every rank is on one node (`ranks_per_node`), DeepSpeed
    reduces with the plain reduce-scatter, and so does this pass, with a
    warning.

    `contiguous-gradients` is read for DeepSpeed's `contiguous_gradients` and
    changes nothing: a source-form reduction always adds its gradients into
    its bucket buffer (the plan's `reduce_buckets`) before the collective,
    and stages 0-1 reduce in the persistent `grads` buffer.
  }];
  let options = [
    Option<"reduceBucketSize", "reduce-bucket-size", "int64_t",
           /*default=*/"500000000",
           "Elements per gradient bucket (DeepSpeed: "
           "zero_optimization.reduce_bucket_size)">,
    Option<"reduceScatter", "reduce-scatter", "bool", /*default=*/"true",
           "Stages 1-3: reduce-scatter buckets; false: one reduce per owner "
           "(DeepSpeed: zero_optimization.reduce_scatter)">,
    Option<"overlapComm", "overlap-comm", "bool", /*default=*/"false",
           "Asynchronous reductions with two alternating bucket buffers "
           "(DeepSpeed: zero_optimization.overlap_comm)">,
    Option<"contiguousGradients", "contiguous-gradients", "bool",
           /*default=*/"true",
           "Read for DeepSpeed's zero_optimization.contiguous_gradients; "
           "changes nothing (bucket gradients are always added into their "
           "bucket buffer)">,
    Option<"gradientAccumulationSteps", "gradient-accumulation-steps",
           "int64_t", /*default=*/"1",
           "Micro steps per optimizer step (DeepSpeed: "
           "gradient_accumulation_steps)">,
    Option<"quantizedGradients", "quantized-gradients", "bool",
           /*default=*/"false",
           "Stage 3 across nodes: reduce-scatter the gradients as INT4 "
           "all-to-alls within and across nodes (ZeRO++ qgZ; DeepSpeed: "
           "zero_quantized_gradients)">,
  ];
}

def ZeroTokenMeanPass : Pass<"zero-token-mean", "::mlir::ModuleOp"> {
  let summary = "A loss over the global batch: the mean over its valid labels, or a division by a sum over it";
  let description = [{
    A train step whose loss is an `nn.softmax_cross_entropy` (or an
    `nn.linear_cross_entropy`, `zero-loss-chunk`) with
    `ignore_index` (Hugging Face's causal-LM loss, -100) means the mean over
    the labels other than `ignore_index` of the whole global batch, every
    micro step and every rank, as the Hugging Face Trainer's
    `num_items_in_batch` does; not the mean of each micro batch's mean. The
    loss op itself is one micro batch's mean over its `c` valid labels, so
    the pass multiplies the loss and the backward's seed by that batch's
    share (`zero.label_share`, `c * W * K / N`): the micro batch's loss
    becomes its sum over valid labels times `W * K / N`, the reductions sum
    the gradients of every micro step and rank, and the optimizer's
    division by `W * K` (world size times accumulation steps, the
    `divisor` of `zero.check_overflow` and `zero.optimizer_step`) leaves exactly the
    gradient of the sum of cross-entropies over the valid labels divided by
    `N`. The gradients keep the magnitude of a mean, so the fp16 loss scale
    and its overflow check see what they see without `ignore_index`; the
    driver's step loss, the mean of the micro steps' and ranks' losses, is
    the global mean.

    `N`, the valid labels of the global batch, comes from
    `zero.count_labels`, inserted where the labels are computed (phase
    `first_micro_step`): each rank counts the labels of all its micro
    batches before the first one trains, from the inputs the driver loads
    for each (the program's label count function), and the first micro
    step sums the counts with one all-reduce of an int64, before the
    backward. A global batch whose every label is `ignore_index` (`N = 0`)
    has no mean: its loss is 0 and its gradients zero, the runtime takes no
    optimizer step and stops every rank with an error naming the step and
    the rows it read, so no NaN reaches the weights. On one rank with one
    micro step the share is 1 and the step is that of the loss op alone.

    Runs after `zero-grad-sync`, which fixes the world size and the
    accumulation steps. The loss must be the op's result itself, used by
    nothing but `zero.return`, or an operand of the `nn.add` that is
    (a term added to the model's loss, as a mixture of experts' load-
    balancing loss: only the cross entropy is scaled), and differentiated
    (`zero-autodiff`); an `nn.softmax_cross_entropy` with `ignore_index`
    elsewhere in the step is an error. A step without one is unchanged.

    A loss divided by a scalar of the inputs alone, a sum over the batch
    (`nn.reduce_sum` to a scalar, zero-import's `x.sum()`), optionally
    clamped or plus a constant, is divided by that sum over the global
    batch, as TRL's and the Hugging Face Trainer's losses divide by the
    global batch's `num_items_in_batch`: `(per_token * mask).sum() /
    mask.sum().clamp(min=1)` is the ratio of the global batch's sums, not a
    mean of the micro batches' ratios. `zero.count_sum` sums the micro
    batch's `s` over every micro step and rank (the count function, as for
    the labels, and one all-reduce of a double in the first micro step),
    `zero.step_sum` reads the total `S` back, the clamp or constant is
    applied to `S`, and the result is multiplied by `zero.micro_share`
    (`1 / (W * K)`): each micro batch's loss becomes its numerator times
    `W * K / g(S)`, in the forward and the backward alike. Each such
    denominator gets its own sum (`index` 0, 1, ...). With `W * K = 1` the
    step is unchanged. A loss that divides by another scalar of the inputs
    (a mean, a scale of the sum), or reaches the quotient through an op
    other than `nn.mul`, `nn.add`, `nn.scale` and `nn.reshape` (where the
    micro batches' parts do not add up to the global ratio), is an error
    naming the op. Divisions by values of the parameters are the model's
    own and left alone.

    Any other sum over the batch that the loss adds (`nn.reduce_sum` to a
    scalar of a tensor computed from the inputs: `x.sum()`, and `x.mean()`,
    that sum times 1 / the global batch's numel, as TRL's per-sequence
    `grpo` loss takes it) is multiplied by `W * K`, and so is the gradient
    its `nn.reduce_sum_grad` broadcasts back: a micro batch sums its own
    rows, the global batch's sum is the sum of every micro batch's, and the
    driver and the optimizer take the mean of the `W * K` micro batches'
    losses and gradients. A loss that is not linear in such a sum is an
    error naming the op; a sum of the parameters alone is every micro
    batch's and left alone.
  }];
}

def ZeroParamGatherPass : Pass<"zero-param-gather", "::mlir::ModuleOp"> {
  let summary = "Parameter all-gathers: post-step (stages 1-2) or around uses (stage 3)";
  let description = [{
    Stages 1-2: after the optimizer step (after the last `zero.optimizer_step`, or
    before `zero.return` when the optimizer has not been emitted yet), the
    updated parameters (in the compute type) are gathered in place:
    `zero.all_gather group @flat in params [b, e)` in buckets of
    `allgather-bucket-size` elements, in phase `post_step`: once per
    optimizer step, after the optimizer, which `zero-optimizer` inserts
    before them. Frozen partitions are never updated, so every rank still
    holds them whole: they are not gathered.

    Stage 3: parameters exist only as shards. Every `zero.get_param @p`
    becomes a view `zero.get_param @p from %full` of a buffer gathered by
    `%full = zero.all_gather group @layer`, freed by `zero.free %full` after
    the last use of any view of it. The uses of a group in program order
    (forward and backward) are split into live intervals: a use joins the
    previous interval when the elements of other (non-persistent) groups used
    in between are at most `max-reuse-distance` (DeepSpeed's
    stage3_max_reuse_distance); otherwise the buffer is freed after the
    earlier use and gathered again before the later one with fresh views.
    The forward/backward boundary is the usual split point: the backward
    gathers again, except for the last layers, whose distance is short. A
    group of fewer than `param-persistence-threshold` elements is persistent:
    gathered once at the top of each micro step (`zero.all_gather ...
    persistent`) and freed at its end (`zero.free %full phase step_end`,
    after the optimizer's place), so with gradient accumulation it is
    gathered once per micro step. Nothing is gathered after the step at stage 3.
    Stage 0 needs no gathers.

    `frozen-gather=once` gathers each frozen stage-3 partition once per
    optimizer step instead of around its uses: its values never change, so
    the buffer gathered in the first micro step (`zero.all_gather ...
    persistent phase first_micro_step`, first in the step, before the
    persistent gathers) serves every micro step and is freed after the last
    one (`zero.free %full phase post_step`). With K micro steps that is one
    gather of the partition per step instead of K (or more, with reuse
    intervals), for a buffer held for the whole step. The default,
    `per-use`, treats frozen partitions like the others.

    ZeRO++ hpZ (`hpz_partition_size` h > 1 in the step's schedule): a group
    gathered more than once in the step (forward and backward uses farther
    apart than the reuse distance, or a recomputation) keeps this rank's
    slice of its first gather, `zero.store_secondary %full group @g phase
    first_micro_step` right after it, and every later gather of it in the
    step collects the slices over the hpZ group, `zero.all_gather group @g
    secondary`. A persistent group, a frozen group gathered once and a group
    gathered once in the step keep no secondary. hpZ with `offload-param`
    is an error (the secondary shards live on the device).

    `offload-param=cpu` (DeepSpeed's `offload_param`, stage 3 only) records
    `param = cpu` in the step's offload (`#zero.offload`, whose optimizer
    part is `zero-optimizer`'s): the `params` shards live in pinned host
    memory, and each gather reads a device copy of the shard,
    `%s, %t = zero.transfer group @g params to staging`, waited for before
    it and freed right after it (`zero-prefetch` moves the copy ahead).

    `offload-param=nvme` (ZeRO-Infinity) records `param = nvme`: the shards
    live in a swap file per rank under `param-nvme-path` (`nvme-path` when
    not given), and every staging copy reads its shard through one of
    `param-buffer-count` pinned host swap buffers (`swap <buffer = i mod
    param-buffer-count, buffers, buffer_bytes>`, i counting the copies in
    program order),
    each the largest shard in whole 4096-byte blocks. A shard larger than
    `param-buffer-size` elements is an error (DeepSpeed's swapper asserts
    that a buffer holds a whole parameter).

    `quantized-weights` (ZeRO++ qwZ, DeepSpeed's `zero_quantized_weights`;
    stage 3, 16-bit weights, shards on the device) marks every stage-3
    gather `quantized`: the shards travel as block-quantized INT8, half the
    bytes of a bf16 gather, through a staging buffer the memory plan holds
    from the gather to its completion. Frozen partitions are quantized too
    (DeepSpeed's `zero_quantized_nontrainable_weights`, which quantizes the
    frozen ones alone, is not read). The masters and shards stay exact; the
    forward and backward compute on the dequantized weights.
  }];
  let options = [
    Option<"allgatherBucketSize", "allgather-bucket-size", "int64_t",
           /*default=*/"500000000",
           "Stages 1-2: elements per post-step all-gather (DeepSpeed: "
           "zero_optimization.allgather_bucket_size)">,
    Option<"paramPersistenceThreshold", "param-persistence-threshold",
           "int64_t", /*default=*/"100000",
           "Stage 3: groups below this many elements are gathered once per "
           "step (DeepSpeed: stage3_param_persistence_threshold)">,
    Option<"frozenGather", "frozen-gather", "std::string",
           /*default=*/"\"per-use\"",
           "Stage 3: gather frozen partitions around their uses (per-use) "
           "or once per optimizer step, kept across its micro steps (once)">,
    Option<"maxReuseDistance", "max-reuse-distance", "int64_t",
           /*default=*/"1000000000",
           "Stage 3: keep a gathered group alive when it is used again "
           "within this many elements of other parameters (DeepSpeed: "
           "stage3_max_reuse_distance)">,
    Option<"quantizedWeights", "quantized-weights", "bool",
           /*default=*/"false",
           "Stage 3, 16-bit weights: gather the shards as block-quantized "
           "INT8 (ZeRO++ qwZ; DeepSpeed: zero_quantized_weights)">,
    ZeroOffloadParamOption,
    ZeroNvmePathOption,
    Option<"paramNvmePath", "param-nvme-path", "std::string",
           /*default=*/"\"\"",
           "offload-param=nvme: directory of the parameter swap files "
           "(DeepSpeed: offload_param.nvme_path)">,
    Option<"paramBufferCount", "param-buffer-count", "int64_t",
           /*default=*/"5",
           "offload-param=nvme: pinned host swap buffers (DeepSpeed: "
           "offload_param.buffer_count)">,
    Option<"paramBufferSize", "param-buffer-size", "int64_t",
           /*default=*/"100000000",
           "offload-param=nvme: elements a swap buffer holds, at least the "
           "largest shard (DeepSpeed: offload_param.buffer_size)">,
  ];
}

def ZeroPrefetchPass : Pass<"zero-prefetch", "::mlir::ModuleOp"> {
  let summary = "Asynchronous stage-3 gathers hoisted within a memory budget";
  let description = [{
    Splits each stage-3 `%full = zero.all_gather group @g` into
    `%full, %t = zero.prefetch group @g` and `zero.wait %t` right before the
    first use of `%full`, and hoists the prefetch as early as the budget
    allows, in issue order (a prefetch never overtakes the previous one and
    never rises above the free of the same group's previous buffer):

    - at most `prefetch-bucket-size` elements in flight (issued, not waited)
      at any point;
    - at most `max-live-parameters` gathered-but-not-freed elements at any
      point (counting every stage-3 buffer), so a prefetch never rises above
      the `zero.free` it needs to fit.

    A gather that cannot be hoisted becomes a prefetch immediately followed by
    its wait. The schedule is static: there is no trace, no warm-up step and
    nothing to invalidate. Stages 0-2 have no gathers to split.

    With parameter offload the copy staging a gather's shard moves with it,
    ahead where both budgets still hold from there (counting the staged
    buffer): a host copy to the previous gather's issue point; a read from a
    parameter swap file (`swap <buffer = i, buffers = B, ...>`) up to
    B - 1 gathers ahead, before that gather's staging wait, as soon as the
    wait freeing its swap buffer is behind it, so that up to B reads are in
    flight on the disk even where gathers share an issue point.
  }];
  let options = [
    Option<"prefetchBucketSize", "prefetch-bucket-size", "int64_t",
           /*default=*/"50000000",
           "Elements in flight (DeepSpeed: stage3_prefetch_bucket_size)">,
    Option<"maxLiveParameters", "max-live-parameters", "int64_t",
           /*default=*/"1000000000",
           "Gathered-but-not-freed elements (DeepSpeed: "
           "stage3_max_live_parameters)">,
  ];
}

def ZeroOptimizerPass : Pass<"zero-optimizer", "::mlir::ModuleOp"> {
  let summary = "Overflow check, loss-scale update and fused Adam per shard";
  let description = [{
    Appends the optimizer step after all gradient collectives (before the
    first op of phase `step_end` or `post_step`, or `zero.return`), in phase
    `boundary`: once per optimizer step, after its last micro step.

    ```mlir
    %s = zero.loss_scale phase boundary : tensor<f32>
    %stats = zero.check_overflow groups [@flat] scale %s divisor 4.0 phase boundary : tensor<2xf32>
    %g = zero.all_reduce overflow_norm %stats group @flat phase boundary : tensor<2xf32> -> tensor<2xf32>
    %skip = zero.update_loss_scale %g phase boundary : tensor<2xf32> -> i1
    zero.optimizer_step group @flat stats %g scale %s skip %skip divisor 4.0 phase boundary : tensor<2xf32>
    ```

    `zero.check_overflow` reads each rank's owned gradients once (inf/nan flag
    and squared norm); one small all-reduce carries both (flag max, norm sum).
    At stage 0 every rank already holds the fully reduced gradients, so that
    all-reduce is omitted (it would count the norm `world_size` times).
    Under MiCS (`mics_shard_size` m below the world size) each shard group
    reduced only its own ranks' gradients: first, every trainable
    partition's shard is summed over its replicas (`zero.all_reduce sum
    group @g in grads [0, numel) over replicas`, all issued, then waited),
    after which every shard group holds the whole batch's gradients; the
    divisor stays the world's, and the stats all-reduce runs over the shard
    group, whose shards together are the model (so the norm is ZeRO-3's).
    `zero.update_loss_scale` applies DeepSpeed's DynamicLossScaler and yields
    the skip flag; `zero.optimizer_step` (one per partition) skips on overflow, else
    unscales, clips, steps Adam/AdamW and writes the 16-bit parameters (fp32
    parameters are their own masters, updated in place). The
    divisor is `world_size * accumulation_steps`. Frozen partitions have
    no gradients and no optimizer states: the overflow check, the gradient
    norm (hence clipping) and Adam cover the trainable partitions only, and
    a frozen parameter is never decayed either. `gradient-clipping` >= 0
    overrides the train step's `gradient_clipping` (0 disables clipping).

    The optimizer settings of `#zero.optimizer` can be set here without a
    ds_config: `lr-schedule=TYPE[:name=value,...]` with DeepSpeed's
    scheduler types and parameter names (`WarmupLR`, `WarmupDecayLR`,
    `WarmupCosineLR`, `OneCycle`, `LRRangeTest`; `none` removes the
    schedule), `bias-correction=true|false`, `optimizer-states=f32|bf16|int8`
    (the states' precision, #zero.optimizer's `states`: `int8` is
    bitsandbytes' block-wise 8-bit Adam, refused for an optimizer whose row
    does not declare it), `bf16-masters=true|false` (#zero.optimizer's
    `bf16_masters`, DeepSpeed's `bf16_master_weights_and_grads`: bf16
    parameters are their own masters), and the weight-decay groups:
    `no-decay-bias-norm` gives every 1-D parameter (biases and norm
    weights) `weight_decay 0.0`, `no-decay-embeddings` also every table an
    `nn.embedding` reads.

    `offload-optimizer=cpu` (ZeRO-Offload, stages 1-3) records
    `optimizer = cpu` in the step's offload (`#zero.offload`) and keeps the
    fp32 masters and moments in host memory: the owned gradients stream to
    the host bucket by bucket, `zero.transfer group @g grads[b, e) to
    host_grads` right after the reduction of [b, e) completed (its
    `zero.wait`, or the synchronous reduction), in phase `last_micro_step`
    at stages 2-3 (so the copies overlap the rest of the backward, and only
    the accumulated gradients move) and `boundary` at stage 1; a partition
    without reductions copies its whole owned part before the overflow
    check. Each partition's Adam runs on the host (`zero.optimizer_step ... host`)
    after its own copies only, and its updated parameters are copied back
    (`host_params to params`, or `master to params` with fp32 compute)
    while the next partition's Adam runs, waited for before the post-step
    all-gathers. With parameter offload (`offload-param=cpu`,
    which zero-param-gather must have recorded: its gathers read staged
    shards) the host Adam updates the host shards in place and nothing is
    copied back; with the optimizer on the device, `zero.optimizer_step ... ->
    tensor<shard>` writes the new parameters into a staged buffer that
    `zero.transfer ... %new to params` copies to the host shard.
    `offload-optimizer=nvme` (ZeRO-Infinity) keeps the masters and moments
    in a swap file per rank under `nvme-path` instead of host memory: the
    host Adam carries `swap <chunk = C, buffers = B>` and streams them
    through `nvme-buffer-count` swap buffers of `nvme-buffer-size` elements
    per state (C is that size, or the largest owned shard rounded up to
    1024 elements when smaller), and the updated parameters always come back
    through `host_params` (with parameter offload too, into the host shards
    in place). With the parameter shards on NVMe (`offload-param=nvme`,
    recorded by zero-param-gather) the new parameters go back to the
    parameter swap file through its swap buffers (`zero.transfer ... to
    params swap <buffer = i, ...>`, i counting the writes modulo
    `param-buffer-count`, a write waiting for the one before it on its
    buffer): a device Adam's staged buffer, or a host Adam's `host_params`
    (`master` with fp32 compute and the optimizer in host memory).
  }];
  let options = [
    Option<"gradientClipping", "gradient-clipping", "double",
           /*default=*/"-1.0",
           "Global-norm clipping; -1 keeps the train step's value (DeepSpeed: "
           "gradient_clipping)">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"",
           "Learning-rate schedule TYPE[:name=value,...] with DeepSpeed's "
           "names (scheduler.type and scheduler.params); none removes it; "
           "empty keeps the train step's">,
    Option<"optimizerStates", "optimizer-states", "std::string",
           /*default=*/"",
           "Precision of the optimizer's states, f32, bf16 or int8 (a "
           "precision the optimizer's optimizers.def row declares); empty "
           "keeps the train step's">,
    Option<"bf16Masters", "bf16-masters", "std::string", /*default=*/"",
           "bf16 parameters as their own masters, true or false; empty "
           "keeps the train step's (DeepSpeed: "
           "bf16.bf16_master_weights_and_grads)">,
    Option<"biasCorrection", "bias-correction", "std::string",
           /*default=*/"",
           "Adam bias correction, true or false; empty keeps the train "
           "step's (DeepSpeed: optimizer.params.bias_correction)">,
    Option<"noDecayBiasNorm", "no-decay-bias-norm", "bool",
           /*default=*/"false",
           "No weight decay for 1-D parameters (biases, norm weights)">,
    Option<"noDecayEmbeddings", "no-decay-embeddings", "bool",
           /*default=*/"false",
           "No weight decay for the tables nn.embedding reads">,
    Option<"offloadOptimizer", "offload-optimizer", "std::string",
           /*default=*/"\"none\"",
           "Where the optimizer states live: none, cpu or nvme (DeepSpeed: "
           "zero_optimization.offload_optimizer.device)">,
    ZeroOffloadParamOption,
    ZeroNvmePathOption,
    Option<"nvmeBufferCount", "nvme-buffer-count", "int64_t",
           /*default=*/"4",
           "Swap buffers of an optimizer offloaded to nvme (DeepSpeed: "
           "offload_optimizer.buffer_count)">,
    Option<"nvmeBufferSize", "nvme-buffer-size", "int64_t",
           /*default=*/"1048576",
           "Elements of each fp32 state per swap buffer, a multiple of 1024">,
  ];
}

def ZeroMoeAuxCountsPass : Pass<"zero-moe-aux-counts", "::mlir::ModuleOp"> {
  let summary = "A router's load-balancing loss over the global batch, its "
                "expert counts summed over the ranks";
  let description = [{
    transformers' load-balancing loss (`nn.moe_aux_loss`) is a product of
    two means over every token of the batch: the share of the (token, slot)
    picks of each expert and each expert's mean router probability. On a
    batch divided over W data-parallel ranks of N rows each, the pass
    counts each rank's picks (`nn.moe_expert_counts`), sums the counts over
    the ranks (`zero.all_reduce sum`, E int64 values: exact), and gives
    them to the loss and its gradient with `rows` W * N: each rank's loss
    is then `E * sum_e (C[e] / (W N)) * (sum_n p[n, e] / N)`, whose mean
    over the ranks (the step's logged loss) is the global batch's loss,
    and whose gradients, through the local probabilities only, summed over
    the ranks and divided by W (as the optimizer does) are its gradient.
    The counts are not differentiable, as in transformers (a one-hot of a
    top-k).

    Runs after `zero-grad-sync`, which records the world size and the
    accumulation steps. One rank with one micro step is left unchanged.
    Under gradient accumulation the loss cannot be exact in one pass over
    the micro batches (a micro step's backward would need the later micro
    steps' counts), so it is refused by name, as are sequence parallelism
    and MiCS (whose ranks see parts of rows, or reduce over shard groups).
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def ZeroExpertParallelPass : Pass<"zero-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Expert parallelism: each rank of a group of P holds E / P "
                "of every MoE layer's experts, and tokens travel to them";
  let description = [{
    DeepSpeed-MoE's and torchtitan's expert parallelism. The P ranks of an
    `expert` set (consecutive, or strided with `zero-partition`'s
    `ep-placement`) read different samples and split each MoE layer's E
    experts: member q (in rank order) holds experts `[q * E / P, (q + 1) * E /
    P)`. Each expert parameter (the weight of an `nn.grouped_matmul` that
    reads an `nn.moe_dispatch`'s offsets) keeps E / P of its experts
    (dimension 0) and is marked `expert_parallel P`, with the views of it
    the products read (a cast, or a bias [E, out] copied and reshaped to
    [E, 1, out]: dimension 0 kept); between the dispatch and the first
    grouped matmul a `zero.moe_exchange` sends each row to its expert's
    member, the grouped matmuls run over the local experts (with the
    exchange's local offsets), and a `zero.moe_return` before the
    `nn.moe_combine` brings the results back to their tokens' rows. A
    product's rows that are in the dispatch's order without coming from
    its rows (gpt-oss's column of ones, whose product adds each expert's
    bias) travel by a second exchange with the first's counts.
    The autodiff of an exchange is the return of its gradient, that of a
    return the exchange of its gradient with the counts known.

    The receive buffers are planned at the dropless bound, P times a
    rank's rows; with `moe-capacity-factor` C > 0, at `ceil(C * n)` rows
    for a rank's n rows (after zero-partition divides the batch), at most
    the dropless bound, and an overflow stops the step naming the layer
    (or, with `moe-drop-tokens`, drops the rows past the capacity, as
    DeepSpeed's capacity does). Runs on the forward, before `zero-autodiff`;
    `zero-partition` takes the same `ep-size`, which must divide its world
    size. Refused by name: experts not divisible by P, a grouped matmul
    whose rows are neither a dispatch's rows nor rows in their order (or
    whose weights are not a parameter or such a view of one), and expert
    parallelism with sequence parallelism.
  }];
  let options = [
    Option<"epSize", "ep-size", "int64_t", /*default=*/"1",
           "Ranks that split each MoE layer's experts (1: off)">,
    Option<"capacityFactor", "moe-capacity-factor", "double",
           /*default=*/"0.0",
           "Receive buffers of C times the balanced load (0: dropless, P "
           "times a rank's rows)">,
    Option<"dropTokens", "moe-drop-tokens", "bool", /*default=*/"false",
           "Drop the rows past the capacity (counted in --log-json) instead "
           "of stopping the step">,
  ];
  let dependentDialects = ["::mlir::nn::NNDialect",
                           "::mlir::zero::ZeroDialect"];
}

#endif // ZERO_DIALECT_ZERO_TRANSFORMS_PASSES
