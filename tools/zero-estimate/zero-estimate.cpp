//===- zero-estimate.cpp - Model-state memory of a hypothetical model -----===//
//
// Part of the zero-mlir project.
//
// The command line of the estimate (zero/Estimate/Estimate.h): DeepSpeed's
// estimate_zero{2,3}_model_states_mem_needs answer beside our per-rank
// accounting, for a model given as numbers (--params,
// --largest-layer-params) or as a model file.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/DeepSpeedEstimators.h"
#include "zero/Dialect/Zero/IR/OptimizerRules.h"
#include "zero/Estimate/Estimate.h"
#include "zero/InitAll.h"
#include "zero/Support/CommandLine.h"
#include "zero/Support/ModelFile.h"
#include "zero/Support/ToolOptions.h"
#include "zero/Support/UTF8.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>
#include <string>

using namespace llvm;
using namespace zero::estimate;

static cl::OptionCategory estimateCat("zero-estimate options");

/// The options, stored where the estimate reads them; getOptions() adds
/// what is derived from several.
static EstimateOptions estimateOptions;

static cl::opt<std::string>
    inputFile(cl::Positional,
              cl::desc("[model.mlir: S and L are read off its zero.params]"),
              cl::init(""), cl::cat(estimateCat));

static cl::opt<int64_t> params("params",
                               cl::desc("Total parameters S (without a model "
                                        "file)"),
                               cl::init(-1), cl::cat(estimateCat));
static cl::opt<int64_t> largestLayer(
    "largest-layer-params",
    cl::desc("Parameters of the largest layer L, the largest stage-3 gather "
             "group (required at stage 3 without a model file)"),
    cl::init(0), cl::cat(estimateCat));
static cl::opt<int64_t, true>
    gpusPerNode("gpus-per-node", cl::desc("GPUs per node"),
                cl::location(estimateOptions.gpusPerNode), cl::init(1),
                cl::cat(estimateCat));
static cl::alias ranksPerNode("ranks-per-node",
                              cl::desc("Alias for --gpus-per-node"),
                              cl::aliasopt(gpusPerNode), cl::cat(estimateCat));
static cl::opt<int64_t, true>
    nodes("nodes",
          cl::desc("Nodes; with more than one, the "
                   "per-link traffic of the stage's "
                   "collectives within and across nodes"),
          cl::location(estimateOptions.nodes), cl::init(1),
          cl::cat(estimateCat));
static cl::opt<int64_t, true> stage("stage",
                                    cl::desc("ZeRO stage: 0, 1, 2 or 3"),
                                    cl::location(estimateOptions.stage),
                                    cl::init(-1), cl::cat(estimateCat));
static cl::opt<std::string, true>
    dtype("dtype",
          cl::desc("Training precision: bf16, fp16 or "
                   "fp32"),
          cl::location(estimateOptions.dtype), cl::init("bf16"),
          cl::cat(estimateCat));
static cl::opt<std::string, true>
    target("target",
           cl::desc("With a model file: the backend it will train on, as "
                    "zero-compile --target (cpu or cuda; cuda pads a 16-bit "
                    "step's vocabulary to a multiple of 64 rows, and the model "
                    "is counted and planned padded)"),
           cl::location(estimateOptions.target), cl::init("cpu"),
           cl::cat(estimateCat));
static cl::opt<std::string> optimizer(
    "optimizer",
    cl::desc("Without a model file: the optimizer whose states are counted, "
             "a row of optimizers.def (adam, adamw, lion, sgd, muon or "
             "adafactor; default adamw, DeepSpeed's), with every state it may "
             "keep (sgd: with momentum; adafactor: an fp32 per parameter, its "
             "unfactored variance); a model file's train step names its own"),
    cl::init(""), cl::cat(estimateCat));
static cl::opt<bool> bf16Masters(
    "bf16-masters",
    cl::desc("Without a model file: the bf16 parameters are their own "
             "masters (DeepSpeed's bf16.bf16_master_weights_and_grads; no "
             "fp32 master copy); a model file's train step says so itself "
             "(#zero.optimizer's bf16_masters)"),
    cl::init(false), cl::cat(estimateCat));
static cl::opt<int64_t, true>
    alignment("alignment",
              cl::desc("Partition padding: S is rounded up to a multiple of "
                       "ranks * alignment"),
              cl::location(estimateOptions.alignment), cl::init(2),
              cl::cat(estimateCat));
static cl::opt<int64_t, true> reduceBucketSize(
    "reduce-bucket-size",
    cl::desc("Elements per gradient bucket (DeepSpeed reduce_bucket_size)"),
    cl::location(estimateOptions.reduceBucketSize), cl::init(500000000),
    cl::cat(estimateCat));
static cl::opt<int64_t, true>
    allgatherBucketSize("allgather-bucket-size",
                        cl::desc("Elements per post-step all-gather (DeepSpeed "
                                 "allgather_bucket_size)"),
                        cl::location(estimateOptions.allgatherBucketSize),
                        cl::init(500000000), cl::cat(estimateCat));
static cl::opt<int64_t, true> prefetchBucketSize(
    "prefetch-bucket-size",
    cl::desc("Stage 3: elements gathered ahead of use (DeepSpeed "
             "stage3_prefetch_bucket_size; 0 = no prefetch window)"),
    cl::location(estimateOptions.prefetchBucketSize), cl::init(0),
    cl::cat(estimateCat));
static cl::opt<bool, true> overlapComm(
    "overlap-comm",
    cl::desc("Two alternating bucket buffers (DeepSpeed overlap_comm)"),
    cl::location(estimateOptions.overlapComm), cl::init(false),
    cl::cat(estimateCat));
static cl::opt<bool, true> cpuOffload(
    "cpu-offload",
    cl::desc("Stages 2-3: DeepSpeed's estimate and ours with the optimizer "
             "states in host memory (offload_optimizer=cpu; the estimators' "
             "cpu_offload)"),
    cl::location(estimateOptions.deepspeed.cpuOffload), cl::init(false),
    cl::cat(estimateCat));
static cl::opt<bool, true> cpuOffloadParams(
    "cpu-offload-params",
    cl::desc("Stage 3, with --cpu-offload: DeepSpeed's estimate and ours "
             "with the parameters in host memory too (offload_param=cpu; "
             "cpu_offload_params; the compiler's offload-param=cpu)"),
    cl::location(estimateOptions.deepspeed.cpuOffloadParams), cl::init(false),
    cl::cat(estimateCat));
static cl::opt<bool>
    zeroInit("zero-init",
             cl::desc("Stage 3: the model is built partitioned under "
                      "deepspeed.zero.Init, DeepSpeed's default (zero_init)"),
             cl::init(true), cl::cat(estimateCat));
static cl::opt<bool>
    noZeroInit("no-zero-init",
               cl::desc("Stage 3: the model is built whole on every rank's "
                        "host first (zero_init=False)"),
               cl::init(false), cl::cat(estimateCat));
static cl::opt<std::string> additionalBufferFactor(
    "additional-buffer-factor",
    cl::desc("Stages 2-3: DeepSpeed's additional_buffer_factor, which scales "
             "its host-memory estimate (default 1.5; written as a Python "
             "literal: 2 is an int, 2.0 a float)"),
    cl::init("1.5"), cl::cat(estimateCat));
static cl::opt<std::string, true> deviceMemory(
    "device-memory",
    cl::desc("Device memory of one GPU for the fit verdict, overriding the "
             "preset's: B, KiB, MiB, GiB, TiB or decimal KB, MB, GB, TB "
             "(e.g. 24GiB)"),
    cl::location(estimateOptions.deviceMemory), cl::init(""),
    cl::cat(estimateCat));
static cl::opt<int64_t, true>
    hpzPartitionSize("hpz-partition-size",
                     cl::desc("With --zeropp: the hpZ partition size (default: "
                              "--gpus-per-node)"),
                     cl::location(estimateOptions.hpzPartitionSize),
                     cl::init(0), cl::cat(estimateCat));
static cl::opt<int64_t, true> micsShardSize(
    "mics-shard-size",
    cl::desc("With --zeropp: the MiCS shard size (default: --gpus-per-node)"),
    cl::location(estimateOptions.micsShardSize), cl::init(0),
    cl::cat(estimateCat));

static cl::opt<int64_t, true> epSize(
    "ep-size",
    cl::desc("Expert parallelism (zero-compile --ep-size, DeepSpeed "
             "expert_parallel.autoep_size), with a model file with MoE "
             "layers: our model states with each layer's experts split over "
             "this many ranks and partitioned over the ranks holding the "
             "same experts, the dense parameters over all (default 1: off)"),
    cl::location(estimateOptions.epSize), cl::init(1), cl::cat(estimateCat));

static zero::SharedToolOptions shared(
    estimateCat,
    {/*hardware=*/"Hardware preset whose device memory the fit verdict uses: "
                  "a100-40gb, a100-80gb, l4, rtx-4090, h100-sxm, "
                  "h100-sxm-96gb, h100-pcie, h200-sxm (or h200), mi300x or "
                  "cpu (none)",
     /*interNodeBandwidth=*/
     "Line rate of each of the --hardware preset's links between nodes, in "
     "Gb/s each way (400 or 400Gb/s; default: the preset's), for the time of "
     "the traffic across nodes",
     /*zeropp=*/
     "Stage 3 with a model file: compile it under ZeRO-3, hpZ, MiCS, qwZ, qgZ "
     "(across nodes) and their combinations and print each one's memory and "
     "bytes within and across nodes per rank beside DeepSpeed's and the "
     "papers' formulas",
     /*format=*/"Output: text or json"});

namespace {

/// The optimizers.def rows' names, as --optimizer spells them (those that
/// can keep bf16 parameters as their own masters, with `bf16MastersOnly`).
std::string optimizerNames(bool bf16MastersOnly = false) {
  std::string names;
  for (uint32_t i = 0; std::optional<mlir::zero::OptimizerKind> kind =
                           mlir::zero::symbolizeOptimizerKind(i);
       ++i)
    if (!bf16MastersOnly ||
        mlir::zero::hasBf16MasterUpdate(*kind, mlir::zero::StatePrecision::f32))
      names += (names.empty() ? "" : ", ") +
               mlir::zero::stringifyOptimizerKind(*kind).str();
  return names;
}

/// The first problem with the options, if any.
std::optional<std::string> validate() {
  if (!inputFile.empty() &&
      (params.getNumOccurrences() || largestLayer.getNumOccurrences()))
    return "--params and --largest-layer-params describe a hypothetical "
           "model; with a model file ('" +
           inputFile + "') S and L are read from it, so give one or the other";
  if (!inputFile.empty() && optimizer.getNumOccurrences())
    return "--optimizer is for a model given as numbers; the train step of '" +
           inputFile + "' names its own optimizer";
  if (!inputFile.empty() && bf16Masters.getNumOccurrences())
    return "--bf16-masters is for a model given as numbers; the train step "
           "of '" +
           inputFile + "' says whether its bf16 parameters are the masters";
  if (bf16Masters && estimateOptions.dtype != "bf16")
    return "--bf16-masters needs --dtype bf16 (got " + estimateOptions.dtype +
           "), as DeepSpeed's bf16_master_weights_and_grads needs bf16";
  if (!optimizer.empty() && !mlir::zero::symbolizeOptimizerKind(optimizer))
    return "--optimizer must be one of " + optimizerNames() + " (got '" +
           optimizer + "')";
  // The compiler's rule (#zero.optimizer's verifier), for the states a
  // model given as numbers keeps: f32.
  if (bf16Masters) {
    mlir::zero::OptimizerKind kind =
        optimizer.empty() ? mlir::zero::OptimizerKind::adamw
                          : *mlir::zero::symbolizeOptimizerKind(optimizer);
    if (!mlir::zero::hasBf16MasterUpdate(kind, mlir::zero::StatePrecision::f32))
      return "--bf16-masters: " +
             mlir::zero::stringifyOptimizerKind(kind).str() +
             " keeps fp32 masters, as the compiler and zero-model-gen do "
             "(bf16 parameters are their own masters only with " +
             optimizerNames(/*bf16MastersOnly=*/true) + ")";
  }
  if (inputFile.empty() && params.getNumOccurrences() == 0)
    return std::string("--params or a model file is required (total "
                       "parameters S)");
  // JSON strings are UTF-8; a Linux path may be any bytes.
  if (shared.isJson())
    if (std::optional<size_t> bad = ::zero::findInvalidUTF8(inputFile))
      return ::zero::describeInvalidUTF8("the model file's path ", inputFile,
                                         *bad) +
             " (--format json writes it as model_file; rename the file or "
             "use --format text)";
  if (params.getNumOccurrences() && (params <= 0 || params > kMaxParams))
    return "--params must be between 1 and " + std::to_string(kMaxParams) +
           " (got " + std::to_string(params) + ")";
  if (stage.getNumOccurrences() == 0)
    return std::string("--stage is required (0, 1, 2 or 3)");
  if (stage < 0 || stage > 3)
    return "--stage must be 0, 1, 2 or 3 (got " + std::to_string(stage) + ")";
  if (gpusPerNode < 1)
    return "--gpus-per-node must be at least 1 (got " +
           std::to_string(gpusPerNode) + ")";
  if (nodes < 1)
    return "--nodes must be at least 1 (got " + std::to_string(nodes) + ")";
  if (gpusPerNode > (int64_t(1) << 20) || nodes > (int64_t(1) << 20))
    return std::string("--gpus-per-node and --nodes must be at most 2^20");
  if (inputFile.empty() && (largestLayer < 0 || largestLayer > params))
    return "--largest-layer-params must be between 0 and --params (got " +
           std::to_string(largestLayer) + ")";
  if (inputFile.empty() && stage == 3 && largestLayer == 0)
    return std::string("--largest-layer-params is required at stage 3 "
                       "(DeepSpeed's estimator counts 4 bytes per parameter "
                       "of the largest layer)");
  const std::string &precision = estimateOptions.dtype;
  if (precision != "bf16" && precision != "fp16" && precision != "fp32")
    return "--dtype must be bf16, fp16 or fp32 (got '" + precision + "')";
  if (estimateOptions.target != "cpu" && estimateOptions.target != "cuda")
    return "--target must be cpu or cuda (got '" + estimateOptions.target +
           "')";
  if (alignment < 1 || alignment > (int64_t(1) << 20))
    return "--alignment must be between 1 and 2^20 (got " +
           std::to_string(alignment) + ")";
  for (auto *opt : {&reduceBucketSize, &allgatherBucketSize})
    if (*opt < 1)
      return "--" + opt->ArgStr.str() + " must be at least 1 (got " +
             std::to_string(*opt) + ")";
  if (prefetchBucketSize < 0)
    return "--prefetch-bucket-size must not be negative (got " +
           std::to_string(prefetchBucketSize) + ")";
  bool offloadFlags =
      cpuOffload.getNumOccurrences() || cpuOffloadParams.getNumOccurrences() ||
      zeroInit.getNumOccurrences() || noZeroInit.getNumOccurrences() ||
      additionalBufferFactor.getNumOccurrences();
  if (stage < 2 && offloadFlags)
    return "--cpu-offload, --cpu-offload-params, --zero-init, "
           "--no-zero-init and --additional-buffer-factor are the options "
           "of DeepSpeed's estimators, which exist for stages 2 and 3 only "
           "(got --stage " +
           std::to_string(stage) + ")";
  if (stage == 2 && cpuOffloadParams)
    return std::string("--cpu-offload-params needs --stage 3: DeepSpeed "
                       "offloads parameters (offload_param) at stage 3 only");
  if (stage == 2 &&
      (zeroInit.getNumOccurrences() || noZeroInit.getNumOccurrences()))
    return std::string("--zero-init and --no-zero-init need --stage 3: "
                       "deepspeed.zero.Init partitions the model at stage "
                       "3 only");
  if (cpuOffloadParams && !cpuOffload)
    return std::string(
        "--cpu-offload-params needs --cpu-offload: DeepSpeed's estimator "
        "has no branch for parameter offload without optimizer offload "
        "(it would ignore cpu_offload_params)");
  if (zeroInit.getNumOccurrences() && noZeroInit.getNumOccurrences())
    return std::string("--zero-init and --no-zero-init contradict each "
                       "other; give one");
  std::optional<PyNumber> factor = PyNumber::parse(additionalBufferFactor);
  if (!factor || !(factor->toDouble() > 0) ||
      !std::isfinite(factor->toDouble()))
    return "--additional-buffer-factor must be a positive finite number "
           "(got '" +
           additionalBufferFactor + "')";
  if (!shared.isValidFormat())
    return "--format must be text or json (got '" + shared.format + "')";
  if (epSize < 1)
    return "--ep-size must be at least 1 (got " + std::to_string(epSize) + ")";
  if (epSize > 1 && inputFile.empty())
    return std::string("--ep-size splits the experts of a model: give a "
                       "model file with MoE layers, not --params");
  if ((hpzPartitionSize.getNumOccurrences() ||
       micsShardSize.getNumOccurrences()) &&
      !shared.zeropp)
    return std::string("--hpz-partition-size and --mics-shard-size choose "
                       "the options --zeropp compares; give --zeropp");
  if (shared.zeropp && stage != 3)
    return "--zeropp compares ZeRO++ and MiCS, which are options of stage "
           "3 (got --stage " +
           std::to_string(stage) + ")";
  if (shared.zeropp && inputFile.empty())
    return std::string("--zeropp compiles the model under each option: give "
                       "a model file, not --params");
  int64_t ranks = gpusPerNode * nodes;
  if (hpzPartitionSize.getNumOccurrences() &&
      (hpzPartitionSize < 2 || ranks % hpzPartitionSize))
    return "--hpz-partition-size must be above 1 and divide the " +
           std::to_string(ranks) + " ranks (got " +
           std::to_string(hpzPartitionSize) + ")";
  if (micsShardSize.getNumOccurrences() &&
      (micsShardSize < 1 || micsShardSize >= ranks || ranks % micsShardSize))
    return "--mics-shard-size must divide the " + std::to_string(ranks) +
           " ranks and be fewer (got " + std::to_string(micsShardSize) + ")";
  if (!shared.hardware.empty() &&
      !mlir::zero::lookupHardwarePreset(shared.hardware))
    return "--hardware: unknown preset '" + shared.hardware +
           "' (known: " + mlir::zero::getHardwarePresetNames() + ")";
  if (!shared.interNodeBandwidth.empty()) {
    if (shared.hardware.empty())
      return std::string("--inter-node-bandwidth overrides the network of "
                         "a --hardware preset; give --hardware");
    mlir::zero::HardwarePreset rates =
        *mlir::zero::lookupHardwarePreset(shared.hardware);
    std::string error;
    if (failed(mlir::zero::applyInterNodeBandwidth(
            rates, shared.interNodeBandwidth, error)))
      return "--inter-node-bandwidth: " + error;
  }
  const std::string &memory = estimateOptions.deviceMemory;
  if (!memory.empty() && !mlir::zero::parseByteSize(memory))
    return "--device-memory: bad byte count '" + memory +
           "' (expected a positive count with an optional unit B, KiB, MiB, "
           "GiB, TiB, KB, MB, GB or TB, e.g. 24GiB)";
  return std::nullopt;
}

/// The options, checked by validate(): those stored in estimateOptions and
/// those derived from several or parsed.
EstimateOptions getOptions() {
  EstimateOptions options = estimateOptions;
  options.deepspeed.zeroInit = zeroInit && !noZeroInit;
  options.deepspeed.additionalBufferFactor =
      *PyNumber::parse(additionalBufferFactor);
  options.hardware = shared.hardware;
  options.interNodeBandwidth = shared.interNodeBandwidth;
  options.zeropp = shared.zeropp;
  if (!optimizer.empty())
    options.optimizer = *mlir::zero::symbolizeOptimizerKind(optimizer);
  options.bf16Masters = bf16Masters;
  return options;
}

/// S and the largest stage-3 group of the model in `path` (countModel), with
/// diagnostics that name the file and place.
std::optional<ModelCounts> readModel(StringRef path,
                                     const EstimateOptions &options) {
  mlir::DialectRegistry registry;
  zero::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      zero::parseModelFile(path, sourceMgr, context, error);
  if (!module) {
    if (!error.empty())
      WithColor::error(errs(), "zero-estimate") << error << "\n";
    return std::nullopt;
  }
  return countModel(*module, path, options);
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(estimateCat);
  // `--zeropp false` as --help shows a flag with its value.
  ::zero::FlagArgs args(argc, argv);
  cl::ParseCommandLineOptions(
      args.argc(), args.argv(),
      "DeepSpeed's model-state memory estimates, byte for byte, at its "
      "offload options (--cpu-offload, --cpu-offload-params, --no-zero-init, "
      "--additional-buffer-factor) and as its all_cold table over them, "
      "beside zero-mlir's per-rank accounting (device and pinned host "
      "memory, without offload, with the optimizer offloaded and with the "
      "parameters offloaded too), for a "
      "model file "
      "(zero-estimate model.mlir --stage 3 ...) "
      "or numbers (--params, --largest-layer-params), and whether it fits "
      "a device (--hardware, --device-memory)\n");
  if (std::optional<std::string> error = validate()) {
    WithColor::error(errs(), "zero-estimate") << *error << "\n";
    return 1;
  }
  EstimateOptions options = getOptions();
  std::optional<ModelCounts> model;
  int64_t s = params, l = largestLayer;
  if (!inputFile.empty()) {
    model = readModel(inputFile, options);
    if (!model)
      return 1;
    s = model->params;
    l = model->largestGroup;
  }
  Expected<Estimate> e = computeEstimate(s, l, std::move(model), options);
  if (!e) {
    WithColor::error(errs(), "zero-estimate")
        << toString(e.takeError()) << "\n";
    return 1;
  }
  if (shared.isJson())
    printEstimateJson(*e, outs());
  else
    printEstimateText(*e, outs());
  return 0;
}
