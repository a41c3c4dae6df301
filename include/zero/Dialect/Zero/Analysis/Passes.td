//===- Passes.td - Schedule analyses: plan, verifier, report -*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_PASSES
#define ZERO_DIALECT_ZERO_ANALYSIS_PASSES

include "mlir/Pass/PassBase.td"

// The cost model's hardware preset: zero-report's option, and the one by
// which zero-pipeline's memory-budget ranks the plans that fit.
def ZeroHardwareOption
    : Option<"hardware", "hardware", "std::string", /*default=*/"\"h100-sxm\"",
             "Hardware preset of the cost model: a100-40gb, a100-80gb, l4, "
             "rtx-4090, h100-sxm, h100-sxm-96gb, h100-pcie, h200-sxm (or h200), "
             "mi300x or cpu">;

// Overrides the line rate of the preset's links between nodes: zero-report's
// option, and zero-pipeline's for the plans memory-budget ranks.
def ZeroInterNodeBandwidthOption
    : Option<"interNodeBandwidth", "inter-node-bandwidth", "std::string",
             /*default=*/"\"\"",
             "Line rate of each of the hardware preset's links between "
             "nodes, in Gb/s each way (400 or 400Gb/s; default: the "
             "preset's, docs/HardwarePresets.md)">;

def ZeroPlanMemoryPass : Pass<"zero-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Record the memory plan of every scheduled step in the IR";
  let description = [{
    Records the memory plan (the analysis `computeMemoryPlan`) of each
    scheduled `zero.train_step` in the typed attributes the `zero` dialect
    declares and verifies, so that `zero-verify-schedule` can check a plan
    that travels with the IR against the buffers' liveness, and a plan can be
    hand-written in tests. The lowering and the report compute the plan
    themselves; to read a plan in a test, `zero-print-memory-plan` prints it
    without changing the IR.

    The plan gives every buffer a static offset in an arena of the rank:

    * the persistent arena (lives across steps): for every partition its
      `params`, `grads`, `master` (only with 16-bit compute: fp32
      parameters are their own masters), `exp_avg` and `exp_avg_sq`
      buffers, sized by the stage (see `zero.partition`), recorded on the
      partition as `zero.buffers = #zero.buffer_offsets<params = offset,
      ...>`. With the step's offload (`#zero.offload`) the buffers it moves
      (the optimizer states beside `host_grads` and `host_params`, or the
      stage-3 `params` shards) are in the pinned host arena instead, with
      the NVMe swap buffers, and states on NVMe at offsets of the rank's
      swap files;
    * the step arena: the input batch, activations kept for backward,
      gradients, temporaries, gathered parameter buffers (stage 3) and bucket
      buffers of source-form reductions, placed in program order by a
      first-fit allocator that frees a buffer after its last use (uses of
      views count) or at its `zero.free`, and a slice at a partial
      `zero.free`. Each op gets `zero.alloc` (one byte offset per result, -1
      for views and for gradients stored directly into the persistent
      `grads` buffer) and `zero.temp` (offset of its bucket buffer) where it
      has one.

    `nn.reshape` and `zero.get_param` are views and take no memory. At stages
    0-1 without gradient accumulation a gradient bound by `zero.grad` is
    computed directly into its slot of the persistent `grads` buffer.
    The train step gets `zero.input_offsets` (the offset of each input) and
    `zero.plan = #zero.memory_plan<persistent_bytes, arena_bytes,
    scratch_bytes, peak_bytes>` (with offload also the host arena's and the
    swap files' sizes); the peak is the persistent size plus the step
    arena's high-water mark plus the largest heap scratch of one runtime
    kernel (the runtime's own formulas, `zero_rt/scratch.h`), which is what
    the runtime allocates and measures on the device.
    Every offset is a multiple of 64 bytes.
  }];
}

def ZeroVerifySchedulePass : Pass<"zero-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Prove that a schedule is consistent on every rank";
  let description = [{
    Rejects, with a diagnostic at the offending op, any schedule where:

    * a collective's presence or size could depend on the rank: collectives
      must be at the top level of the train step (not under control flow), and
      every rank's part of each collective, derived from the partition layout,
      must add up to the same collective on all ranks;
    * an asynchronous collective's token is not waited exactly once, or its
      result (or the gradients and buffers it reads or writes) is used before
      the wait;
    * a buffer (or a slice of it) is used after `zero.free`, or freed twice;
    * two simultaneously live buffers overlap in the memory plan
      (`zero-plan-memory`), when there is one;
    * a parameter's gradient is reduced zero or two times in a step (every
      element of every trainable partition exactly once);
    * a shard is updated zero or two times (`zero.optimizer_step` once per trainable
      partition), or at stages 1-2 its parameters are not all-gathered
      exactly once after the update;
    * an op reduces, checks, copies, updates or (stages 1-2) gathers after
      the step a frozen partition, which has `params` only;
    * with an offloaded optimizer, a gradient element is not copied to the
      host exactly once, after its reduction completed and before its host
      `zero.optimizer_step`, or an updated parameter is not copied back exactly once
      after it (never with parameter shards in host memory); with offloaded
      parameters and the optimizer on the device, the new parameters are not
      stored once from the `zero.optimizer_step`'s staged buffer;
    * with hpZ, a gather of a group's secondary shards comes before every
      `zero.store_secondary` of that group in the step, or after the
      optimizer's place (it would read the previous step's parameters), or
      a store reads a buffer other than its group's own gather of the
      parameter shards;
    * under MiCS with more than one shard group, a trainable partition's
      gradient shard is not summed over the replicas (`zero.all_reduce ...
      over replicas`) exactly once per step, element by element, after its
      shard group's reductions completed and before the overflow check and
      its `zero.optimizer_step` read it; a replica sum without replicas;
    * a parameter swap buffer serves two transfers at once (one from its
      issue to its `zero.wait`), or the transfers disagree on the buffers;
    * the phases disagree with what the ops do (`StepPhaseOpInterface`): the
      optimizer not at the boundary or after an op placed after it, an
      in-place gradient reduction not at the boundary, an in-place parameter
      gather not post_step, a wait in another phase than its collective
      (one runs every micro step, the other once), or an op of every micro
      step reading a value only the last micro step computes.

    It runs at the end of `zero-pipeline` by default.
  }];
}

def ZeroReportPass : Pass<"zero-report", "::mlir::ModuleOp"> {
  let summary = "Per-rank memory, communication and predicted time of a step";
  let description = [{
    Writes the report of each scheduled train step: parameter counts, model
    state bytes per rank by category, bucket and gather buffer bytes,
    activation bytes and the exact peak of the memory plan (the report
    plans the step itself, with the planner `zero-plan-memory` runs), the
    communication volume (sum over collectives of the elements of the full
    array, an all-reduce counting twice), the bytes one rank sends with ring
    algorithms, the number of collectives of each kind, and the step time and
    exposed communication predicted by the cost model for a hardware preset;
    with offload also the pinned host peak, the NVMe swap files and the
    exposed transfer time (see `docs/Report.md`).

    After the memory table comes the fit verdict: whether the peak fits the
    device memory of the preset (its data sheet's capacity in decimal units,
    80 GB = 80e9 bytes) or of `device-memory`, which overrides it
    ("fits: X free of Y", or "does not fit by X; largest item: NAME SIZE",
    the largest item being the biggest of the model states, the step-arena
    categories live when the arena holds the most, and the kernel scratch).
    The JSON has it under `fit`; null where no device memory is known (the
    `cpu` preset without `device-memory`).

    With `ranks_per_node` on the step's `#zero.schedule` the bytes are split
    between the links within a node and those between nodes, per kind too
    (`zero_rt/topology.h`'s two-level collectives), and the cost model
    prices the cross-node level at the preset's inter-node fabric, whose
    line rate `inter-node-bandwidth` overrides. The JSON has the same keys
    whatever the topology and options (on one node every byte within it, a
    feature that is off at its neutral value; `docs/Report.md` lists them).

    `runtime=eager` prices the ops whose eager PyTorch decomposition differs
    from our fused kernel as the chain of unfused kernels an eager peer runs
    (each op's `KernelCost::eagerBytes` and `eagerLaunches`), to compare
    with published eager runs; the default, `fused`, prices one kernel an
    op. `runtime=compiled` prices the eager peer with each transformer
    block compiled (torchtitan's `apply_compile`): the ops in the blocks
    fused, the loss, FSDP2's copies and the foreach AdamW eager. The
    validation band is of fused predictions, so an eager or compiled report
    prints none. `reduce-dtype=f32` prices the gradient reduce-scatters (and
    the eager peer's copy into them) at 4 bytes an element, as a peer that
    reduces in fp32 moves them (FSDP2's `reduce_dtype`); the plan is
    unchanged.

    `doc-lengths=FILE` reads the lengths of the documents packed into the
    step's rows (`zero-data --pack --doc-lengths`): attention over packed
    rows (`segments`) is priced by the pairs each document's mask keeps
    rather than a full row's, and the report gives the fill, the padding
    the packing saves against one document a padded row, and that
    attention work (JSON `packing`, null without). The memory plan does
    not change: the shapes are static.
  }];
  let options = [
    Option<"out", "out", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for stdout)">,
    Option<"format", "format", "std::string", /*default=*/"\"json\"",
           "Report format: json or text">,
    ZeroHardwareOption,
    ZeroInterNodeBandwidthOption,
    Option<"deviceMemory", "device-memory", "std::string", /*default=*/"\"\"",
           "Device memory of one rank for the fit verdict, overriding the "
           "preset's: a count with a unit, B, KiB, MiB, GiB, TiB or decimal "
           "KB, MB, GB, TB (e.g. 24GiB)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"fused\"",
           "Whose kernels the predicted step assumes: fused (one kernel an "
           "op, ours or a compiled peer's) or eager (an eager PyTorch peer's "
           "unfused RMSNorm, RoPE, SwiGLU and fp32 loss; docs/CostModel.md) "
           "or compiled (that peer with each transformer block compiled)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Price the gradient reduce-scatters as a peer that reduces in "
           "this type does (f32: FSDP2's reduce_dtype=float32); the plan's "
           "bytes do not change">,
    Option<"docLengths", "doc-lengths", "std::string", /*default=*/"\"\"",
           "The packed rows' document lengths (zero-data --pack "
           "--doc-lengths FILE): price attention over packed rows by them "
           "and report the padding the packing saves">,
    Option<"trace", "trace", "std::string", /*default=*/"\"\"",
           "Also write the predicted timeline as Chrome-trace JSON (Perfetto)">,
    Option<"memorySvg", "memory-svg", "std::string", /*default=*/"\"\"",
           "Also write a per-rank memory-over-time picture (SVG)">,
  ];
}

def ZeroPrintMemoryPlanPass
    : Pass<"zero-print-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Print the memory plan of every scheduled step (for tests)";
  let description = [{
    Prints to stdout the memory plan (`computeMemoryPlan`, what
    `zero-plan-memory` records) of each scheduled `zero.train_step`, one fact
    per line, and leaves the IR unchanged:

    ```
    zero.train_step @step
      persistent_bytes 896, arena_bytes 576, scratch_bytes 0, peak_bytes 1472
      persistent @flat params offset 0 bytes 136
      ...
      arena input #0 offset 0 bytes 128 live [-1, 7] inputs
      arena op 1 nn.mul result #0 offset 192 bytes 128 live [1, 6] activations
      ...
      arena op 7 nn.mul result #0 offset 192 bytes 128 live [7, 16] gradients
        piece offset 256 bytes 64 live [7, 11]
        piece offset 192 bytes 64 live [7, 16]
      arena op 9 zero.reduce_scatter bucket offset 0 bytes 64 live [9, 10] reduce_buckets
    ```

    Persistent buffers come per partition in the order of the arena. Arena
    buffers come in program order (inputs first), each with its op (by index
    in the step's body) and result, or `bucket` for the bucket buffer of a
    source-form reduction, its offset and bytes, the first and last op index
    at which it is live (-1: an input, live before the first op) and its
    category. A buffer freed slice by slice lists its pieces.
  }];
}

#endif // ZERO_DIALECT_ZERO_ANALYSIS_PASSES
