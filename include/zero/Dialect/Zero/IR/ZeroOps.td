//===- ZeroOps.td - Model structure and ZeRO schedule ops ---*- tablegen -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_IR_ZEROOPS
#define ZERO_DIALECT_ZERO_IR_ZEROOPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"
include "zero/Dialect/FloatTensors.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Zero_Dialect : Dialect {
  let name = "zero";
  let cppNamespace = "::mlir::zero";
  let summary = "Model structure and ZeRO schedules of one training step";
  let description = [{
    The `zero` dialect describes a model's parameters (`zero.param`), one
    training step (`zero.train_step`, whose body is the forward computation in
    the `nn` dialect ending in a scalar loss), and the schedule that the ZeRO
    passes build around it for N data-parallel ranks: how parameters are
    flattened and partitioned (`zero.partition`), the collectives
    (`zero.all_gather`, `zero.reduce_scatter`, `zero.reduce`,
    `zero.all_reduce`, `zero.prefetch` with `zero.wait`), buffer lifetimes
    (`zero.free`) and the optimizer step (`zero.check_overflow`,
    `zero.update_loss_scale`, `zero.optimizer_step`, `zero.cast`).

    A step is one rank's view: every rank runs the same program, and the ops
    whose data depend on the rank (shards) name the partition they belong to;
    the rank itself never appears in the IR, which is what lets
    `zero-verify-schedule` prove that all ranks issue the same collectives.

    `zero-plan-memory` records the memory plan in discardable attributes that
    this dialect declares and verifies (byte offsets are 64-byte aligned):

    * `zero.plan = #zero.memory_plan<...>` on `zero.train_step`: the totals;
    * `zero.input_offsets = array<i64: ...>` on `zero.train_step`: the
      step-arena offset of each input;
    * `zero.buffers = #zero.buffer_offsets<...>` on `zero.partition`: the
      persistent-arena offset of each of its buffers;
    * `zero.alloc = array<i64: ...>` on an op of a train step's body: the
      step-arena offset of each result, -1 for a result that owns no step
      memory (a view, a gradient computed into the persistent `grads`
      buffer, a value that is not a tensor);
    * `zero.temp = N` on a source-form `zero.reduce_scatter` or `zero.reduce`:
      the step-arena offset of its bucket buffer.

    A DeepSpeed config's logging keys reach the training driver through
    `zero.logging = #zero.logging<...>` on `zero.train_step`; where the
    optimizer states and the parameters live is the step's own `offload`.

    `zero-import --hf` records what an export to Hugging Face writes in
    `zero.hf_model = #zero.hf_model<...>` on the module, and the import of a
    PEFT LoRA model what its adapter and merged exports write in
    `zero.peft = #zero.peft<...>`.

    `zero-remat` marks the forward ops it cloned into the backward with the
    unit attribute `zero.recompute` (only on `nn` ops of a train step's body).
  }];
  let hasOperationAttrVerify = 1;
  let discardableAttrs = (ins
    "::mlir::zero::MemoryPlanAttr":$plan,
    "::mlir::DenseI64ArrayAttr":$input_offsets,
    "::mlir::zero::BufferOffsetsAttr":$buffers,
    "::mlir::DenseI64ArrayAttr":$alloc,
    "::mlir::IntegerAttr":$temp,
    "::mlir::UnitAttr":$loss_seed,
    "::mlir::UnitAttr":$recompute,
    "::mlir::zero::LoggingAttr":$logging,
    "::mlir::zero::HfModelAttr":$hf_model,
    "::mlir::zero::PeftAttr":$peft
  );
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

//===----------------------------------------------------------------------===//
// Enums and attributes
//===----------------------------------------------------------------------===//

def Zero_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"zeros", 1>,
    I32EnumAttrCase<"ones", 2>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}
def Zero_InitKindAttr : EnumAttr<Zero_Dialect, Zero_InitKind, "init">;

// torch.optim.Muon's adjust_lr_fn (None is "original"), numbered as
// zrt_muon's adjust_lr_fn.
def Zero_MuonAdjustLr : I32EnumAttr<"MuonAdjustLr", "Muon learning-rate adjustment", [
    I32EnumAttrCase<"original", 0>, I32EnumAttrCase<"match_rms_adamw", 1>]> {
  let cppNamespace = "::mlir::zero";
}

// The precisions of runtime/include/zero_rt/optimizers.def's
// ZRT_STATE_PRECISION rows, in their order.
def Zero_StatePrecision : I32EnumAttr<"StatePrecision",
    "optimizer state precision", [
    I32EnumAttrCase<"f32", 0>, I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"int8", 2>]> {
  let cppNamespace = "::mlir::zero";
}

def Zero_LrScheduleKind : I32EnumAttr<"LrScheduleKind", "learning-rate schedule", [
    I32EnumAttrCase<"warmup_lr", 0>, I32EnumAttrCase<"warmup_decay_lr", 1>,
    I32EnumAttrCase<"warmup_cosine_lr", 2>, I32EnumAttrCase<"one_cycle", 3>,
    I32EnumAttrCase<"lr_range_test", 4>]> {
  let cppNamespace = "::mlir::zero";
}

def Zero_WarmupType : I32EnumAttr<"WarmupType", "warmup curve", [
    I32EnumAttrCase<"log", 0>, I32EnumAttrCase<"linear", 1>]> {
  let cppNamespace = "::mlir::zero";
}

// Which tokens of a token stream are a step's labels (the training driver's
// --data and --eval-data follow it).
def Zero_LabelConvention : I32EnumAttr<"LabelConvention", "token-label convention", [
    I32EnumAttrCase<"next_token", 0>, I32EnumAttrCase<"same_tokens", 1>,
    I32EnumAttrCase<"shifted", 2>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}
def Zero_LabelConventionAttr
    : EnumAttr<Zero_Dialect, Zero_LabelConvention, "label_convention">;

def Zero_PrecisionKind : I32EnumAttr<"PrecisionKind", "training precision", [
    I32EnumAttrCase<"fp32", 0>, I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"fp16", 2>]> {
  let cppNamespace = "::mlir::zero";
}

def Zero_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"overflow_norm", 2>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}
def Zero_ReduceKindAttr : EnumAttr<Zero_Dialect, Zero_ReduceKind, "reduce_kind">;

// A double-precision attribute parameter, printed so that it round-trips.
def Zero_DoubleParam : AttrOrTypeParameter<"::llvm::APFloat", "a double"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double v;
    if ($_parser.parseFloat(v))
      return ::mlir::failure();
    return ::llvm::APFloat(v);
  }() }];
  let printer = [{ $_printer.printFloat(::llvm::APFloat($_self)) }];
  let comparator = [{ ::llvm::APFloat($_lhs).bitwiseIsEqual(::llvm::APFloat($_rhs)) }];
}
class Zero_DefaultDouble<string value>
    : DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(" # value # ")"> {
  let parser = Zero_DoubleParam.parser;
  let printer = Zero_DoubleParam.printer;
  let comparator = Zero_DoubleParam.comparator;
}

// Zero_OptimizerKind (the cases of optimizers.def's ZRT_OPTIMIZER rows, in
// its order) and Zero_OptimizerHyperParams (one parameter per
// ZRT_HYPER_PARAM row, with its default), written from the table by the
// build (tools/zero-import/optimizers-gen.py --td).
include "zero/Dialect/Zero/IR/ZeroOptimizerTable.td"

// The step count that ends a schedule, or `auto` (LrScheduleAttr::kAutoSteps):
// the length of the run, which the training driver knows (--steps).
def Zero_TotalStepsParam : DefaultValuedParameter<"int64_t", "0"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<int64_t> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("auto")))
      return int64_t(-1);
    ::llvm::SMLoc loc = $_parser.getCurrentLocation();
    int64_t v;
    if ($_parser.parseInteger(v))
      return ::mlir::failure();
    if (v < 0)
      return $_parser.emitError(loc, "expected a step count >= 0 or auto, got ")
             << v;
    return v;
  }() }];
  let printer = [{
    if ($_self < 0)
      $_printer << "auto";
    else
      $_printer << $_self;
  }];
}

class Zero_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Zero_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Zero_LrScheduleAttr : Zero_Attr<"LrSchedule", "lr_schedule"> {
  let summary = "A DeepSpeed learning-rate schedule over the optimizer steps";
  let description = [{
    DeepSpeed's schedulers (`deepspeed.runtime.lr_schedules`) with their
    parameter names: `warmup_lr` (WarmupLR), `warmup_decay_lr`
    (WarmupDecayLR), `warmup_cosine_lr` (WarmupCosineLR), `one_cycle`
    (OneCycle, with its momentum cycle when `cycle_momentum`) and
    `lr_range_test` (LRRangeTest). Only the parameters of `kind` may differ
    from their defaults. The fused Adam computes the learning rate (and
    OneCycle's betas) from its step counter, so the schedule needs neither
    recompilation nor the host; like DeepSpeed's engine, a skipped step
    (fp16 overflow) does not advance it. `cycle_second_step_size = 0` means
    `cycle_first_step_size`, and `warmup_cosine_lr` scales the optimizer's
    `lr`. `total_num_steps = auto` (Hugging Face's `"auto"`) is the length
    of the run: the training driver sets it to the run's `--steps` when it
    starts.

    ```mlir
    #zero.lr_schedule<kind = warmup_decay_lr, warmup_max_lr = 6.000000e-04, warmup_num_steps = 100, warmup_type = linear, total_num_steps = 1000>
    ```
  }];
  let parameters = (ins
    "::mlir::zero::LrScheduleKind":$kind,
    Zero_DefaultDouble<"0.0">:$warmup_min_lr,
    Zero_DefaultDouble<"0.001">:$warmup_max_lr,
    DefaultValuedParameter<"int64_t", "1000">:$warmup_num_steps,
    DefaultValuedParameter<"::mlir::zero::WarmupType",
                           "::mlir::zero::WarmupType::log">:$warmup_type,
    Zero_TotalStepsParam:$total_num_steps,
    Zero_DefaultDouble<"0.0">:$warmup_min_ratio,
    Zero_DefaultDouble<"0.0001">:$cos_min_ratio,
    Zero_DefaultDouble<"0.0">:$cycle_min_lr,
    Zero_DefaultDouble<"0.0">:$cycle_max_lr,
    Zero_DefaultDouble<"0.0">:$decay_lr_rate,
    DefaultValuedParameter<"int64_t", "2000">:$cycle_first_step_size,
    DefaultValuedParameter<"int64_t", "0">:$cycle_second_step_size,
    DefaultValuedParameter<"int64_t", "0">:$decay_step_size,
    DefaultValuedParameter<"bool", "true">:$cycle_momentum,
    Zero_DefaultDouble<"0.8">:$cycle_min_mom,
    Zero_DefaultDouble<"0.9">:$cycle_max_mom,
    Zero_DefaultDouble<"0.0">:$decay_mom_rate,
    Zero_DefaultDouble<"0.001">:$lr_range_test_min_lr,
    DefaultValuedParameter<"int64_t", "2000">:$lr_range_test_step_size,
    Zero_DefaultDouble<"1.0">:$lr_range_test_step_rate,
    DefaultValuedParameter<"bool", "false">:$lr_range_test_staircase);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// total_num_steps `auto`: the run's length, set when the run starts.
    static constexpr int64_t kAutoSteps = -1;
    bool isTotalNumStepsAuto() const {
      return getTotalNumSteps() == kAutoSteps;
    }
  }];
}

def Zero_OptimizerAttr : Zero_Attr<"Optimizer", "optimizer"> {
  let summary = "The optimizer of a train step and its hyper-parameters";
  let description = [{
    ```mlir
    #zero.optimizer<kind = adamw, lr = 6.000000e-04, beta1 = 9.000000e-01, beta2 = 9.500000e-01, eps = 1.000000e-08, weight_decay = 1.000000e-01>
    ```
    `kind` is a row of runtime/include/zero_rt/optimizers.def, which names
    its hyper-parameters, their defaults and its state buffers.
    `adam` adds `weight_decay * param` to the gradient (L2, as
    `torch.optim.Adam`); `adamw` decays the parameter directly (decoupled, as
    `torch.optim.AdamW`). Both use bias correction unless
    `bias_correction = false` (DeepSpeed's Adam option: the step is `lr`
    and the denominator `sqrt(exp_avg_sq) + eps`). `lion` (DeepSpeed's
    Lion) reads `lr`, `beta1`, `beta2` and `weight_decay` (decoupled) and
    ignores `eps` and `bias_correction`. `sgd` (`torch.optim.SGD`) reads
    `lr`, `momentum`, `dampening`, `weight_decay` (L2) and `nesterov`; it
    keeps a `momentum_buffer` only when `momentum` is not 0, and, as torch,
    `nesterov` needs a positive `momentum` and a zero `dampening`. `muon`
    is `torch.optim.Muon` on the 2-D hidden matrices and `torch.optim.AdamW`
    on every other parameter (embeddings, output head, norms, biases), the
    split of `Analysis/Muon.h`: the AdamW half reads `lr`, `beta1`,
    `beta2`, `eps`, `weight_decay` and `bias_correction`; the Muon half
    `muon_lr`, `muon_momentum`, `muon_nesterov`, `ns_steps`, `ns_a`,
    `ns_b`, `ns_c`, `ns_eps` (the norm's eps of Newton-Schulz),
    `adjust_lr_fn` and `weight_decay` (one decay for both halves, as
    DeepSpeed's Muon). Their defaults are torch's. `adafactor`
    (`torch.optim.Adafactor`) reads `lr`, `weight_decay` (decoupled),
    `beta2_decay`, `eps1` (a negative value is torch's None: fp32's machine
    epsilon), `eps2`, `d` (the update's RMS clipping threshold) and
    `maximize`; it keeps its second moments in `exp_avg_sq`, factored into
    row and column statistics for tensors of two or more dims. `nadam`
    (`torch.optim.NAdam`) reads `lr`, `beta1`, `beta2`, `eps`,
    `weight_decay`, `momentum_decay` and `decoupled_weight_decay` (false:
    L2, as torch's default; true: decoupled, torch's NAdamW). A
    `zero.param` with a
    `weight_decay` of its own uses it instead of `weight_decay`.
    `states` is the precision the optimizer's state buffers are kept in:
    `f32` (the default), or another that the row declares
    (`ZRT_OPTIMIZER_PRECISION`): `int8` is bitsandbytes' block-wise 8-bit
    states (one byte per element and one fp32 absmax per block).
    `schedule` (a `#zero.lr_schedule`) makes the learning rate a function
    of the optimizer step; without it `lr` is constant.
    `bf16_masters` is DeepSpeed's `bf16.bf16_master_weights_and_grads`:
    bf16 parameters are their own masters (no fp32 master buffer); the
    update reads the bf16 parameter and gradient, computes in fp32 and
    rounds the new parameter to nearest even. Gradients are bf16 either way.
    Only `adam` and `adamw` (with `f32` or `bf16` states) update bf16
    masters; parameters of any other compute type keep their masters.
  }];
  let parameters = !con(
    (ins "::mlir::zero::OptimizerKind":$kind, Zero_DoubleParam:$lr),
    Zero_OptimizerHyperParams,
    (ins DefaultValuedParameter<"::mlir::zero::StatePrecision",
                                "::mlir::zero::StatePrecision::f32">:$states,
         OptionalParameter<"::mlir::zero::LrScheduleAttr">:$schedule,
         DefaultValuedParameter<"bool", "false">:$bf16_masters));
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Its hyper-parameters, one value per optimizers.def ZRT_HYPER_PARAM row.
    ::mlir::zero::OptimizerParams getParams() const;
  }];
  // The attribute of `kind` and `lr` with hyper-parameters `params` (each
  // row's value, by name), built and verified in ZeroAttributes.cpp.
  let builders = [
    AttrBuilder<(ins "::mlir::zero::OptimizerKind":$kind, "double":$lr,
                     CArg<"const ::mlir::zero::OptimizerParams &", "{}">:$params,
                     CArg<"::mlir::zero::StatePrecision",
                          "::mlir::zero::StatePrecision::f32">:$states,
                     CArg<"::mlir::zero::LrScheduleAttr", "{}">:$schedule,
                     CArg<"bool", "false">:$bf16_masters)>
  ];
}

def Zero_PrecisionAttr : Zero_Attr<"Precision", "precision"> {
  let summary = "Training precision and DeepSpeed's loss scaler";
  let description = [{
    `fp32`: everything in fp32; the parameters are their own masters (no
    separate master copy). `bf16`: bf16 compute copies of the fp32 master
    parameters, no loss scaling. `fp16`: fp16 compute copies and DeepSpeed's
    DynamicLossScaler: the scale starts at `2^initial_scale_power`, is halved
    on an overflow once `hysteresis` overflows have been absorbed, doubled
    after `loss_scale_window` steps without overflow, and never goes below
    `min_loss_scale`. A positive `loss_scale` is DeepSpeed's static scale
    (its `fp16.loss_scale`) instead: the scale is `loss_scale` throughout,
    and a step whose gradients overflow is still skipped. 0 (the default)
    is the dynamic scaler.

    ```mlir
    #zero.precision<kind = fp16, initial_scale_power = 16, loss_scale_window = 1000, hysteresis = 2, min_loss_scale = 1.000000e+00>
    #zero.precision<kind = fp16, loss_scale = 1.024000e+03>
    ```
  }];
  let parameters = (ins
    "::mlir::zero::PrecisionKind":$kind,
    DefaultValuedParameter<"int64_t", "16">:$initial_scale_power,
    DefaultValuedParameter<"int64_t", "1000">:$loss_scale_window,
    DefaultValuedParameter<"int64_t", "2">:$hysteresis,
    Zero_DefaultDouble<"1.0">:$min_loss_scale,
    Zero_DefaultDouble<"0.0">:$loss_scale);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_LoggingAttr : Zero_Attr<"Logging", "logging"> {
  let summary = "What the training driver logs (DeepSpeed's logging keys)";
  let description = [{
    `steps_per_print`: the driver prints its progress line at the steps
    that are a multiple of it (DeepSpeed's `steps_per_print`; 1, the
    default, is every step). `wall_clock_breakdown`: each progress line
    and `--log-json` line also gives the time of the step's micro steps
    (forward and backward) and of its boundary (the reductions left, the
    optimizer and the all-gathers), as DeepSpeed's `wall_clock_breakdown`
    times forward, backward and step.

    ```mlir
    zero.train_step @train(...) optimizer ... precision ... attributes {zero.logging = #zero.logging<steps_per_print = 10, wall_clock_breakdown = true>} {
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1">:$steps_per_print,
    DefaultValuedParameter<"bool", "false">:$wall_clock_breakdown);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_ExpertPlacement : I32EnumAttr<"ExpertPlacement",
    "where the ranks of an expert-parallel set lie", [
    I32EnumAttrCase<"contiguous", 0>, I32EnumAttrCase<"strided", 1>]> {
  let cppNamespace = "::mlir::zero";
}

def Zero_OffloadDevice : I32EnumAttr<"OffloadDevice",
    "where offloaded model states live", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"cpu", 1>,
    I32EnumAttrCase<"nvme", 2>]> {
  let cppNamespace = "::mlir::zero";
}

def Zero_OffloadAttr : Zero_Attr<"Offload", "offload"> {
  let summary = "Where a train step keeps its optimizer states and parameters";
  let description = [{
    DeepSpeed's ZeRO-Offload and ZeRO-Infinity choice, recorded as the
    `offload` of `zero.train_step` by `zero-param-gather` (the parameters)
    and `zero-optimizer` (the optimizer): `optimizer`
    (`offload_optimizer.device`) places the fp32 masters and Adam moments,
    `param` (`offload_param.device`) the stage-3 parameter shards, in device
    memory (`none`), pinned host memory (`cpu`) or files under `nvme_path`
    (`nvme`). DeepSpeed's rules hold: optimizer offload at stages 1-3,
    parameter offload at stage 3 only (the train step checks them against
    its `#zero.schedule`), and `nvme` needs a path. With the optimizer on
    `nvme` the host keeps `buffer_count` pinned swap buffers (DeepSpeed's
    `offload_optimizer.buffer_count`, default 4) of `buffer_size` elements
    of each of the three fp32 states (default 1048576; a multiple of 1024,
    so that every chunk starts 4096-aligned in the swap file).
    With the parameters on `nvme` (ZeRO-Infinity's `offload_param`) their
    shards live in a swap file of their own under `param_nvme_path`
    (DeepSpeed keeps separate swap folders; it may be the same directory),
    fetched through `param_buffer_count` pinned swap buffers (DeepSpeed's
    `offload_param.buffer_count`, default 5) of `param_buffer_size`
    elements each (`offload_param.buffer_size`, default 100000000), which
    must hold the largest parameter shard (`zero-param-gather` checks it;
    the buffers are planned no larger than that shard).

    ```mlir
    zero.train_step @train(...) ... offload #zero.offload<optimizer = cpu> {
    zero.train_step @train(...) ... offload #zero.offload<optimizer = nvme, nvme_path = "/local_nvme", buffer_count = 4> {
    zero.train_step @train(...) ... offload #zero.offload<param = nvme, param_nvme_path = "/local_nvme", param_buffer_count = 5> {
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"::mlir::zero::OffloadDevice",
                           "::mlir::zero::OffloadDevice::none">:$optimizer,
    DefaultValuedParameter<"::mlir::zero::OffloadDevice",
                           "::mlir::zero::OffloadDevice::none">:$param,
    StringRefParameter<"a directory", "\"\"">:$nvme_path,
    DefaultValuedParameter<"int64_t", "4">:$buffer_count,
    DefaultValuedParameter<"int64_t", "1048576">:$buffer_size,
    StringRefParameter<"a directory", "\"\"">:$param_nvme_path,
    DefaultValuedParameter<"int64_t", "5">:$param_buffer_count,
    DefaultValuedParameter<"int64_t", "100000000">:$param_buffer_size);
  // Without swap buffer settings: the parameters' defaults above; with no
  // argument, nothing offloaded (a train step without `offload`).
  let builders = [
    AttrBuilder<(ins CArg<"::mlir::zero::OffloadDevice",
                          "::mlir::zero::OffloadDevice::none">:$optimizer,
                     CArg<"::mlir::zero::OffloadDevice",
                          "::mlir::zero::OffloadDevice::none">:$param,
                     CArg<"::llvm::StringRef", "\"\"">:$nvme_path), [{
      return $_get($_ctxt, optimizer, param, nvme_path, 4, 1048576, "", 5,
                   100000000);
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// DeepSpeed's rules for a step of ZeRO stage `stage`.
    ::llvm::LogicalResult
    verifyStage(::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
                int64_t stage) const;
    bool offloadsOptimizer() const {
      return getOptimizer() != ::mlir::zero::OffloadDevice::none;
    }
    bool offloadsParams() const {
      return getParam() != ::mlir::zero::OffloadDevice::none;
    }
  }];
}

// A train step's offload; without one, getOffload() is #zero.offload<>
// (nothing offloaded).
def Zero_StepOffloadAttr : DefaultValuedOptionalAttr<Zero_OffloadAttr,
    "::mlir::zero::OffloadAttr::get($_builder.getContext())"> {
  let constBuilderCall = "$0";
}

def Zero_MeshAxis : I32EnumAttr<"MeshAxis", "a named axis of a #zero.mesh", [
    I32EnumAttrCase<"data", 0>, I32EnumAttrCase<"hpz", 1>,
    I32EnumAttrCase<"mics", 2>, I32EnumAttrCase<"sequence", 3>,
    I32EnumAttrCase<"expert", 4>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
  let description = [{
    `zero_rt/topology.h`'s ZRT_AXIS_*, in its order. A new parallelism
    (tensor, pipeline) is a new case here and there
    (docs/AddingAParallelismAxis.md).
  }];
}

def Zero_MeshAttr : Zero_Attr<"Mesh", "mesh"> {
  let summary = "The ranks of a step as a grid of named axes";
  let description = [{
    The world's ranks as upstream `shard.grid` lays out a grid: rank r's
    index on each axis is its digit in the mixed radix of the sizes, the
    last axis varying fastest. Unlike `shard.grid`'s positional axes, each
    axis is named (as Shardy's `sdy.mesh` names them) by the parallelism it
    is, and appears at most once: `data` (always), `hpz`, `mics`,
    `sequence` and `expert`. A collective's rank set (`RankSetKind`) is a
    subset of the axes, the ranks that differ from it on those axes only:

    - `hpz`, `mics` and `sequence` nest inside `data`, each group holding
      its axis and every axis inside it, so that groups of different sizes
      nest: MiCS shard groups of 4 with sequence-parallel groups of 2 are
      `[data = 2, mics = 2, sequence = 2]`, the shard group {mics,
      sequence}, its replicas {data};
    - `expert` lies inside `data` when the expert sets are consecutive
      ranks (`contiguous`, DeepSpeed's "E + D") and outside it when they
      stride (`strided`, "D + E"); the expert replicas are every other axis.

    `zrt_mesh_axes_of` (`zero_rt/topology.h`) is that rule, shared with the
    runtime, and `zrt_rank_set_of` turns the axes into the ranks
    {first + i * stride}: a subset must be one run of axes (size-1 axes
    aside), or it would be no arithmetic progression, which the verifier
    refuses.

    ```mlir
    #zero.mesh<[data = 8, hpz = 2]>
    #zero.mesh<[data = 2, mics = 2, sequence = 2]>
    #zero.mesh<[expert = 2, data = 4]>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::zero::MeshAxis">:$axes,
                        ArrayRefParameter<"int64_t">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The runtime's form, which zrt_rank_set_of reads.
    zrt_mesh toRuntime() const;
    /// The mesh of `mesh`, one of a verified ScheduleAttr's.
    static MeshAttr get(::mlir::MLIRContext *context, const zrt_mesh &mesh);
  }];
}

// Printed whole (`#zero.mesh<...>`, not the stripped `<...>`), as the
// schedule's readers write it; both parse.
def Zero_OptionalMeshParameter : OptionalParameter<"::mlir::zero::MeshAttr"> {
  let printer = "$_printer << $_self";
}

def Zero_ScheduleAttr : Zero_Attr<"Schedule", "schedule"> {
  let summary = "The step-wide facts of a ZeRO schedule";
  let description = [{
    What `zero-partition` and `zero-grad-sync` decided for a train step, the
    one place every later pass, analysis and the lowering read it from:
    the ZeRO `stage` (0-3), the data-parallel `world_size`, the
    `global_batch` (samples per optimizer step over all ranks) and the
    `accumulation_steps` K (micro steps per optimizer step; each rank's
    inputs hold one micro batch of global_batch / (world_size * K) samples).

    The topology: `ranks_per_node` ranks share a node, rank r on node
    r / ranks_per_node (0, the default: every rank on one node). Collectives
    whose ranks span several nodes run in two levels, within each node and
    across nodes among the ranks of the same local index
    (`zero_rt/topology.h` counts the bytes each level moves).

    The `mesh` (#zero.mesh, of world_size ranks; absent: one `data` axis)
    says how the world splits, and every collective's rank set is a subset
    of its axes. At stage 3, an `hpz` group of h ranks (ZeRO++ hpZ) keeps a
    secondary shard of each gathered group partitioned over h consecutive
    ranks for the backward gathers, and a `mics` group of m ranks (MiCS)
    partitions every group over m consecutive ranks, replicated
    world_size / m times. A `sequence` group of P ranks (Ulysses) reads the
    same samples, each holding 1/P of every sequence: the data-parallel
    ranks are world_size / P, while the partitions span the whole world.
    An `expert` axis of P splits each MoE layer's experts over the P ranks
    of an `expert` set (`zero-expert-parallel`): the ranks read different
    samples (P does not change the data-parallel ranks), tokens travel to
    their experts' rank by `zero.moe_exchange`, and expert parameters are
    partitioned over the world_size / P ranks holding the same experts
    (`expert_replicas`). Inside `data` the expert sets are consecutive, so
    the all-to-alls stay within a node when P divides ranks_per_node;
    outside it they stride world_size / P and the replicas are consecutive,
    so the expert parameters' ZeRO collectives stay within a node and the
    all-to-alls cross nodes.

    The sizes of a ds_config and a command line (hpz_partition_size h,
    mics_shard_size m, sequence_parallel P, expert_parallel and
    expert_placement) build the mesh (the sizes form of `getChecked`,
    `zrt_mesh_from_sizes`), checked with DeepSpeed's rules in its words
    first, and the accessors of those names read them back: the schedule
    keeps no integer per axis, so a new axis adds no parameter here and no
    argument at the callers. The mesh is the one those sizes build (the
    verifier says which when it is not), so that every schedule has one
    spelling, and none when it is one data axis. `world_size` stays a
    parameter: most schedules have no other axis.

    ```mlir
    #zero.schedule<stage = 3, world_size = 8, global_batch = 512, accumulation_steps = 2>
    #zero.schedule<stage = 3, world_size = 16, global_batch = 64, ranks_per_node = 8, mesh = #zero.mesh<[data = 2, hpz = 8]>>
    ```
  }];
  let parameters = (ins
    "int64_t":$stage,
    "int64_t":$world_size,
    "int64_t":$global_batch,
    DefaultValuedParameter<"int64_t", "1">:$accumulation_steps,
    DefaultValuedParameter<"int64_t", "0">:$ranks_per_node,
    Zero_OptionalMeshParameter:$mesh);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The schedule of the per-axis sizes a ds_config or command line gives
    /// (zrt_mesh_from_sizes); null after an error naming the sizes.
    static ScheduleAttr
    getChecked(::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
               ::mlir::MLIRContext *context, int64_t stage, int64_t worldSize,
               int64_t globalBatch, int64_t accumulationSteps,
               int64_t ranksPerNode, int64_t hpzPartitionSize,
               int64_t micsShardSize, int64_t sequenceParallel,
               int64_t expertParallel, ExpertPlacement expertPlacement);
    /// The mesh's axes for zrt_rank_set_of: one data axis without a mesh.
    zrt_mesh getRuntimeMesh() const;
    /// The sizes of the mesh, as DeepSpeed names them: the hpZ group (1:
    /// none), the MiCS shard group (0: none), the sequence-parallel group
    /// and the expert set (1: none), and where the expert sets lie.
    int64_t getHpzPartitionSize() const;
    int64_t getMicsShardSize() const;
    int64_t getSequenceParallel() const;
    int64_t getExpertParallel() const;
    ExpertPlacement getExpertPlacement() const;
    /// Data-parallel ranks: the world over the sequence-parallel groups.
    int64_t getDataParallelSize() const {
      return getWorldSize() / getSequenceParallel();
    }
    /// Samples of one micro step on one rank (the ranks of a
    /// sequence-parallel group hold the same samples).
    int64_t getMicroBatch() const {
      return getGlobalBatch() /
             (getDataParallelSize() * getAccumulationSteps());
    }
    /// Ranks per node, the whole world when the topology is one node.
    int64_t getNodeSize() const {
      return getRanksPerNode() == 0 ? getWorldSize() : getRanksPerNode();
    }
    /// Ranks a stage-3 group is partitioned over: the MiCS shard group, or
    /// the world.
    int64_t getShardGroupSize() const {
      return getMicsShardSize() > 0 ? getMicsShardSize() : getWorldSize();
    }
  }];
}

def Zero_HfModelAttr : Zero_Attr<"HfModel", "hf_model"> {
  let summary = "What exporting a model to Hugging Face writes";
  let description = [{
    Recorded as `zero.hf_model` on the module by `zero-import --hf`, and
    carried into the program's manifest, from which the training driver's
    `--export-hf` and `zero-ckpt consolidate --hf` write a directory that
    `AutoModelForCausalLM.from_pretrained` loads. `config` is the text of the
    model's `config.json` as `save_pretrained` writes it for the exported
    weights (a JSON object with a `model_type`). `tied` maps each name under
    which a parameter is tied to another (Hugging Face's
    `_tied_weights_keys`, such as `lm_head.weight`) to the `zero.param` it
    shares: exports write the parameter once, as `save_pretrained` does, and
    `--init-from` also finds it under that name.

    The checkpoint's other tensors are no `zero.param`. `buffers` maps each
    persistent buffer (Gemma 4's `layer_scalar`) to the f32 values the step
    was traced with, which it holds as constants: `--init-from` accepts the
    tensor only with exactly these values and exports write them. `unused`
    names the parameters the loss never reaches (BigBird's pooler): whatever
    `--init-from` reads for them, the Hugging Face exports write unchanged.

    ```mlir
    module attributes {zero.hf_model = #zero.hf_model<config = "{\0A  \22model_type\22: \22llama\22\0A}\0A", tied = {"lm_head.weight" = "model.embed_tokens.weight"}, buffers = {"model.layers.0.layer_scalar" = dense<5.000000e-01> : tensor<1xf32>}, unused = ["model.pooler.weight"]>} {
    ```
  }];
  let parameters = (ins StringRefParameter<"config.json's text">:$config,
                        OptionalParameter<"::mlir::DictionaryAttr">:$tied,
                        OptionalParameter<"::mlir::DictionaryAttr">:$buffers,
                        OptionalParameter<"::mlir::ArrayAttr">:$unused);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_LoraAttr : Zero_Attr<"Lora", "lora"> {
  let summary = "One LoRA-adapted weight of a PEFT model";
  let description = [{
    A weight `base` [out, in] that PEFT's LoRA adapts with `a` (lora_A,
    [r, in]) and `b` (lora_B, [out, r]), each a `zero.param` of the module
    under PEFT's name: the layer computes base(x) + scaling * b(a(x)), with
    `scaling` lora_alpha / r as PEFT computes it. The base is frozen and
    the adapters train. `merged_key` is the weight's name in the merged
    model (W + scaling * B @ A, as `merge_and_unload` writes it), `a_key`
    and `b_key` the adapters' names in `adapter_model.safetensors` (PEFT's
    `get_peft_model_state_dict`, without the adapter's name).

    ```mlir
    #zero.lora<base = "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight", a = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", b = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight", scaling = 2.000000e+00, merged_key = "model.layers.0.self_attn.q_proj.weight", a_key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", b_key = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight">
    ```
  }];
  let parameters = (ins StringRefParameter<"the base weight's zero.param">:$base,
                        StringRefParameter<"lora_A's zero.param">:$a,
                        StringRefParameter<"lora_B's zero.param">:$b,
                        Zero_DoubleParam:$scaling,
                        StringRefParameter<"the merged weight's name">:$merged_key,
                        StringRefParameter<"lora_A's name in the adapter file">:$a_key,
                        StringRefParameter<"lora_B's name in the adapter file">:$b_key);
  let assemblyFormat = "`<` struct(params) `>`";
  // #zero.peft verifies its layers, naming them.
}

def Zero_PeftAttr : Zero_Attr<"Peft", "peft"> {
  let summary = "What exporting a PEFT LoRA model writes";
  let description = [{
    Recorded as `zero.peft` on the module of a PEFT model (`zero-import` of
    `peft.get_peft_model(...)`, or `--hf DIR --lora ...`), carried into the
    program's manifest and its checkpoints. `config` is the text of
    `adapter_config.json`; `prefix` starts every parameter name that is
    not an adapter (PEFT's `base_model.model.`), which the merged model
    drops; `layers` lists each adapted weight (`#zero.lora`).
    `./train --export-adapters DIR` and `zero-ckpt consolidate --adapters
    DIR` write the adapter directory that `PeftModel.from_pretrained`
    loads; `--export-hf DIR` and `zero-ckpt consolidate --hf DIR` write the
    merged model, whose config is `zero.hf_model`'s (the base model's; its
    `tied` names are the module's prefixed ones).

    ```mlir
    module attributes {zero.peft = #zero.peft<config = "{\22peft_type\22: \22LORA\22}", prefix = "base_model.model.", layers = [#zero.lora<...>]>} {
    ```
  }];
  let parameters = (ins StringRefParameter<"adapter_config.json's text">:$config,
                        StringRefParameter<"the non-adapter names' prefix">:$prefix,
                        "::mlir::ArrayAttr":$layers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Each #zero.lora of `layers` (the verifier checks they all are).
    auto getLoras() const {
      return getLayers().getAsRange<::mlir::zero::LoraAttr>();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Zero_TokenType : TypeDef<Zero_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "Completion token of an asynchronous collective";
  let description = [{
    Returned by an asynchronous collective and consumed by exactly one
    `zero.wait`; the collective's result may only be used after that wait.
  }];
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

class Zero_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zero_Dialect, mnemonic, traits>;

def Zero_FloatTensor : Zero_AnyRankFloatTensor;
def Zero_FlatTensor : Zero_1DFloatTensor;
def Zero_ScalarF32 : Type<
    CPred<"::llvm::isa<::mlir::RankedTensorType>($_self) && "
          "::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0 && "
          "::llvm::cast<::mlir::RankedTensorType>($_self).getElementType().isF32()">,
    "0-d f32 tensor", "::mlir::RankedTensorType">,
  BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def Zero_Phase : I32EnumAttr<"Phase",
    "when a schedule op runs within an optimizer step", [
    I32EnumAttrCase<"micro_step", 0>, I32EnumAttrCase<"step_end", 1>,
    I32EnumAttrCase<"boundary", 2>, I32EnumAttrCase<"post_step", 3>,
    I32EnumAttrCase<"last_micro_step", 4>,
    I32EnumAttrCase<"first_micro_step", 5>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}
def Zero_PhaseAttr : EnumAttr<Zero_Dialect, Zero_Phase, "phase">;

def Zero_StepPhaseOpInterface : OpInterface<"StepPhaseOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    When a schedule op runs within an optimizer step of K micro steps
    (gradient accumulation), an inherent `phase` of the op:

    * `micro_step` (the default, not printed): in every micro step, before
      the optimizer;
    * `step_end`: in every micro step, after the optimizer's place (the
      stage-3 free of a persistent gathered buffer);
    * `boundary`: in the last micro step only (stage 0-1 gradient
      reductions and their waits, the optimizer);
    * `post_step`: in the last micro step only, after the optimizer (stage
      1-2 parameter all-gathers);
    * `last_micro_step`: in the last micro step only, at its place among the
      micro step's ops, so that it overlaps the rest of the backward (the
      streamed gradient copies of an offloaded optimizer at stages 2-3).
    * `first_micro_step`: in the first micro step only, at its place among
      the micro step's ops, before the backward (the all-reduce of the
      step's label count, `zero.count_labels`); its results are read in
      that phase only, except the buffer of a `persistent` gather kept for
      the whole optimizer step (a frozen partition under
      `frozen-gather=once`): first in the step and freed in phase
      `post_step`, its step-arena place holds it for every micro step.

    The lowering emits `micro_step`/`step_end` ops into the program's micro
    step, `last_micro_step` and `first_micro_step` ops there too, each
    guarded by the runtime's flag of the last or first micro step
    (`zrt_ctx_last_micro_step`, `zrt_ctx_first_micro_step`), and
    `boundary`/`post_step` ops into its boundary function, which runs after
    the last micro step; the optimizer is inserted before the first
    `step_end`/`post_step` op. `zero-verify-schedule` checks that the phases
    are consistent: an op uses no value of a phase that runs after it or less
    often, and a token is waited in a phase that runs exactly when its
    issue ran (every micro step, or once per step), so a `last_micro_step`
    token is waited in `last_micro_step`, `boundary` or `post_step`.
  }];
  let methods = [
    InterfaceMethod<"The op's phase.", "::mlir::zero::Phase", "getPhase">,
    InterfaceMethod<"Sets the op's phase.", "void", "setPhase",
      (ins "::mlir::zero::Phase":$phase)>,
  ];
}

def Zero_ParamOp : Zero_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A parameter of the model, trainable or frozen";
  let description = [{
    Declares a parameter by name with its shape, master element type and
    initializer (`normal` with `std`, `zeros` or `ones`). Parameters are
    flattened in declaration order by `zero-partition`. `compute` is the
    element type of the copy used by forward and backward (set by
    `zero-mixed-precision`; absent means the master type). `weight_decay`
    is the parameter's own weight decay, which the fused Adam applies to
    its elements instead of the optimizer's (a weight-decay group: `0.0`
    for biases and norm weights, as most training scripts do).

    `frozen` marks a parameter that does not train (PyTorch's
    `requires_grad=False`): it has no gradient, no reduction, no optimizer
    state and no master copy, and no step changes it. Under 16-bit compute
    it is held in its compute type only, rounded once when it is
    initialized, as DeepSpeed holds frozen weights in the 16-bit model.
    `zero-autodiff` differentiates nothing that only frozen parameters
    need; at stage 3 its shard is still gathered where it is used.

    `rows` (set by `zero-pad-vocab`) is the number of rows of the parameter
    the user sees: the rows from `rows` on are padding, zero at the start
    and never updated (their gradient is exactly zero). Checkpoints keep the
    padded shape; exported and imported weights (`--export`, `--init-from`,
    `zero-ckpt consolidate`) have `rows` rows.

    `expert_parallel` P (set by `zero-expert-parallel`) marks a MoE layer's
    expert tensor of which each rank holds E / P of the E experts (dimension
    0): member q of the rank's `expert` set (its q-th rank in rank order,
    whatever the mesh's placement of the `expert` axis) holds experts `[q * E / P,
    (q + 1) * E / P)` of the whole tensor, whose dimension 0 is P times the
    type's. Its gradient is reduced, and its ZeRO partition sharded, over
    the `expert_replicas` ranks that hold the same experts.

    ```mlir
    zero.param @transformer.wte.weight : tensor<50257x768xf32> init normal std 2.000000e-02
    zero.param @transformer.ln_f.bias : tensor<768xf32> init zeros weight_decay 0.000000e+00 compute bf16
    zero.param @transformer.wte.weight : tensor<50304x768xf32> init normal std 2.000000e-02 rows 50257
    zero.param @model.norm.weight : tensor<64xf32> init ones weight_decay 0.000000e+00 frozen
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Zero_FloatTensor>:$type,
                       Zero_InitKindAttr:$init,
                       OptionalAttr<F64Attr>:$std,
                       OptionalAttr<I64Attr>:$rows,
                       OptionalAttr<F64Attr>:$weight_decay,
                       OptionalAttr<TypeAttr>:$compute,
                       UnitAttr:$frozen,
                       OptionalAttr<I64Attr>:$expert_parallel);
  let assemblyFormat = [{
    $sym_name `:` $type `init` `` $init (`std` $std^)? (`rows` $rows^)?
    (`weight_decay` $weight_decay^)? (`compute` $compute^)? (`frozen` $frozen^)?
    (`expert_parallel` $expert_parallel^)?
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The type forward and backward see: the shape with the compute element type.
    ::mlir::RankedTensorType getComputeTensorType();
    /// Number of elements.
    int64_t getNumElements() { return getTensorType().getNumElements(); }
    /// The shape without the padding rows (`rows`), as the user sees it.
    ::llvm::SmallVector<int64_t> getUnpaddedShape();
  }];
}

def Zero_TrainStepOp : Zero_Op<"train_step", [
    Symbol, IsolatedFromAbove, SingleBlockImplicitTerminator<"ReturnOp">,
    HasParent<"::mlir::ModuleOp">]> {
  let summary = "One training step of the model";
  let description = [{
    The body is one step as seen by one rank: its block arguments are the
    step's inputs (the GLOBAL batch; `zero-partition` divides the batch
    dimension by the world size), the forward computation uses parameters
    through `zero.get_param`, and `zero.return` yields the scalar fp32 loss.
    Later passes add the backward, the collectives and the optimizer step to
    the same body; `zero-partition` records the step-wide facts of the
    schedule (`#zero.schedule`), which must agree with the module's
    `zero.partition`s and the inputs' batch. Its `offload`
    (`#zero.offload`, absent when nothing is offloaded) says where the
    optimizer states and the stage-3 parameter shards live, under
    DeepSpeed's rules for the schedule's stage.

    `labels` says which tokens of a token stream are the step's labels when
    the training driver feeds it from a token file (`--data`,
    `--eval-data`): `next_token` (the default, not printed) feeds each
    window of T + 1 tokens as the inputs `x[k, k + T)` and the labels
    `x[k + 1, k + T + 1)`; `same_tokens` feeds each window of T tokens as
    both, for a step whose loss shifts them itself (Hugging Face's causal
    language models drop the last logit and the first label). A step with
    `same_tokens` has two inputs, token ids and labels of one shape
    `[B, T]` with integer elements. `shifted` (written by
    `zero-sequence-parallel`, whose shards cannot shift inside) feeds the
    same two inputs with the labels already shifted over the whole row, as
    Hugging Face's loss shifts them (`labels[t + 1]`, the last position the
    loss's ignored index), before a rank takes its shard of the row.

    `input_names` (optional) names the inputs, one per block argument in
    order: the traced forward's argument names (`input_ids`, `labels`,
    `advantages`), by which the runtime library's step takes them; the
    manifest records each as its input's `name`. Each name is an identifier
    (`[A-Za-z_][A-Za-z0-9_]*`) and no two are the same. Without it the
    runtime names the inputs by their role (`input_ids`, `labels`,
    `position_ids`), else `input<k>`.

    Every tensor of the step (inputs, results of the ops in the body, block
    arguments of nested regions) has a static shape with positive dimensions
    and at most 2^48 elements, so that sizes in bytes and their sums cannot
    overflow int64.

    ```mlir
    zero.train_step @train(%x: tensor<64x784xf32>, %y: tensor<64xi64>)
        optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
        precision #zero.precision<kind = fp32>
        gradient_clipping 1.000000e+00 {
      ...
      zero.return %loss : tensor<f32>
    }
    zero.train_step @train(%x: tensor<4x784xf32>, %y: tensor<4xi64>)
        optimizer #zero.optimizer<kind = adam, lr = 1.000000e-03>
        precision #zero.precision<kind = fp32>
        schedule #zero.schedule<stage = 2, world_size = 8, global_batch = 64, accumulation_steps = 2>
        offload #zero.offload<optimizer = cpu> {
      ...
    }
    zero.train_step @train(%ids: tensor<8x128xi64>, %labels: tensor<8x128xi64>)
        optimizer #zero.optimizer<kind = adamw, lr = 1.000000e-04>
        precision #zero.precision<kind = bf16>
        labels same_tokens attributes {input_names = ["input_ids", "labels"]} {
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       Zero_OptimizerAttr:$optimizer,
                       Zero_PrecisionAttr:$precision,
                       DefaultValuedAttr<F64Attr, "0.0">:$gradient_clipping,
                       OptionalAttr<Zero_ScheduleAttr>:$schedule,
                       Zero_StepOffloadAttr:$offload,
                       DefaultValuedAttr<Zero_LabelConventionAttr,
                           "::mlir::zero::LabelConvention::next_token">:$labels,
                       OptionalAttr<StrArrayAttr>:$input_names);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::zero::ReturnOp getReturnOp();
    /// The scalar loss returned by the step.
    ::mlir::Value getLoss();
    /// The schedule agrees with every zero.partition of the module.
    ::llvm::LogicalResult verifySchedulePartitions();
    /// DeepSpeed's offload rules hold at the schedule's stage.
    ::llvm::LogicalResult verifyOffload();
    /// A step with `labels same_tokens` takes token ids and labels [B, T].
    ::llvm::LogicalResult verifyLabels();
    /// `input_names`, where present, names each input once, by an
    /// identifier.
    ::llvm::LogicalResult verifyInputNames();
  }];
}

def Zero_ReturnOp : Zero_Op<"return", [Pure, Terminator, HasParent<"TrainStepOp">]> {
  let summary = "Ends a train step, yielding its scalar loss";
  let description = [{
    ```mlir
    zero.return %loss : tensor<f32>
    ```
  }];
  let arguments = (ins Zero_ScalarF32:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
  let builders = [OpBuilder<(ins), [{ /* filled by the train step's builder */ }]>];
}

def Zero_GetParamOp : Zero_Op<"get_param", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "The value of a parameter inside a train step";
  let description = [{
    Yields the full parameter in its compute type: at stages 0-2 a view of
    the persistent `params` buffer of its partition; at stage 3 a view of the
    buffer gathered by `zero.all_gather`/`zero.prefetch` for its partition
    (`from`), which must be live.

    ```mlir
    %w = zero.get_param @fc1.weight : tensor<784x256xf32>
    %v = zero.get_param @fc1.weight from %full : tensor<200960xbf16> -> tensor<784x256xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param,
                       Optional<Zero_FlatTensor>:$source);
  let results = (outs Zero_FloatTensor:$result);
  let hasCustomAssemblyFormat = 1;
}

def Zero_GradOp : Zero_Op<"grad", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Binds the complete gradient of a parameter";
  let description = [{
    Emitted by `zero-autodiff` exactly once per trainable parameter (a
    frozen one has none), right where the gradient is complete (after every contribution of a parameter used several
    times has been summed). This is the point from which ZeRO may reduce it.

    ```mlir
    zero.grad @fc1.weight, %g : tensor<784x256xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, Zero_FloatTensor:$grad);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

def Zero_LossScaleOp : Zero_Op<"loss_scale", [Pure, Zero_StepPhaseOpInterface]> {
  let summary = "The current dynamic loss scale";
  let description = [{
    Reads the loss scaler's state (which lives across steps) as a scalar.
    `zero-mixed-precision` seeds the backward with it at fp16.

    ```mlir
    %s = zero.loss_scale : tensor<f32>
    ```
  }];
  let arguments = (ins
      DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs Zero_ScalarF32:$result);
  let assemblyFormat = "(`phase` $phase^)? attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

def Zero_PartitionOp : Zero_Op<"partition", [
    Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Flat layout of a parameter group and each rank's slice";
  let description = [{
    Parameters `params` are laid out contiguously (gaps only with `owners`,
    below), in this order, at element `offsets` of one flat buffer of
    `numel` elements (the end of the last parameter), padded to
    `padded_numel`, a multiple of `world_size * alignment` (`world_size` is
    at most 2^20). Rank `r` owns
    elements `[r * shard, (r + 1) * shard)` with
    `shard = padded_numel / world_size` (its Adam moments and, with 16-bit
    compute, its fp32 masters are that padded shard; elements past `numel`
    are padding). With fp32 compute the parameters are their own masters:
    Adam updates the owned part of the fp32 parameters in place. At stage 0
    nothing is sharded: `padded_numel == numel` and every rank owns
    everything. The layout is identical on every rank. Under MiCS
    (`#zero.schedule<..., mesh = #zero.mesh<[data = n / m, mics = m]>>`)
    `world_size` is m, the
    ranks of a shard group: rank `r` owns shard `r % m`, which the other
    shard groups replicate.

    An `expert` partition holds expert parameters (`expert_parallel` P on
    their `zero.param`s, an `expert` axis of P in the schedule's mesh): its
    `world_size` is the world / P ranks of this rank's `expert_replicas`
    set, which hold the same experts; its shards, reductions and gathers
    run over that set (member j of it owns shard j), while dense
    partitions span the world.

    A `frozen` partition holds frozen parameters only (a partition holds
    only trainable or only frozen ones): its one persistent buffer is
    `params` (full at stages 0-2, the owned shard at stage 3), with no
    gradients, optimizer states or master copy, and no collective or
    optimizer op touches it except the stage-3 gathers of its shards.

    Muon's owner-computes (`owners`, stages 1-3 on several ranks): per
    parameter, the rank whose shard holds it whole and runs its Muon step
    (Newton-Schulz needs the whole matrix), -1 for one AdamW updates, which
    may cross a shard boundary. The partitioner orders `params` so that
    every owned matrix lies whole in its owner's shard, with no gap and the
    same minimal padding as without owners when such an order exists (the
    reduce-scatter and the gathers move the same bytes as AdamW's layout).
    Otherwise the shards are enlarged to what the busiest owner's matrices
    need and the offsets leave gaps: increasing, not overlapping, elements
    of no parameter that stay zero in every buffer (parameters, gradients,
    masters and states), and `padded_numel` (still a multiple of
    `world_size * alignment`) may exceed `numel` by more than that unit;
    the collectives move the enlarged shards.

    ```mlir
    zero.partition @group0 stage 2 world_size 4 alignment 2 numel 1000 padded 1008
        params [@a, @b] offsets [0, 400]
    zero.partition @layer stage 3 world_size 2 alignment 1 numel 1056 padded 1056
        params [@q, @norm, @k] offsets [0, 512, 528] owners [0, -1, 1]
    zero.partition @gapped stage 3 world_size 2 alignment 1 numel 1552 padded 2048
        params [@up, @norm, @q] offsets [0, 1024, 1040] owners [0, -1, 1]
    zero.partition @frozen stage 2 world_size 4 alignment 2 numel 64 padded 64
        params [@emb] offsets [0] frozen
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$stage,
                       I64Attr:$world_size, I64Attr:$alignment, I64Attr:$numel,
                       I64Attr:$padded_numel, SymbolRefArrayAttr:$params,
                       DenseI64ArrayAttr:$offsets, UnitAttr:$frozen,
                       UnitAttr:$expert,
                       OptionalAttr<DenseI64ArrayAttr>:$owners);
  let assemblyFormat = [{
    $sym_name `stage` $stage `world_size` $world_size `alignment` $alignment
    `numel` $numel `padded` $padded_numel `params` $params `offsets` $offsets
    (`owners` $owners^)? (`frozen` $frozen^)? (`expert` $expert^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getStageValue() { return static_cast<int64_t>(getStage()); }
    int64_t getWorldSizeValue() { return static_cast<int64_t>(getWorldSize()); }
    int64_t getNumelValue() { return static_cast<int64_t>(getNumel()); }
    int64_t getPaddedNumelValue() { return static_cast<int64_t>(getPaddedNumel()); }
    /// Elements each rank owns (the whole group at stage 0).
    int64_t getShardNumel() {
      return getStageValue() == 0 ? getNumelValue()
                                  : getPaddedNumelValue() / getWorldSizeValue();
    }
    /// The unpadded part of the layout rank `rank` owns: [begin, end).
    std::pair<int64_t, int64_t> getOwnedRange(int64_t rank) {
      if (getStageValue() == 0)
        return {0, getNumelValue()};
      int64_t b = std::min(rank * getShardNumel(), getNumelValue());
      int64_t e = std::min((rank + 1) * getShardNumel(), getNumelValue());
      return {b, e};
    }
    /// Bytes of each member's slot when the shards travel block-quantized
    /// to `bits` bits (qwZ): each parameter's piece of a shard is quantized
    /// as a chunk of its own, so no block mixes parameters
    /// (zrt_quant_slot_bytes, zero_rt/quantize.h).
    int64_t getQuantizedSlotBytes(int32_t bits);
    /// Each owner's parameters whole in its shard (`owners`).
    ::mlir::LogicalResult verifyOwners(::mlir::SymbolTableCollection &tables);
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// The cases of runtime/include/zero_rt/manifest.def's buffers, the
// optimizers' states among them from optimizers.def (checked as
// OptimizerKind is).
def Zero_BufferKind : I32EnumAttr<"BufferKind", "persistent buffer of a partition", [
    I32EnumAttrCase<"params", 0>, I32EnumAttrCase<"grads", 1>,
    I32EnumAttrCase<"master", 2>, I32EnumAttrCase<"exp_avg", 3>,
    I32EnumAttrCase<"exp_avg_sq", 4>, I32EnumAttrCase<"momentum_buffer", 5>,
    I32EnumAttrCase<"host_grads", 6>, I32EnumAttrCase<"host_params", 7>,
    I32EnumAttrCase<"secondary", 8>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}
def Zero_BufferKindAttr : EnumAttr<Zero_Dialect, Zero_BufferKind, "buffer">;

def Zero_CollectiveKind : I32EnumAttr<"CollectiveKind", "collective pattern", [
    I32EnumAttrCase<"all_gather", 0>, I32EnumAttrCase<"reduce_scatter", 1>,
    I32EnumAttrCase<"reduce", 2>, I32EnumAttrCase<"all_reduce", 3>,
    I32EnumAttrCase<"all_to_all", 4>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}

def Zero_RankSetKind : I32EnumAttr<"RankSetKind",
    "the ranks a collective runs over", [
    I32EnumAttrCase<"group", 0>, I32EnumAttrCase<"hpz", 1>,
    I32EnumAttrCase<"replicas", 2>, I32EnumAttrCase<"world", 3>,
    I32EnumAttrCase<"sequence", 4>, I32EnumAttrCase<"expert", 5>,
    I32EnumAttrCase<"expert_replicas", 6>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
  let description = [{
    `group`: the ranks the partition is sharded over (the world, or this
    rank's MiCS shard group); `hpz`: this rank's hpZ group (ZeRO++'s
    secondary partition); `replicas`: the ranks holding this rank's MiCS
    shard, one per shard group; `world`: every rank of the data-parallel
    world, whatever the groups (the step's label count, which MiCS's shard
    groups do not split); `sequence`: this rank's sequence-parallel group,
    the P consecutive ranks that read the same rows (the mesh's `sequence`
    axis; the world when P is the world size); `expert`: this rank's
    expert-parallel set, the P ranks that split each MoE layer's experts
    (the `expert` axis; the rank alone without it); `expert_replicas`: the
    world / P ranks holding this rank's experts (the world without expert
    parallelism). With the `expert` axis inside `data` (contiguous) an
    expert set is P consecutive ranks and the replicas stride P (first
    r % P); outside it (strided) an expert set strides world / P (first r %
    (world / P)) and the replicas are world / P consecutive ranks. Each kind
    is a subset of the #zero.mesh's axes (`zrt_mesh_axes_of`), and
    `zrt_rank_set_of` (zero_rt/topology.h) gives its members.
  }];
}
def Zero_RankSetKindAttr : EnumAttr<Zero_Dialect, Zero_RankSetKind, "rank_set">;

def Zero_CoverageRole : I32EnumAttr<"CoverageRole",
    "what a collective counts for in the step's coverage check", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"grad_reduction", 1>,
    I32EnumAttrCase<"replica_sum", 2>, I32EnumAttrCase<"param_gather", 3>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
  let description = [{
    `grad_reduction`: it reduces the gradients of an element range of the
    layout (each element once per step, after its zero.grad);
    `replica_sum`: it sums the owned gradients of a range over the MiCS
    replicas (each element once, after the shard group's reductions);
    `param_gather`: it gathers the updated parameters of a range in place
    (stages 1-2, each element once, after the update); `none`: it covers
    nothing the step must cover (a value gather, a statistics all-reduce).
  }];
}

def Zero_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    What every consumer needs to know about a collective, whatever op
    carries it: the partition whose data-parallel world runs it, its
    pattern, what it moves (an element range of the group's flat layout, in
    place in a persistent buffer or from sources, or a tensor value), and
    its completion token. The memory planner, the verifier, the report and
    the cost model read collectives through it.
  }];
  let methods = [
    InterfaceMethod<[{
        The partition (group) the collective runs over; null for one that
        moves a tensor over a rank set of the step alone (zero.all_to_all).
      }],
      "::mlir::FlatSymbolRefAttr", "getGroupAttr">,
    InterfaceMethod<"Its communication pattern.",
      "::mlir::zero::CollectiveKind", "getCollectiveKind">,
    InterfaceMethod<[{
        The element range [begin, end) of the group's flat layout it moves,
        or none when it moves a whole tensor value (see getMovedValue).
      }],
      "std::optional<std::pair<int64_t, int64_t>>", "getElementRange">,
    InterfaceMethod<"The persistent buffer it works in place on, if any.",
      "std::optional<::mlir::zero::BufferKind>", "getInPlaceBuffer">,
    InterfaceMethod<[{
        The tensor it moves when it has no element range (a gathered group,
        the optimizer's statistics); null otherwise.
      }],
      "::mlir::Value", "getMovedValue">,
    InterfaceMethod<"Its completion token, or null when it is synchronous.",
      "::mlir::Value", "getToken">,
    InterfaceMethod<[{
        The ranks it runs over; the partition's group (`expert_replicas`
        for an `expert` partition) unless the op says otherwise.
      }],
      "::mlir::zero::RankSetKind", "getRankSetKind", (ins), [{}], [{
        return ::mlir::zero::getPartitionRankSet($_op.getOperation(),
                                                 $_op.getGroupAttr());
      }]>,
    InterfaceMethod<[{
        The width of the block-quantized values it moves instead of the
        compute type's (ZeRO++ qwZ: 8, qgZ: 4), or 0 when it moves the values
        themselves. A quantized gather's member part then travels as one
        slot of PartitionOp::getQuantizedSlotBytes(bits) bytes
        (zero_rt/quantize.h); a quantized reduce-scatter's parts as
        zrt_quantized_reduce_scatter_link_bytes counts them
        (zero_rt/topology.h).
      }],
      "int32_t", "getQuantizationBits", (ins), [{}], [{
        return 0;
      }]>,
    InterfaceMethod<[{
        What it counts for in the step's coverage (zero-verify-schedule).
      }],
      "::mlir::zero::CoverageRole", "getCoverageRole", (ins), [{}], [{
        return ::mlir::zero::CoverageRole::none;
      }]>,
    InterfaceMethod<[{
        The persistent buffer it writes (its element range of) until it
        completes: the one it works in place on, or the shard accumulator a
        reduction from sources adds into.
      }],
      "std::optional<::mlir::zero::BufferKind>", "getWrittenBuffer", (ins),
      [{}], [{
        return $_op.getInPlaceBuffer();
      }]>,
    InterfaceMethod<[{
        The step-arena value a gather reads instead of the persistent
        `params` shard (parameter offload's staged shard), or null.
      }],
      "::mlir::Value", "getStagedShard", (ins), [{}], [{
        return ::mlir::Value();
      }]>,
    InterfaceMethod<[{
        The values it reads until it completes, each with the element range
        of it read: a reduction's sources, a gather's staged shard (whole).
        They live (and may not be freed) until its completion.
      }],
      "::llvm::SmallVector<std::pair<::mlir::Value, std::pair<int64_t, int64_t>>>",
      "getInFlightReads", (ins), [{}], [{
        ::llvm::SmallVector<std::pair<::mlir::Value,
                                      std::pair<int64_t, int64_t>>> reads;
        if (::mlir::Value shard = $_op.getStagedShard())
          reads.push_back({shard, {0, ::llvm::cast<::mlir::RankedTensorType>(
                                          shard.getType()).getNumElements()}});
        return reads;
      }]>,
    InterfaceMethod<[{
        Bytes of step-arena staging it uses from its start to its
        completion that no other rule plans (a bucket, a quantized
        gather's slots): an all-to-all's packed chunks.
      }],
      "int64_t", "getStagingBytes", (ins), [{}], [{
        return 0;
      }]>,
    InterfaceMethod<[{
        The bytes each element of its moved value takes on the wire where
        that is not the value's element type (zero.count_sum all-reduces
        the ranks' sums as doubles and yields an fp32), else 0.
      }],
      "int64_t", "getWireElementBytes", (ins), [{}], [{
        return 0;
      }]>,
  ];
  let extraClassDeclaration = [{
    /// A gradient reduction that packs values into a bucket of the step
    /// arena (the source form), rather than one in place.
    bool reducesBucket() {
      return getCoverageRole() == ::mlir::zero::CoverageRole::grad_reduction &&
             !getInFlightReads().empty();
    }
  }];
}

class Zero_CollectiveOp<string mnemonic, list<Trait> traits = [],
                        list<string> moreMethods = []>
    : Zero_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
            !listconcat(["getCollectiveKind", "getElementRange",
                         "getInPlaceBuffer", "getMovedValue"], moreMethods)>,
        Zero_StepPhaseOpInterface])> {
  let hasVerifier = 1;
  code commonDescription = [{
    Collectives run over all ranks of the data-parallel world of partition
    `group`. Ranges `[begin, end)` are element ranges of the group's flat
    layout, identical on every rank; the runtime derives each rank's part from
    the layout (rank `r` owns `[r * shard, (r + 1) * shard)`), so no attribute
    depends on the rank. Each partition has persistent per-rank buffers in
    the compute type, `params` (full at stages 0-2, this rank's shard at
    stage 3) and `grads` (full at stages 0-1, this rank's shard accumulator
    at stages 2-3), and in fp32 `exp_avg`, `exp_avg_sq` and, when the compute
    type is 16-bit, the `master` parameters (this rank's shard; full at stage
    0). With fp32 compute there is no `master` buffer: the owned part of
    `params` is the master. With a `!zero.token` result the collective is
    asynchronous and completes at the `zero.wait` of its token.
  }];
}

def Zero_AllGatherOp : Zero_CollectiveOp<"all_gather", [AttrSizedResultSegments],
    ["getRankSetKind", "getCoverageRole", "getStagedShard"]> {
  let summary = "Gather every rank's part of a range (or of the whole shard)";
  let description = commonDescription # [{

    In-place form (stages 1-2, after the optimizer step): every rank
    contributes its owned part of `[begin, end)` of the persistent `params`
    buffer and receives the other ranks' parts.

    Value form (stage 3): gathers the persistent `params` shards of the group
    into a new full buffer of `padded_numel` elements, released by
    `zero.free`; with parameter offload each rank's shard is read `from` the
    device buffer its `zero.transfer ... params to staging` filled. A `persistent` gather (a group below the persistence
    threshold) is issued once at the top of the step and kept to its end;
    in phase `first_micro_step` (a frozen partition, `frozen-gather=once`)
    it is issued in the first micro step only and kept to the end of the
    optimizer step.

    A `secondary` gather (ZeRO++ hpZ, `hpz_partition_size` h > 1) gathers
    the group's `secondary` shards, which `zero.store_secondary` filled
    earlier in the optimizer step, over this rank's hpZ group of h
    consecutive ranks instead of the `params` shards over the world: member
    j of the hpZ group holds elements `[j * padded / h, (j + 1) * padded /
    h)`. Its rank set is `hpz` (CollectiveOpInterface::getRankSetKind).

    A `quantized` gather (ZeRO++ qwZ, `zero-param-gather
    quantized-weights`) moves the shards as block-quantized INT8
    (`zero_rt/quantize.h`): each rank quantizes its 16-bit `params` shard
    into its slot of a staging buffer of the step arena (its rank set's
    size, the world or the MiCS shard group, times the partition's
    `getQuantizedSlotBytes(8)`, planned from the op to its completion):
    each parameter's piece of the shard is quantized on its own, so a block
    never mixes a layer norm's gains with its bias. The slots are
    all-gathered over that set, and the result is their
    dequantization. The shards stay exact; the gathered weights carry the
    quantization error.

    ```mlir
    zero.all_gather group @flat in params [0, 4096)
    %full = zero.all_gather group @transformer.h.0 : tensor<7087872xbf16>
    %again = zero.all_gather group @transformer.h.0 secondary : tensor<7087872xbf16>
    %q = zero.all_gather group @transformer.h.1 quantized : tensor<7087872xbf16>
    ```
  }];
  let extraClassDeclaration = [{
    int32_t getQuantizationBits() { return getQuantized() ? 8 : 0; }
  }];
  let arguments = (ins FlatSymbolRefAttr:$group,
                       OptionalAttr<Zero_BufferKindAttr>:$buffer,
                       OptionalAttr<I64Attr>:$begin, OptionalAttr<I64Attr>:$end,
                       UnitAttr:$persistent,
                       Optional<Zero_FlatTensor>:$shard,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase,
                       UnitAttr:$secondary,
                       UnitAttr:$quantized);
  let results = (outs Optional<Zero_FlatTensor>:$result,
                      Optional<Zero_TokenType>:$token);
  let assemblyFormat = [{
    `group` $group (`from` $shard^ `:` type($shard))?
    (`in` `` $buffer^ ` ` `[` $begin `,` $end `)`)?
    (`secondary` $secondary^)?
    (`persistent` $persistent^)? (`quantized` $quantized^)?
    (`phase` $phase^)? attr-dict
    (`:` type($result)^)? (`->` type($token)^)?
  }];
}

def Zero_PrefetchOp : Zero_Op<"prefetch", [
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getRankSetKind", "getStagedShard"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Asynchronous stage-3 gather of a group ahead of its use";
  let description = [{
    Issued by `zero-prefetch` as early as the memory budget allows; the
    gathered buffer may be used only after the `zero.wait` of the token.
    With parameter offload it reads the staged shard `from` (see
    `zero.transfer`), which must be freed after that wait. A `secondary`
    prefetch gathers the hpZ secondary shards over the hpZ group, as
    `zero.all_gather ... secondary` does.

    A `quantized` prefetch moves block-quantized INT8 shards as a
    `quantized` `zero.all_gather` does, its staging buffer planned until
    the `zero.wait`.

    ```mlir
    %full, %t = zero.prefetch group @transformer.h.0 : tensor<7087872xbf16>
    zero.wait %t
    %again, %t2 = zero.prefetch group @transformer.h.0 secondary : tensor<7087872xbf16>
    ```
  }];
  let extraClassDeclaration = [{
    int32_t getQuantizationBits() { return getQuantized() ? 8 : 0; }
  }];
  let arguments = (ins FlatSymbolRefAttr:$group, UnitAttr:$persistent,
                       Optional<Zero_FlatTensor>:$shard, UnitAttr:$secondary,
                       UnitAttr:$quantized);
  let results = (outs Zero_FlatTensor:$result, Zero_TokenType:$token);
  let assemblyFormat = [{
    `group` $group (`from` $shard^ `:` type($shard))?
    (`secondary` $secondary^)?
    (`persistent` $persistent^)? (`quantized` $quantized^)? attr-dict
    `:` type($result)
  }];
}

def Zero_StoreSecondaryOp : Zero_Op<"store_secondary", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Zero_StepPhaseOpInterface]> {
  let summary = "Keep this rank's hpZ slice of a gathered group";
  let description = [{
    ZeRO++ hpZ (`hpz_partition_size` h > 1 in the step's schedule): copies
    this rank's slice of the gathered buffer `full` of stage-3 partition
    `group` into the group's persistent `secondary` buffer. Member j of the
    rank's hpZ group (h consecutive ranks, j = rank mod h) keeps elements
    `[j * padded / h, (j + 1) * padded / h)`. Later gathers of the group in
    the same optimizer step (`zero.all_gather ... secondary`) collect the
    slices over the hpZ group alone, within the node. The parameters change
    only at the optimizer, so one store per optimizer step suffices: it runs
    in phase `first_micro_step` (or every micro step), never after the
    optimizer, and the secondary is never read before it in the step
    (`zero-verify-schedule`). The copy is local: no communication.

    ```mlir
    zero.store_secondary %full group @transformer.h.0 phase first_micro_step : tensor<7087872xbf16>
    ```
  }];
  let arguments = (ins Zero_FlatTensor:$full, FlatSymbolRefAttr:$group,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let assemblyFormat = [{
    $full `group` $group (`phase` $phase^)? attr-dict `:` type($full)
  }];
  let hasVerifier = 1;
}

class Zero_GradReductionOp<string mnemonic, dag extraArgs = (ins),
                           string extraFormat = "">
    : Zero_CollectiveOp<mnemonic, [], ["getCoverageRole", "getWrittenBuffer",
                                       "getInFlightReads"]> {
  let arguments = !con((ins FlatSymbolRefAttr:$group,
                       OptionalAttr<Zero_BufferKindAttr>:$buffer,
                       I64Attr:$begin, I64Attr:$end,
                       Variadic<Zero_FloatTensor>:$sources,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$source_offsets,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase),
                       extraArgs);
  let results = (outs Optional<Zero_TokenType>:$token);
  let assemblyFormat = [{
    `group` $group (`in` `` $buffer^)? ` ` `[` $begin `,` $end `)`
  }] # extraFormat # [{
    (`from` $sources^ `at` $source_offsets `:` type($sources))?
    (`phase` $phase^)? attr-dict (`->` type($token)^)?
  }];
  code reductionDescription = [{

    In-place form (`grads`, stage 1): the full persistent gradient buffer's
    range is reduced; each rank's owned part of it holds the sum.

    Source form (stages 2-3): `sources` are gradient values whose elements,
    starting at `source_offsets` (one per source, in elements) and
    concatenated, make up exactly `[begin, end)` of the layout; they are
    packed into a bucket buffer, reduced, and each rank adds its owned part to
    its `grads` shard accumulator (so gradient accumulation needs no extra
    buffer). The sources may be freed once the collective completed.
  }];
}

def Zero_ReduceScatterOp : Zero_GradReductionOp<"reduce_scatter",
    (ins UnitAttr:$quantized), [{ (`quantized` $quantized^)? }]> {
  let summary = "Sum gradients over ranks; each rank keeps its owned part";
  let description = commonDescription # reductionDescription # [{

    A `quantized` reduce-scatter (ZeRO++ qgZ, `zero-grad-sync
    quantized-gradients`, stage 3 across several nodes) moves the gradients
    as block-quantized INT4 (`zero_rt/quantize.h`) in two all-to-alls
    instead of a ring. With K members of the group on each of N nodes,
    member j owning part j of the range (its owned part of the layout,
    possibly empty):
    1. every member quantizes each of the group's parts of its bucket
       separately (a block never crosses a part) and sends, within its node,
       to the member of local index l the N parts owned by the members of
       local index l;
    2. each member sums in fp32, for each of the N parts of its own local
       index, its own exact contribution and the K - 1 dequantized ones of
       its node peers, requantizes each sum and sends it across nodes to
       its owner, among the members of its own local index;
    3. the owner adds to its own node's exact sum the N - 1 dequantized sums
       of the other nodes in fp32 and adds the result into its `grads`
       shard, as the plain reduce-scatter adds its sum.
    A member's own contributions never go through INT4 (DeepSpeed quantizes
    them too): on 2 x 2 ranks a part goes through three quantizations
    instead of six.
    A member sends within its node the quantized bytes of every part not
    owned at its local index and across nodes those owned at its local index
    but its own (`zrt_quantized_reduce_scatter_link_bytes`,
    `zero_rt/topology.h`). The quantized buffers and the fp32 sums are the
    op's staging in the step arena. Its element type is bf16, f16 or f32;
    the group spans more than one node and is the world (not a MiCS shard
    group). DeepSpeed decides per parameter tensor (1-D tensors and those
    whose size is not a multiple of twice the world size take the plain
    reduce-scatter); `zero-grad-sync` maps that onto buckets holding only
    gradients of one kind.

    ```mlir
    zero.reduce_scatter group @flat in grads [0, 1000)
    %t = zero.reduce_scatter group @flat [600, 1000) from %g1, %g2 at [0, 0] : tensor<10x20xbf16>, tensor<200xbf16> -> !zero.token
    zero.reduce_scatter group @h.0 [0, 4096) quantized from %w at [0] : tensor<64x64xbf16>
    ```
  }];
  let extraClassDeclaration = [{
    /// INT4 when quantized (ZeRO++ qgZ), else the values themselves.
    int32_t getQuantizationBits() { return getQuantized() ? 4 : 0; }
  }];
}

def Zero_ReduceOp : Zero_GradReductionOp<"reduce"> {
  let summary = "Sum gradients over ranks into each part's owner";
  let description = commonDescription # reductionDescription # [{

    Unlike `zero.reduce_scatter`, one reduce per owning rank is issued
    (DeepSpeed's stage 2 with `reduce_scatter=false`).

    ```mlir
    zero.reduce group @flat [0, 1000) from %g at [0] : tensor<1000xbf16>
    ```
  }];
}

def Zero_AllReduceOp : Zero_CollectiveOp<"all_reduce", [AttrSizedResultSegments],
    ["getCoverageRole"]> {
  let summary = "Reduce over ranks; every rank gets the result";
  let description = commonDescription # [{

    In-place form (stage 0): range `[begin, end)` of the full persistent
    `grads` buffer is summed over ranks.

    MiCS replica form (stage 3, `over replicas`): this rank's owned part of
    range `[begin, end)` of its `grads` shard is summed over the ranks that
    hold the same shard, one per shard group (ranks with equal r % m); after
    it every replica holds the gradients of the whole global batch. It runs
    once per optimizer step, at the boundary, before the overflow check.
    In-place gradient all-reduces at stage 3 are of this form only.

    Value form: reduces a small value, e.g. the optimizer's overflow flag and
    squared norm (`overflow_norm`: element 0 by max, element 1 by sum),
    over the group's ranks (under MiCS the shard group, whose owned
    gradients together are the whole model's once the replicas agree).
    A 1-D i64 value is summed exactly (`sum`): the experts' counts of a
    router over the global batch (`zero-moe-aux-counts`).

    `across expert` names the rank set of a value form explicitly: the
    statistics of the expert partitions at stage 0 under expert parallelism
    (an `expert` axis in #zero.schedule's mesh), where each rank holds only its
    expert-parallel member's experts, whole and reduced over their replicas,
    and their flag and squared norm are reduced over the rank's
    expert-parallel set (DeepSpeed's expert-parallel group) so that every
    expert counts once. `group` then names an expert partition.

    ```mlir
    %t = zero.all_reduce sum group @flat in grads [0, 4096) token !zero.token
    %r = zero.all_reduce sum group @h.0 in grads [0, 4096) over replicas phase boundary token !zero.token
    %g = zero.all_reduce overflow_norm %stats group @flat : tensor<2xf32> -> tensor<2xf32>
    %e = zero.all_reduce overflow_norm %stats group @experts across expert : tensor<2xf32> -> tensor<2xf32>
    %c = zero.all_reduce sum %counts group @flat : tensor<8xi64> -> tensor<8xi64>
    ```
  }];
  let arguments = (ins Zero_ReduceKindAttr:$kind,
                       Optional<AnyTypeOf<[Zero_FlatTensor, 1DTensorOf<[I64]>]>>:$input,
                       FlatSymbolRefAttr:$group,
                       OptionalAttr<Zero_BufferKindAttr>:$buffer,
                       OptionalAttr<I64Attr>:$begin, OptionalAttr<I64Attr>:$end,
                       UnitAttr:$over_replicas,
                       OptionalAttr<Zero_RankSetKindAttr>:$rank_set,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs Optional<AnyTypeOf<[Zero_FlatTensor, 1DTensorOf<[I64]>]>>:$result,
                      Optional<Zero_TokenType>:$token);
  let assemblyFormat = [{
    `` $kind ($input^)? `group` $group (`in` `` $buffer^ ` ` `[` $begin `,` $end `)`)?
    (`over` `replicas` $over_replicas^)? (`across` `` $rank_set^)?
    (`phase` $phase^)? attr-dict
    (`:` type($input)^ `->` type($result))? (`token` type($token)^)?
  }];
  let extraClassDeclaration = [{
    /// The named rank set (`across`), the MiCS replicas for the replica
    /// form, else the group's.
    ::mlir::zero::RankSetKind getRankSetKind() {
      if (auto set = getRankSet())
        return *set;
      return getOverReplicas()
                 ? ::mlir::zero::RankSetKind::replicas
                 : ::mlir::zero::getPartitionRankSet(getOperation(),
                                                     getGroupAttr());
    }
    /// The named rank set's checks (`across`).
    ::mlir::LogicalResult verifyNamedRankSet();
    /// The value form of the optimizer's fp32 statistics, which runs once
    /// per optimizer step; not a forward value's (a router's int64 counts).
    bool reducesOptimizerStats() {
      return getInput() && ::llvm::isa<::mlir::FloatType>(
          ::llvm::cast<::mlir::ShapedType>(getInput().getType())
              .getElementType());
    }
  }];
}

def Zero_AllToAllOp : Zero_Op<"all_to_all", [
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getRankSetKind", "getInFlightReads",
         "getStagingBytes"]>]> {
  let summary = "Exchange equal chunks of a tensor between every pair of ranks";
  let description = [{
    Each of the P members of rank set `rank_set` splits `input` along
    `split_dim` into P equal chunks, sends chunk j to member j, and
    concatenates the chunks it receives, in member order, along
    `concat_dim`: the result's `split_dim` is the input's divided by P, its
    `concat_dim` the input's times P (with `split_dim` equal to
    `concat_dim` the shape stays and the chunks are permuted). The element
    types are equal. Ulysses sequence parallelism turns sequence shards
    [B, T/P, H, D] into head shards [B, T, H/P, D] (`split 2 concat 1`)
    around attention and back (`split 1 concat 2`).

    The rank set is `sequence` (P is the step's sequence_parallel: the
    all-to-alls of Ulysses run within each sequence-parallel group, beside
    data parallelism over the groups) or `world` (P is the world size).

    The runtime (`zrt_ctx_all_to_all`) views the input as (outer, P, inner)
    at `split_dim` and the result as (outer, P, inner) at `concat_dim`;
    where a view's outer extent is above 1 its chunks are not contiguous,
    and it packs (or unpacks) them through step-arena staging of the
    tensor's size (getStagingBytes), planned with the op to its
    completion. With a `!zero.token` result it is asynchronous, completes
    at the `zero.wait` of its token, and its input is read until then.

    ```mlir
    %h = zero.all_to_all %x split 2 concat 1 over sequence : tensor<1x8x4x16xbf16> -> tensor<1x16x2x16xbf16>
    %s, %t = zero.all_to_all %h split 1 concat 2 over sequence : tensor<1x16x2x16xbf16> -> tensor<1x8x4x16xbf16>, !zero.token
    ```
  }];
  let arguments = (ins Zero_FloatTensor:$input, I64Attr:$split_dim,
                       I64Attr:$concat_dim, Zero_RankSetKindAttr:$rank_set);
  let results = (outs Zero_FloatTensor:$result,
                      Optional<Zero_TokenType>:$token);
  let assemblyFormat = [{
    $input `split` $split_dim `concat` $concat_dim `over` `` $rank_set attr-dict
    `:` type($input) `->` type($result) (`,` type($token)^)?
  }];
  let extraClassDeclaration = [{
    /// The members of the rank set when the enclosing step's schedule says
    /// (its world size, or its sequence_parallel for `sequence`), else none.
    std::optional<int64_t> getKnownMembers();
    /// A tensor shape's (outer, inner) extents around dimension `dim` with
    /// the P chunks between: outer is the product of the dimensions before
    /// `dim`, inner that of those after it times dim's extent / P.
    static std::pair<int64_t, int64_t> getChunkView(::llvm::ArrayRef<int64_t> shape,
                                                    int64_t dim, int64_t members);
    /// The number of members P, from the input and result shapes.
    int64_t getMembers();
  }];
  let hasVerifier = 1;
}

def Zero_WaitOp : Zero_Op<"wait", [Zero_StepPhaseOpInterface]> {
  let summary = "Wait for an asynchronous collective";
  let description = [{
    ```mlir
    zero.wait %t
    ```
  }];
  let arguments = (ins Zero_TokenType:$token, DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let assemblyFormat = "$token (`phase` $phase^)? attr-dict";
}

//===----------------------------------------------------------------------===//
// The mean over the labels of the global batch
//===----------------------------------------------------------------------===//

def Zero_LabelShareOp : Zero_Op<"label_share"> {
  let summary = "This micro batch's share of the step's mean over labels";
  let description = [{
    `c * divisor / N`, where `c` is the number of labels of this rank's
    micro batch that `zero.count_labels` counts, `N` the same count over
    every micro batch and rank of the optimizer step (its all-reduce), and
    `divisor` the world size times the accumulation steps, by which the
    optimizer divides the summed gradients; 0 when `N` is 0. Multiplying a
    micro batch's mean over its own valid labels by it gives that batch's
    part of the mean over the global batch's valid labels, scaled so that
    the reductions' sum divided by `divisor` is exactly its gradient
    (`zero-token-mean`). It reads the counts the runtime keeps for the step,
    as `zero.loss_scale` reads the loss scaler; a step that has one has a
    `zero.count_labels`. The evaluation step, which runs the forward alone
    on held-out batches, reads 1: its loss is each batch's mean.

    ```mlir
    %w = zero.label_share divisor 4.0 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$divisor);
  let results = (outs Zero_ScalarF32:$result);
  let assemblyFormat = "`divisor` $divisor attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Zero_CountLabelsOp : Zero_Op<"count_labels", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getToken", "getRankSetKind"]>,
    Zero_StepPhaseOpInterface]> {
  let summary = "The valid labels of the optimizer step, over every rank";
  let description = [{
    `N`, the number of entries of `labels` other than `ignore_index` over
    every micro batch of the optimizer step and every rank of the
    data-parallel world, as an int64: its rank set is `world` even when
    partition `group` is sharded over MiCS shard groups, whose ranks see
    different batches. Each rank counts
    its own micro batches before the first micro step: the compiled
    program's label count function computes `labels` from each micro
    batch's inputs (the ops `labels` depends on, with the training step's
    calls and offsets), and the driver runs it on every micro batch of the
    step before the first one trains. In the first micro step, before the
    backward, one all-reduce of one int64 sums the ranks' counts; the
    runtime keeps `N` and each micro batch's count for `zero.label_share`
    for the rest of the step. Its phase is `first_micro_step`.

    ```mlir
    %n = zero.count_labels %labels ignore_index -100 group @flat : tensor<4x128xi64> -> tensor<1xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32, I64]>:$labels,
                       I64Attr:$ignore_index, FlatSymbolRefAttr:$group,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::first_micro_step">:$phase);
  let results = (outs 1DTensorOf<[I64]>:$count);
  let assemblyFormat = [{
    $labels `ignore_index` $ignore_index `group` $group (`phase` $phase^)?
    attr-dict `:` type($labels) `->` type($count)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sums over the global batch (a loss's denominator)
//===----------------------------------------------------------------------===//

def Zero_CountSumOp : Zero_Op<"count_sum", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getToken", "getRankSetKind",
         "getWireElementBytes"]>,
    Zero_StepPhaseOpInterface]> {
  let summary = "A scalar of the inputs summed over the optimizer step's batches";
  let description = [{
    `S`, the sum of `value` (a scalar computed from the step's inputs
    alone, such as a completion mask's sum) over every micro batch of the
    optimizer step and every rank of the data-parallel world, as
    `zero.count_labels` counts labels: the compiled program's count
    function computes `value` from each micro batch's inputs before the
    first micro step, and records it in double precision; in the first
    micro step one all-reduce of one double (its rank set is `world`) sums
    the ranks' sums, in the ranks' fixed order. The runtime keeps `S` for
    `zero.step_sum` for the rest of the step; the result is `S` as an fp32.
    `index` tells a step's sums apart (0, 1, ... in the order of the ops).
    Its phase is `first_micro_step`.

    ```mlir
    %n = zero.count_sum %s index 0 group @flat : tensor<f32> -> tensor<1xf32>
    ```
  }];
  let arguments = (ins Zero_ScalarF32:$value, I64Attr:$index,
                       FlatSymbolRefAttr:$group,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::first_micro_step">:$phase);
  let results = (outs 1DTensorOf<[F32]>:$sum);
  let assemblyFormat = [{
    $value `index` $index `group` $group (`phase` $phase^)?
    attr-dict `:` type($value) `->` type($sum)
  }];
  let hasVerifier = 1;
}

def Zero_StepSumOp : Zero_Op<"step_sum"> {
  let summary = "The global batch's sum of a `zero.count_sum`";
  let description = [{
    The `S` of the step's `zero.count_sum` of the same `index` (its sum
    over every micro batch and rank of the optimizer step) as an fp32
    scalar, read in every micro step from the sums the runtime keeps, as
    `zero.label_share` reads the label counts. The evaluation step, which
    runs the forward alone on held-out batches, reads the batch's own
    value instead: its loss is each batch's.

    ```mlir
    %S = zero.step_sum index 0 : tensor<f32>
    ```
  }];
  let arguments = (ins I64Attr:$index);
  let results = (outs Zero_ScalarF32:$result);
  let assemblyFormat = "`index` $index attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Zero_MicroShareOp : Zero_Op<"micro_share"> {
  let summary = "One micro batch's share of the optimizer step";
  let description = [{
    `1 / divisor`, where `divisor` is the world size times the accumulation
    steps, by which the optimizer divides the summed gradients; 1 in the
    evaluation step. `zero-token-mean` multiplies a loss's global
    denominator by it, so that each micro batch's loss is its part of the
    global batch's ratio times `divisor`, as `zero.label_share` does for a
    mean over labels.

    ```mlir
    %w = zero.micro_share divisor 4.0 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$divisor);
  let results = (outs Zero_ScalarF32:$result);
  let assemblyFormat = "`divisor` $divisor attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Transfers between memories
//===----------------------------------------------------------------------===//

def Zero_MemoryKind : I32EnumAttr<"MemoryKind", "where a buffer lives", [
    I32EnumAttrCase<"device", 0>, I32EnumAttrCase<"host", 1>,
    I32EnumAttrCase<"nvme", 2>]> {
  let cppNamespace = "::mlir::zero";
  let genSpecializedAttr = 0;
}

def Zero_ParamSwapAttr : Zero_Attr<"ParamSwap", "param_swap"> {
  let summary = "The host swap buffer of a parameter shard's NVMe transfer";
  let description = [{
    On `zero.transfer` of a parameter shard offloaded to `nvme`: the
    transfer goes through swap buffer `buffer` of the `buffers` pinned
    host buffers of `buffer_bytes` bytes each (a multiple of 4096,
    O_DIRECT's alignment), which the memory plan reserves in the host
    arena (`param_swap_bytes = buffers * buffer_bytes`). A buffer must hold
    the whole shard of the transfer's partition, padded to 4096 bytes.

    ```mlir
    #zero.param_swap<buffer = 0, buffers = 5, buffer_bytes = 8192>
    ```
  }];
  let parameters = (ins "int64_t":$buffer, "int64_t":$buffers,
                        "int64_t":$buffer_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_TransferOpInterface : OpInterface<"TransferOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A copy of this rank's part of a partition (or of a layout range of it)
    between two memories (device and pinned host memory): between persistent
    buffers, or between a persistent buffer and a short-lived device buffer
    of the step arena (the staging of an offloaded parameter shard). What the
    memory planner, the verifier, the cost model (which charges the link
    between the two memories) and the report need, whatever op carries it.
  }];
  let methods = [
    InterfaceMethod<"The partition whose elements move.",
      "::mlir::FlatSymbolRefAttr", "getGroupAttr">,
    InterfaceMethod<"The persistent buffer read (none: a staged value).",
      "std::optional<::mlir::zero::BufferKind>", "getSourceBuffer">,
    InterfaceMethod<"The persistent buffer written (none: a staged value).",
      "std::optional<::mlir::zero::BufferKind>", "getTargetBuffer">,
    InterfaceMethod<"The step-arena device buffer read or written, or null "
      "when both ends are persistent buffers.",
      "::mlir::Value", "getStagedValue">,
    InterfaceMethod<"Its completion token, or null when it is synchronous.",
      "::mlir::Value", "getToken">,
    InterfaceMethod<[{
        The layout range [begin, end) whose owned elements move, or none
        when the whole owned part moves.
      }],
      "std::optional<std::pair<int64_t, int64_t>>", "getElementRange">,
    InterfaceMethod<[{
        The swap buffer a transfer between the parameter shard in an NVMe
        swap file and memory goes through (null: none).
      }],
      "::mlir::zero::ParamSwapAttr", "getSwapAttr">,
    InterfaceMethod<[{
        The step-arena values it reads until it completes, each with the
        element range of it read (the staged new parameters it stores).
      }],
      "::llvm::SmallVector<std::pair<::mlir::Value, std::pair<int64_t, int64_t>>>",
      "getInFlightReads", (ins), [{}], [{ return {}; }]>,
  ];
}

def Zero_TransferOp : Zero_Op<"transfer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Zero_TransferOpInterface,
        ["getSourceBuffer", "getTargetBuffer", "getStagedValue",
         "getElementRange", "getInFlightReads"]>,
    AttrSizedResultSegments,
    Zero_StepPhaseOpInterface]> {
  let summary = "Copy this rank's part of a partition between memories";
  let description = [{
    Optimizer offload (`offload #zero.offload<optimizer = cpu>` on the
    step): the fp32 `master`, `exp_avg` and `exp_avg_sq` shards live in
    pinned host memory beside `host_grads` (the owned gradients in the
    compute type) and, with 16-bit compute, `host_params` (the updated
    16-bit parameters). At the step boundary the owned gradients go to the
    host (`grads to host_grads`), the host Adam (`zero.optimizer_step ... host`)
    updates them, and the parameters come back (`host_params to params`, or
    `master to params` with fp32 compute). The copy moves the owned
    elements of the rank (the owned range of the full buffer at stages 0-1
    and of the parameters at stages 1-2, the front of a shard otherwise).
    With a range `[begin, end)` of the group's flat layout (identical on
    every rank, like a collective's) only the rank's owned elements of that
    range move: the gradients stream to the host bucket by bucket, each as
    soon as its reduction completed, in phase `last_micro_step` at stages
    2-3 (overlapping the rest of the last backward) and at the boundary at
    stage 1. The uploads follow the host Adam, at the boundary. With a
    `!zero.token` result it is asynchronous and completes at the
    `zero.wait` of its token.

    Parameter offload (`#zero.offload<param = cpu>`, stage 3): the `params`
    shard lives in pinned host memory. Before each gather of the group,
    `params to staging` copies the whole shard into a new device buffer of
    the step arena (`staged`, the shard's elements in the compute type),
    which the `zero.all_gather` or `zero.prefetch` reads (`from`) and a
    `zero.free` releases once the gather completed. With the optimizer on
    the device, the new parameters Adam wrote into a staged buffer go back
    with `%new to params` (the owned elements) at the step boundary.

    Parameter offload to NVMe (`#zero.offload<param = nvme>`): the `params`
    shard lives in the rank's parameter swap file (memory `nvme`), and every
    transfer from or to it goes through the pinned host swap buffer its
    `swap` names: `params to staging swap <...>` reads the shard from the
    file into the buffer (asynchronously) and copies it to the staged
    device buffer; `%new to params swap <...>` and, after a host Adam,
    `host_params to params swap <...>` (`master to params` with fp32
    compute and the optimizer in host memory) copy the owned elements into
    the buffer and write the shard's blocks back to the file. Two transfers
    whose lifetimes (issue to `zero.wait`) overlap never share a buffer
    (`zero-verify-schedule`).

    ```mlir
    %t = zero.transfer group @flat grads to host_grads phase boundary -> !zero.token
    %s = zero.transfer group @flat grads[0, 4096) to host_grads phase last_micro_step -> !zero.token
    zero.transfer group @flat host_params to params phase boundary
    %shard, %t1 = zero.transfer group @h0 params to staging : tensor<2048xbf16> -> !zero.token
    %t2 = zero.transfer group @h0 %new to params phase boundary : tensor<2048xbf16> -> !zero.token
    %shard2, %t3 = zero.transfer group @h0 params to staging swap <buffer = 1, buffers = 5, buffer_bytes = 4096> : tensor<2048xbf16> -> !zero.token
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group,
                       OptionalAttr<Zero_BufferKindAttr>:$source,
                       OptionalAttr<Zero_BufferKindAttr>:$target,
                       Optional<Zero_FlatTensor>:$input,
                       OptionalAttr<I64Attr>:$begin, OptionalAttr<I64Attr>:$end,
                       OptionalAttr<Zero_ParamSwapAttr>:$swap,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs Optional<Zero_FlatTensor>:$staged,
                      Optional<Zero_TokenType>:$token);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Zero_ActivationCopyOpInterface
    : OpInterface<"ActivationCopyOpInterface"> {
  let cppNamespace = "::mlir::zero";
  let description = [{
    A copy of a saved activation between the step arena and the pinned host
    arena (activation offload): what the memory planner (which places the
    host copy in the host arena), the cost model (which charges the host
    link) and the lowering need, whichever direction the op copies.
  }];
  let methods = [
    InterfaceMethod<"The value in the step arena (read or written).",
      "::mlir::Value", "getDeviceValue">,
    InterfaceMethod<"The value in the host arena (written or read).",
      "::mlir::Value", "getHostValue">,
    InterfaceMethod<"Whether it copies from the device to the host.",
      "bool", "copiesToHost">,
    InterfaceMethod<"Its completion token, or null when it is synchronous.",
      "::mlir::Value", "getToken">,
  ];
}

def Zero_OffloadActivationOp : Zero_Op<"offload_activation", [
    DeclareOpInterfaceMethods<Zero_ActivationCopyOpInterface>,
    AllTypesMatch<["input", "host"]>]> {
  let summary = "Copy a saved activation to pinned host memory";
  let description = [{
    Activation offload (`zero-offload-activations`): `host` is a copy of
    the forward value `input` in the pinned host arena, where the memory
    plan gives it a place of its own. Only `zero.reload_activation` reads
    it. With a `!zero.token` result the copy is asynchronous: `input` is
    read until the `zero.wait` of the token, and its device buffer may be
    released after it.

    ```mlir
    %h, %t = zero.offload_activation %x : tensor<8x64xf32> -> !zero.token
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$host, Optional<Zero_TokenType>:$token);
  let assemblyFormat =
      "$input attr-dict `:` type($input) (`->` type($token)^)?";
  let hasVerifier = 1;
}

def Zero_ReloadActivationOp : Zero_Op<"reload_activation", [
    DeclareOpInterfaceMethods<Zero_ActivationCopyOpInterface>,
    AllTypesMatch<["host", "result"]>]> {
  let summary = "Copy an offloaded activation back into the step arena";
  let description = [{
    The backward's copy of an offloaded activation: `result` is a new
    step-arena buffer holding the host copy `host`, which a
    `zero.offload_activation` wrote. With a `!zero.token` result the copy
    is asynchronous and `result` may be read only after the `zero.wait` of
    the token.

    ```mlir
    %x2, %t2 = zero.reload_activation %h : tensor<8x64xf32> -> !zero.token
    ```
  }];
  let arguments = (ins AnyRankedTensor:$host);
  let results = (outs AnyRankedTensor:$result, Optional<Zero_TokenType>:$token);
  let assemblyFormat =
      "$host attr-dict `:` type($host) (`->` type($token)^)?";
  let hasVerifier = 1;
}

def Zero_FreeOp : Zero_Op<"free", [Zero_StepPhaseOpInterface]> {
  let summary = "End of a buffer's (or a slice's) lifetime";
  let description = [{
    Releases `buffer`, or only its elements `[offset, offset + size)` when a
    range is given (stage 2 frees each reduced slice of a gradient at once,
    so a parameter spanning several buckets does not keep its whole gradient
    alive). The buffer (range) must not be used afterwards.

    ```mlir
    zero.free %gathered : tensor<1008xbf16>
    zero.free %grad[0, 252] : tensor<1008xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$buffer, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<I64Attr>:$size, DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

// The optimizer's statistics (overflow flag, squared norm) where the
// assembly format states no type.
def Zero_OverflowStats : 1DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({2}, $_builder.getF32Type())";
}

def Zero_CheckOverflowOp : Zero_Op<"check_overflow", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Zero_StepPhaseOpInterface]> {
  let summary = "Inf/NaN flag and squared norm of local gradients in one pass";
  let description = [{
    One read-only pass over this rank's owned gradients of every partition in
    `groups` (the `grads` buffer: the owned range at stages 0-1, the shard
    accumulator at stages 2-3). Result element 0 is 1.0 if any element is inf
    or NaN, else 0.0; element 1 is the sum of squares of the true gradients,
    i.e. of the stored values divided by `loss_scale * divisor` (`divisor` is
    world size times accumulation steps: reductions sum, the optimizer
    averages). `zero-optimizer` all-reduces it across ranks (`overflow_norm`).

    `combine %partial` adds statistics computed elsewhere (the expert
    partitions' at stage 0 under expert parallelism, already reduced over
    the expert-parallel set): the result's flag is the larger of the two
    flags, its squared norm their sum.

    ```mlir
    %stats = zero.check_overflow groups [@flat] scale %s divisor 4.0 : tensor<2xf32>
    %all = zero.check_overflow groups [@dense] scale %s divisor 2.0 combine %experts : tensor<2xf32>
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$groups, Zero_ScalarF32:$loss_scale,
                       Optional<Zero_OverflowStats>:$partial,
                       F64Attr:$divisor, DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    `groups` $groups `scale` $loss_scale `divisor` $divisor
    (`combine` $partial^)? (`phase` $phase^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Zero_UpdateLossScaleOp : Zero_Op<"update_loss_scale",
    [Zero_StepPhaseOpInterface]> {
  let summary = "DeepSpeed's dynamic loss-scale update; yields the skip flag";
  let description = [{
    Takes the global overflow flag (element 0 of the reduced
    `zero.check_overflow` result) and updates the loss scaler's state with the
    rules of the train step's precision attribute (DeepSpeed's
    DynamicLossScaler). The result is `true` when the step must be skipped.
    At fp32/bf16 the scale stays 1 and a non-finite gradient still skips the
    step (and is reported), never silently.

    ```mlir
    %skip = zero.update_loss_scale %stats : tensor<2xf32> -> i1
    ```
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$stats, DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs I1:$skip);
  let assemblyFormat =
      "$stats (`phase` $phase^)? attr-dict `:` type($stats) `->` type($skip)";
  let hasVerifier = 1;
}

def Zero_NvmeSwapAttr : Zero_Attr<"NvmeSwap", "nvme_swap"> {
  let summary = "How a host Adam streams NVMe-resident optimizer states";
  let description = [{
    On `zero.optimizer_step ... host` of an optimizer offloaded to `nvme`: the states
    move through `buffers` swap buffers in host memory, each holding
    `chunk` elements (a multiple of 1024: 4096 bytes of fp32) of the
    master, `exp_avg` and `exp_avg_sq`, so a buffer is `12 * chunk` bytes
    and the swap region of the host arena `buffers * 12 * chunk`.

    ```mlir
    #zero.nvme_swap<chunk = 1024, buffers = 4>
    ```
  }];
  let parameters = (ins "int64_t":$chunk, "int64_t":$buffers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes of one swap buffer: the chunk of the three fp32 states.
    int64_t getBufferBytes() const { return 12 * getChunk(); }
  }];
}

def Zero_OptimizerStepOp : Zero_Op<"optimizer_step", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Zero_StepPhaseOpInterface]> {
  let summary = "The optimizer's update of this rank's shard of a partition";
  let description = [{
    The update of the train step's optimizer, its `#zero.optimizer`'s
    `kind`: the state buffers it updates and the runtime entries it lowers
    to are that kind's rows of runtime/include/zero_rt/optimizers.def
    (Adam and AdamW: `exp_avg` and `exp_avg_sq`; Lion: `exp_avg`; every
    kind: `zrt_ctx_optimizer_step*`).

    Unless `skip` is true, updates this rank's owned part of partition
    `group`: reads the `grads` (in the compute type), unscales them by
    `loss_scale * divisor` and clips them by the global norm from `stats`
    (`gradient_clipping` of the train step) in registers, and applies
    Adam/AdamW (the train step's `#zero.optimizer`: bias correction, the
    learning rate of its schedule at the optimizer step counter, and each
    parameter's own `weight_decay` on its elements of the shard) to the
    fp32 masters, `exp_avg` and `exp_avg_sq`. With 16-bit compute the
    masters are the `master` buffer and the updated parameters are written,
    rounded, into `params`; with fp32 compute the masters are the owned part
    of `params`, updated in place. No fp32 gradient buffer exists. The
    gradients are then cleared for the next step (also when skipped).

    `host` (exactly when the step offloads the optimizer): the CPU Adam on
    the host reads `host_grads`, updates the host `master` (present with
    fp32 compute too) and moments, writes the 16-bit parameters into
    `host_params` (with fp32 compute the updated `master` is the copy to
    upload), and clears the device `grads`. With parameter offload as well
    it writes the new parameters straight into the host `params` shard
    (which with fp32 compute is its own master).

    `-> tensor<N x T>` (parameter offload, optimizer on the device): the
    `params` shard is in host memory, so the device Adam writes the owned
    new parameters to the front of this new step-arena buffer of the shard's
    size, which a `zero.transfer %new to params` copies to the host (the
    fp32 masters are then a device `master` buffer, also with fp32 compute).

    `swap` (exactly when the optimizer is offloaded to `nvme`): the
    `master`, `exp_avg` and `exp_avg_sq` shards live in the rank's swap
    file, and the host Adam streams them through the swap buffers of the
    host arena in chunks of `chunk` elements, `buffers` at a time: the read
    of chunk i+1 and the write of chunk i-1 overlap the Adam of chunk i.
    It reads and writes each state once (`getNvmeBytes`); with fp32
    compute the updated parameters go to `host_params` as with 16-bit
    compute, since the masters are not in host memory (with parameter
    offload, into the host `params` shard, which is then never a master).

    ```mlir
    zero.optimizer_step group @flat stats %stats scale %s skip %skip divisor 4.0 : tensor<2xf32>
    zero.optimizer_step group @flat stats %stats scale %s skip %skip divisor 4.0 host phase boundary : tensor<2xf32>
    zero.optimizer_step group @flat stats %stats scale %s skip %skip divisor 4.0 host swap <chunk = 1024, buffers = 4> phase boundary : tensor<2xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$group, 1DTensorOf<[F32]>:$stats,
                       Zero_ScalarF32:$loss_scale, I1:$skip, F64Attr:$divisor,
                       UnitAttr:$host,
                       OptionalAttr<Zero_NvmeSwapAttr>:$swap,
                       DefaultValuedAttr<Zero_PhaseAttr, "::mlir::zero::Phase::micro_step">:$phase);
  let results = (outs Optional<Zero_FlatTensor>:$new_params);
  let assemblyFormat = [{
    `group` $group `stats` $stats `scale` $loss_scale `skip` $skip
    `divisor` $divisor (`host` $host^)? (`swap` $swap^)? (`phase` $phase^)?
    attr-dict `:` type($stats) (`->` type($new_params)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of swap file this Adam reads (and as many it writes) on a rank
    /// that owns `owned` elements: the three fp32 states, each chunk's
    /// reads rounded up to 4096 bytes (0 without `swap`).
    int64_t getNvmeBytes(int64_t owned);
    /// The optimizer it runs: its train step's `#zero.optimizer` kind (the
    /// module's train step's once split into functions; adam without one).
    ::mlir::zero::OptimizerKind getOptimizerKind();
    /// That `#zero.optimizer` (null without a train step).
    ::mlir::zero::OptimizerAttr getOptimizer();
  }];
}


def Zero_CastOp : Zero_Op<"cast", [Pure]> {
  let summary = "Element type conversion of a flat buffer";
  let description = [{
    ```mlir
    %p16 = zero.cast %p32 : tensor<252xf32> to tensor<252xbf16>
    ```
  }];
  let arguments = (ins Zero_FlatTensor:$input);
  let results = (outs Zero_FlatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Memory plan
//===----------------------------------------------------------------------===//

def Zero_MemoryPlanAttr : Zero_Attr<"MemoryPlan", "memory_plan"> {
  let summary = "The byte totals of a train step's memory plan on one rank";
  let description = [{
    Recorded as `zero.plan` on `zero.train_step` by `zero-plan-memory`:
    the persistent arena (`persistent_bytes`), the high-water mark of the
    step arena (`arena_bytes`), both multiples of 64, the largest heap
    scratch of one runtime kernel (`scratch_bytes`), and their sum, what a
    rank allocates in device memory (`peak_bytes`); with optimizer offload
    the pinned host arena (`host_bytes`, a multiple of 64; 0 and not
    printed otherwise). With the optimizer on NVMe, the size of the rank's
    swap file (`nvme_bytes`, a multiple of 4096) and the swap buffers'
    region of the host arena (`swap_bytes` at `swap_offset`, both multiples
    of 4096, inside `host_bytes`). With the parameters on NVMe, the size of
    the rank's parameter swap file (`param_nvme_bytes`, part of
    `nvme_bytes`, which is the total of the rank's swap files) and the
    parameter swap buffers' region of the host arena (`param_swap_bytes` at
    `param_swap_offset`, also multiples of 4096 inside `host_bytes`).

    ```mlir
    #zero.memory_plan<persistent_bytes = 896, arena_bytes = 576, scratch_bytes = 0, peak_bytes = 1472>
    #zero.memory_plan<persistent_bytes = 384, arena_bytes = 576, scratch_bytes = 0, peak_bytes = 960, host_bytes = 53248, nvme_bytes = 12288, swap_offset = 4096, swap_bytes = 49152>
    ```
  }];
  let parameters = (ins "int64_t":$persistent_bytes, "int64_t":$arena_bytes,
                        "int64_t":$scratch_bytes, "int64_t":$peak_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$host_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$nvme_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$swap_offset,
                        DefaultValuedParameter<"int64_t", "0">:$swap_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$param_nvme_bytes,
                        DefaultValuedParameter<"int64_t", "0">:$param_swap_offset,
                        DefaultValuedParameter<"int64_t", "0">:$param_swap_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Zero_BufferOffsetsAttr : Zero_Attr<"BufferOffsets", "buffer_offsets"> {
  let summary = "Persistent-arena offsets of a partition's buffers";
  let description = [{
    Recorded as `zero.buffers` on `zero.partition` by `zero-plan-memory`:
    the byte offset, a multiple of 64, of each persistent buffer of the
    partition in the persistent arena of a rank. `master` is present exactly
    when the partition's compute type is 16-bit; with fp32 compute the
    parameters are their own masters and the partition has no `master`
    buffer (the partition's verifier checks this). With optimizer offload
    `host_grads` is present, `master` and the optimizer's states (a
    `master` with fp32 compute too) are offsets in the host arena beside
    `host_grads` and, with 16-bit compute, `host_params`. With the
    optimizer on NVMe, `master` and the optimizer's states are byte
    offsets in the rank's swap file, multiples of 4096 (O_DIRECT), and
    `host_params` is present with fp32 compute too. A frozen partition has
    `params` only, and `secondary` under hpZ. `secondary` (ZeRO++ hpZ) is
    the device buffer of this rank's hpZ slice of the gathered group, present
    exactly when the step stores one (`zero.store_secondary`).

    ```mlir
    #zero.buffer_offsets<params = 0, grads = 192, master = 320, exp_avg = 512, exp_avg_sq = 704>
    #zero.buffer_offsets<params = 0, grads = 384, exp_avg = 768, exp_avg_sq = 1152>
    #zero.buffer_offsets<params = 0, grads = 192, master = 0, exp_avg = 192, exp_avg_sq = 384, host_grads = 576, host_params = 640>
    ```
  }];
  let parameters = (ins "int64_t":$params,
                        OptionalParameter<"std::optional<int64_t>">:$grads,
                        OptionalParameter<"std::optional<int64_t>">:$master,
                        OptionalParameter<"std::optional<int64_t>">:$exp_avg,
                        OptionalParameter<"std::optional<int64_t>">:$exp_avg_sq,
                        OptionalParameter<"std::optional<int64_t>">:$momentum_buffer,
                        OptionalParameter<"std::optional<int64_t>">:$host_grads,
                        OptionalParameter<"std::optional<int64_t>">:$host_params,
                        OptionalParameter<"std::optional<int64_t>">:$secondary);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The offset of the buffer of kind `kind`, or none when the partition
    /// has no such buffer (`master` with fp32 compute, all but `params` in
    /// a frozen partition).
    std::optional<int64_t> getOffset(::mlir::zero::BufferKind kind) const;
  }];
}

//===----------------------------------------------------------------------===//
// Expert parallelism
//===----------------------------------------------------------------------===//

def Zero_MoeExchangeOp : Zero_Op<"moe_exchange", [
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getToken", "getRankSetKind"]>]> {
  let summary = "Token rows to the ranks of their experts (expert parallelism)";
  let description = [{
    Over this rank's `expert` set of P members (in rank order, consecutive
    or strided by where the mesh's `expert` axis lies), which split a MoE
    layer's E experts (member q owns experts `[q * E / P, (q + 1) * E / P)`, E_l = E
    / P of them): `rows` [n, width] are this rank's rows sorted by global
    expert, as `nn.moe_dispatch` writes them, `offsets` [E] (i32) their
    cumulative ends; the rows of member q's experts (a contiguous range)
    go to q. Without `known` counts, the per-expert counts are first
    all-gathered over the set, so every member decides an overflow alike:
    `counts` [P, E_l] (i32) are the rows this rank receives from each member
    for each local expert, `local_offsets` [E_l] their cumulative ends.
    With `known(%counts, %local_offsets)` (the backward, reusing the
    forward's) they are inputs, and the results are the same values.

    `recv` [cap, width] holds the received rows expert-major (local expert
    l: from member 0, 1, ..., P-1, each in its dispatch order), rows after
    the last zero. Its `cap` rows are planned whatever the routing: P * n
    (dropless, every member sends every row to one member) or, with
    `capacity` C, `ceil(C * n)` (C times the balanced load, n rows a
    member) up to P * n (more can never arrive). When more than `cap` rows
    would arrive, the step stops on every rank with a message naming MoE
    layer `layer`, the step and the counts, unless `drop`: then each
    member keeps the first rows in (local expert, source) order up to `cap`
    and the rest come back as zero rows, counted in the step's MoE
    statistics. It runs synchronously
    (`zrt_ctx_moe_exchange`); its bytes count as all-to-all bytes.

    ```mlir
    %recv, %counts, %loffs = zero.moe_exchange %rows, %offs layer 0 : tensor<128x32xf32>, tensor<8xi32> -> tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>
    %g, %c2, %l2 = zero.moe_exchange %drows, %offs known(%counts, %loffs : tensor<2x4xi32>, tensor<4xi32>) layer 0 capacity 1.250000e+00 drop : tensor<128x32xf32>, tensor<8xi32> -> tensor<160x32xf32>, tensor<2x4xi32>, tensor<4xi32>
    ```
  }];
  let arguments = (ins Zero_FloatTensor:$rows, 1DTensorOf<[I32]>:$offsets,
                       Variadic<RankedTensorOf<[I32]>>:$known,
                       I64Attr:$layer, OptionalAttr<F64Attr>:$capacity_factor,
                       UnitAttr:$drop);
  let results = (outs Zero_FloatTensor:$recv,
                      2DTensorOf<[I32]>:$counts,
                      1DTensorOf<[I32]>:$local_offsets);
  let assemblyFormat = [{
    $rows `,` $offsets (`known` `(` $known^ `:` type($known) `)`)? `layer` $layer
    (`capacity` $capacity_factor^)? (`drop` $drop^)? attr-dict `:` type($rows) `,` type($offsets) `->`
    type($recv) `,` type($counts) `,` type($local_offsets)
  }];
  let extraClassDeclaration = [{
    /// The members P of the `expert` set (the counts' rows).
    int64_t getMembers() {
      return ::llvm::cast<::mlir::RankedTensorType>(getCounts().getType())
          .getDimSize(0);
    }
    /// The receive rows planned for `n` dispatch rows a member: P * n, or
    /// ceil(C * n) with a capacity factor C, at most P * n.
    int64_t getCapacityFor(int64_t n);
    /// The receive capacity in rows.
    int64_t getCapacity() {
      return ::llvm::cast<::mlir::RankedTensorType>(getRecv().getType())
          .getDimSize(0);
    }
    /// Whether the counts are inputs (the backward's exchange).
    bool hasKnownCounts() { return !getKnown().empty(); }
  }];
  let hasVerifier = 1;
}

def Zero_MoeReturnOp : Zero_Op<"moe_return", [
    DeclareOpInterfaceMethods<Zero_CollectiveOpInterface,
        ["getCollectiveKind", "getElementRange", "getInPlaceBuffer",
         "getMovedValue", "getToken", "getRankSetKind"]>]> {
  let summary = "Expert outputs back to their tokens' ranks (expert parallelism)";
  let description = [{
    The inverse of `zero.moe_exchange` over the same `expert` set: the
    rows of `recv` [cap, width], laid out as that exchange received them
    (its `counts` [P, E_l] and `local_offsets` [E_l]), go back to the
    members they came from and land in this rank's dispatch order in
    `rows` [n, width] (the `offsets` [E] of this rank's dispatch); rows the
    exchange dropped are zero. The backward of an exchange is the return of
    its gradient rows; the backward of a return is an exchange of its
    gradient rows with the counts known. Synchronous
    (`zrt_ctx_moe_return`); its bytes count as all-to-all bytes.

    ```mlir
    %rows = zero.moe_return %recv, %counts, %loffs, %offs layer 0 : tensor<256x32xf32>, tensor<2x4xi32>, tensor<4xi32>, tensor<8xi32> -> tensor<128x32xf32>
    ```
  }];
  let arguments = (ins Zero_FloatTensor:$recv, 2DTensorOf<[I32]>:$counts,
                       1DTensorOf<[I32]>:$local_offsets,
                       1DTensorOf<[I32]>:$offsets, I64Attr:$layer);
  let results = (outs Zero_FloatTensor:$rows);
  let assemblyFormat = [{
    $recv `,` $counts `,` $local_offsets `,` $offsets `layer` $layer attr-dict
    `:` type($recv) `,` type($counts) `,` type($local_offsets) `,`
    type($offsets) `->` type($rows)
  }];
  let extraClassDeclaration = [{
    /// The members P of the `expert` set.
    int64_t getMembers() {
      return ::llvm::cast<::mlir::RankedTensorType>(getCounts().getType())
          .getDimSize(0);
    }
  }];
  let hasVerifier = 1;
}

#endif // ZERO_DIALECT_ZERO_IR_ZEROOPS
