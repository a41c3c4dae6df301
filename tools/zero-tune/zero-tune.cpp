//===- zero-tune.cpp - The fastest ZeRO configuration that fits -----------===//
//
// Part of the zero-mlir project.
//
// Searches stage x accumulation (at the model's global batch) x remat
// policy x bucket sizes x overlap x the stage-3 prefetch, live and
// persistence thresholds and frozen gather policy, and with --offload the
// optimizer and parameter offload (to a host budget), and with --zeropp
// the ZeRO++ and MiCS choices of stage 3, with the memory
// planner and the cost model (lib/Tuning), prints the fastest
// configurations that fit the budget, and writes the best as a DeepSpeed
// ds_config.json that `zero-compile --config` compiles to the same plan.
// This file is the command line: the search axes' options come from
// zero/Tuning/Axes.def, and what is printed from lib/Tuning/Print.cpp.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/InitAll.h"
#include "zero/Support/CommandLine.h"
#include "zero/Support/ModelFile.h"
#include "zero/Support/ToolOptions.h"
#include "zero/Support/UTF8.h"
#include "zero/Tuning/Axes.h"
#include "zero/Tuning/MaxSeq.h"
#include "zero/Tuning/Print.h"
#include "zero/Tuning/Tuner.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <numeric>
#include <string>

using namespace llvm;
using namespace mlir::zero;

static cl::OptionCategory tuneCat("zero-tune options");

/// The search's options, stored where the tuner reads them; getTuneOptions()
/// adds the checked and parsed ones.
static TuneOptions tuneOptions;

static cl::list<std::string>
    inputFiles(cl::Positional, cl::desc("<model.mlir>"), cl::cat(tuneCat));
static cl::opt<int64_t, true>
    worldSize("world-size", cl::desc("Number of data-parallel ranks"),
              cl::location(tuneOptions.worldSize), cl::init(0),
              cl::cat(tuneCat));
static cl::opt<int64_t, true> ranksPerNode(
    "ranks-per-node",
    cl::desc("Ranks per node, a divisor of --world-size (default 0: every "
             "rank on one node); collectives across nodes are priced on the "
             "preset's inter-node fabric"),
    cl::location(tuneOptions.ranksPerNode), cl::init(0), cl::cat(tuneCat));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Bytes one rank may use: a number and an optional unit KiB, "
             "MiB, GiB, TiB or decimal KB, MB, GB, TB, without a space "
             "(e.g. 40GiB); default: the preset's device memory"),
    cl::cat(tuneCat));
namespace {
/// An axis's value when not given, none for an unset one.
struct AxisInit {
  StringRef value;
  template <class Opt>
  void apply(Opt &o) const {
    if (!value.empty())
      o.setInitialValue(value.str());
  }
};
} // namespace

/// One option per search axis, in Axes.def's order.
#define TUNE_AXIS(Id, Flag, Init, Expected, Help)                              \
  static cl::opt<std::string> axis##Id(Flag, cl::desc(Help), AxisInit{Init},   \
                                       cl::cat(tuneCat));
#include "zero/Tuning/Axes.def"
static cl::opt<std::string> *const axisOptions[] = {
#define TUNE_AXIS(Id, Flag, Init, Expected, Help) &axis##Id,
#include "zero/Tuning/Axes.def"
};

static cl::opt<std::string, true>
    target("target",
           cl::desc("The backend the step will train on, as zero-compile "
                    "--target (cpu or cuda; cuda pads a 16-bit step's "
                    "vocabulary to a multiple of 64 rows unless its loss is "
                    "chunked, and the candidates are planned so)"),
           cl::location(tuneOptions.target), cl::init("cpu"), cl::cat(tuneCat));
static cl::opt<std::string, true>
    nvmePath("nvme-path",
             cl::desc("Directory of the ranks' NVMe swap files, for "
                      "--offload=nvme (offload_optimizer.nvme_path and "
                      "offload_param.nvme_path)"),
             cl::location(tuneOptions.nvmePath), cl::cat(tuneCat));
static cl::opt<std::string> docLengths(
    "doc-lengths",
    cl::desc("The packed rows' document lengths (zero-data --pack "
             "--doc-lengths FILE): each candidate's attention over packed "
             "rows priced by them"),
    cl::cat(tuneCat));
static cl::opt<std::string> hostBudget(
    "host-budget",
    cl::desc("Pinned host bytes one rank may use for offloaded states "
             "(its host_peak_bytes; a node's host memory divided by its "
             "ranks), written like --memory-budget; default: no bound"),
    cl::cat(tuneCat));
static cl::opt<int64_t, true>
    top("top",
        cl::desc("How many (stage, accumulation, offload) groups to rank, "
                 "each by its best configuration (default 10)"),
        cl::location(tuneOptions.top), cl::init(10), cl::cat(tuneCat));
static cl::opt<bool, true> withinBand(
    "within-band",
    cl::desc("Where the preset's GPU has a validation band "
             "(docs/CostModel.md), pick the smallest peak among the ranked "
             "candidates within the band of the fastest, and it within "
             "theirs (default true; false: the fastest)"),
    cl::location(tuneOptions.preferSmallerPeakWithinBand), cl::init(true),
    cl::cat(tuneCat));
static cl::opt<std::string>
    outputFile("o",
               cl::desc("Write the best configuration as a DeepSpeed "
                        "ds_config.json"),
               cl::cat(tuneCat));
static cl::opt<bool> maxSeq(
    "max-seq",
    cl::desc("Find the longest sequence at which a configuration fits: the "
             "search at lengths the model is built again at from the options "
             "zero-model-gen recorded on it (--record-spec), doubling from "
             "its own length until nothing fits, then bisecting; prints each "
             "length searched and the best configuration at the longest"),
    cl::init(false), cl::cat(tuneCat));
static cl::opt<int64_t> seqMultiple(
    "seq-multiple",
    cl::desc("With --max-seq, the lengths searched are multiples of this "
             "and of the sequence-parallel sizes the search may pick "
             "(--sp-size, else --world-size) (default 1024)"),
    cl::init(1024), cl::cat(tuneCat));
static zero::SharedToolOptions shared(
    tuneCat,
    {/*hardware=*/"Hardware preset of the cost model (a100-40gb, a100-80gb, "
                  "l4, rtx-4090, h100-sxm, h100-sxm-96gb, h100-pcie, h200-sxm, "
                  "mi300x, cpu)",
     /*interNodeBandwidth=*/
     "Line rate of each of the preset's links between nodes, in Gb/s each "
     "way (400 or 400Gb/s; default: the preset's)",
     /*zeropp=*/
     "Also search ZeRO++ and MiCS at stage 3: the hpZ partition size (the "
     "divisors of --ranks-per-node, across nodes), the MiCS shard size (the "
     "divisors of --world-size), qwZ, and qgZ (across nodes, not with MiCS); "
     "each choice is ranked as a group of its own",
     /*format=*/"Output: text (a table) or json (an array, best first)"});

static int fail(const Twine &msg) {
  WithColor::error(errs(), "zero-tune") << msg << "\n";
  return 1;
}

/// The byte count of `text` (--memory-budget, --host-budget), or none after
/// reporting why not.
static std::optional<int64_t> parseBudget(StringRef option,
                                          const std::string &text) {
  std::string why;
  std::optional<int64_t> bytes = parseMemoryBudget(text, why);
  if (!bytes)
    fail("bad --" + option + " '" + text + "': " + why);
  return bytes;
}

/// Checks the input file's argument; false after reporting the problem.
static bool checkInputFiles() {
  if (inputFiles.empty()) {
    fail("no input file (zero-tune model.mlir --world-size N "
         "--hardware PRESET ...; --help lists the options)");
    return false;
  }
  if (inputFiles.size() > 1) {
    // `--memory-budget 40 GB` leaves the unit behind as an argument.
    std::string hint;
    if (isStrayByteUnit(inputFiles[1]))
      hint = " (a memory budget is written without a space, as in 40GB)";
    fail("one input file expected, got '" + inputFiles[0] + "' and '" +
         inputFiles[1] + "'" + hint);
    return false;
  }
  // `-o ''` would otherwise write nothing and say nothing.
  if (outputFile.getNumOccurrences() && outputFile.empty()) {
    fail("-o: expected a file name, got an empty one");
    return false;
  }
  return true;
}

/// Checks the ranks and the hardware, and sets tuneOptions' hardware to
/// `rates` (the preset with --inter-node-bandwidth applied) and its memory
/// budget; false after reporting the first problem.
static bool checkHardware(HardwarePreset &rates) {
  if (worldSize < 1) {
    fail(worldSize.getNumOccurrences()
             ? "--world-size must be >= 1, got " + Twine(tuneOptions.worldSize)
             : Twine("--world-size N is required"));
    return false;
  }
  if (shared.hardware.empty()) {
    fail("--hardware PRESET is required (known: " + getHardwarePresetNames() +
         ")");
    return false;
  }
  const HardwarePreset *preset = lookupHardwarePreset(shared.hardware);
  if (!preset) {
    fail("unknown hardware preset '" + shared.hardware +
         "' (known: " + getHardwarePresetNames() + ")");
    return false;
  }
  int64_t perNode = tuneOptions.ranksPerNode;
  if (perNode < 0 || (perNode > 0 && tuneOptions.worldSize % perNode)) {
    fail("--ranks-per-node " + Twine(perNode) + " must divide --world-size " +
         Twine(tuneOptions.worldSize) + " (0: every rank on one node)");
    return false;
  }
  rates = *preset;
  std::string why;
  if (failed(applyInterNodeBandwidth(rates, shared.interNodeBandwidth, why))) {
    fail("--inter-node-bandwidth: " + why);
    return false;
  }
  tuneOptions.hardware = &rates;
  if (!docLengths.empty()) {
    static std::optional<DocumentLengths> documents;
    llvm::Expected<DocumentLengths> read = readDocumentLengths(docLengths);
    if (!read) {
      fail("--doc-lengths: " + toString(read.takeError()));
      return false;
    }
    documents = std::move(*read);
    tuneOptions.documents = &*documents;
  }
  tuneOptions.memoryBudget = rates.deviceMemoryBytes;
  if (memoryBudget.getNumOccurrences()) {
    std::optional<int64_t> bytes = parseBudget("memory-budget", memoryBudget);
    if (!bytes)
      return false;
    tuneOptions.memoryBudget = *bytes;
  } else if (tuneOptions.memoryBudget == 0) {
    fail("--memory-budget is required with the " + rates.name +
         " preset, which has no device memory");
    return false;
  }
  return true;
}

/// Checks the search's choices (remat, offload, the host budget, --top and
/// --format) into tuneOptions; false after reporting the first problem.
static bool checkSearch() {
  for (auto [axis, option] : llvm::zip_equal(getTuneAxes(), axisOptions)) {
    std::string error;
    if (failed(parseTuneAxis(axis, *option, option->getNumOccurrences() != 0,
                             tuneOptions, error))) {
      fail(error);
      return false;
    }
  }
  OffloadDevice offloadTier = tuneOptions.offload;
  const std::string &path = tuneOptions.nvmePath;
  if (offloadTier == OffloadDevice::nvme && path.empty()) {
    fail("--offload=nvme needs --nvme-path DIR, the directory of the "
         "ranks' swap files");
    return false;
  }
  if (!path.empty() && offloadTier != OffloadDevice::nvme) {
    fail("--nvme-path is for --offload=nvme, and the offload is " +
         stringifyOffloadDevice(offloadTier));
    return false;
  }
  if (std::optional<size_t> bad = ::zero::findInvalidUTF8(path)) {
    fail(::zero::describeInvalidUTF8("--nvme-path ", path, *bad) +
         " (it goes into ds_config.json's nvme_path, and JSON is UTF-8)");
    return false;
  }
  if (hostBudget.getNumOccurrences()) {
    if (offloadTier == OffloadDevice::none) {
      fail("--host-budget bounds offloaded states: give --offload "
           "cpu or nvme");
      return false;
    }
    tuneOptions.hostBudget = parseBudget("host-budget", hostBudget);
    if (!tuneOptions.hostBudget)
      return false;
  }
  if (tuneOptions.top < 1) {
    fail("--top must be >= 1, got " + Twine(tuneOptions.top));
    return false;
  }
  if (tuneOptions.target != "cpu" && tuneOptions.target != "cuda") {
    fail("--target must be cpu or cuda, got '" + tuneOptions.target + "'");
    return false;
  }
  if (seqMultiple.getNumOccurrences() && !maxSeq) {
    fail("--seq-multiple " + Twine(seqMultiple) +
         " sets the lengths --max-seq searches; without --max-seq nothing "
         "is searched by length (give --max-seq, or leave it out)");
    return false;
  }
  if (seqMultiple < 1) {
    fail("--seq-multiple must be >= 1, got " + Twine(seqMultiple));
    return false;
  }
  if (!shared.isValidFormat()) {
    fail("--format must be text or json, got '" + shared.format + "'");
    return false;
  }
  tuneOptions.zeropp = shared.zeropp;
  return true;
}

/// Writes the best configuration of `result` to -o, if given, as a
/// ds_config.json; false after reporting why it could not.
static bool writeBest(const TuneResult &result) {
  if (outputFile.empty())
    return true;
  std::error_code ec;
  ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
  if (ec) {
    fail("cannot write '" + outputFile + "': " + ec.message());
    return false;
  }
  out.os() << formatv("{0:2}", toDeepSpeedConfig(result.ranked.front().config,
                                                 result.globalBatch,
                                                 tuneOptions.worldSize))
           << "\n";
  out.keep();
  return true;
}

/// Lengths --max-seq does not search past.
static constexpr int64_t kMaxSeqLimit = int64_t(1) << 30;

/// --max-seq: the longest sequence at which a configuration of the model
/// `module` records fits, the lengths searched and the best configuration
/// there.
static int runMaxSeq(mlir::ModuleOp module, mlir::MLIRContext &context) {
  const TuneOptions &options = tuneOptions;
  StringRef file = inputFiles.front();
  ModelSpecAttr spec = getModelSpec(module);
  if (!spec)
    return fail("--max-seq: '" + file +
                "' has no model_gen.spec, the options zero-model-gen built "
                "it from, with which it is built again at each length "
                "(generate it with zero-model-gen --record-spec)");
  if (spec.getKind() == ModelKind::mlp)
    return fail("--max-seq: '" + file +
                "' is an mlp (model_gen.spec), which has no sequence");
  mlir::FailureOr<ModelGenOptions> spelled = getModelGenOptions(
      spec, [&] { return mlir::emitError(module.getLoc()); });
  if (failed(spelled))
    return 1;
  // Every sequence-parallel size the search may pick divides the length.
  int64_t multiple =
      std::lcm(seqMultiple.getValue(),
               options.spSize ? *options.spSize : options.worldSize);
  // The generator reports at no location: name the file and its spec.
  mlir::ScopedDiagnosticHandler specErrors(
      &context, [&](mlir::Diagnostic &diag) -> mlir::LogicalResult {
        if (!isa<mlir::UnknownLoc>(diag.getLocation()))
          return mlir::failure();
        fail("--max-seq: building '" + file +
             "' again from its model_gen.spec: " + diag.str());
        return mlir::success();
      });
  // The search builds the spec's model: the file must be that model (a spec
  // left on another model would answer for the spec's).
  ModelGenOptions own = *spelled;
  own.recordSpec = false;
  mlir::OwningOpRef<mlir::ModuleOp> built = generateModel(&context, own);
  if (!built)
    return 1;
  if (std::string mismatch = describeSpecMismatch(module, *built);
      !mismatch.empty())
    return fail("--max-seq: '" + file +
                "' is not the model its model_gen.spec builds: " + mismatch +
                " (the lengths would be searched for the spec's model; "
                "generate the file and its spec together with zero-model-gen "
                "--record-spec)");
  auto start = std::chrono::steady_clock::now();
  mlir::FailureOr<MaxSeqResult> found =
      findMaxSequence(&context, *spelled, options, multiple, kMaxSeqLimit);
  if (failed(found))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::string probes = describeMaxSeqProbes(*found, seconds);
  if (!found->best) {
    errs() << "zero-tune: " << probes << "\n";
    fail(formatv("--max-seq: nothing fits at {0} tokens, the shortest "
                 "length searched",
                 found->firstMissSeq));
    return fail(describeTuneNoFit(*found->firstMiss, options));
  }
  const TuneResult &best = *found->best;
  std::string verdict = describeMaxSeqVerdict(*found);
  if (!writeBest(best))
    return 1;
  if (shared.isJson()) {
    errs() << "zero-tune: " << probes << "\nzero-tune: " << verdict << "\n";
    outs() << formatv("{0:2}", maxSeqToJson(*found, options)) << "\n";
    return 0;
  }
  outs() << "zero-tune --max-seq: " << probes << "\n" << verdict << "\n\n";
  std::string summary =
      formatv("at {0} tokens: searched {1} configurations in {2} groups",
              found->maxSeq, best.evaluated, best.groups)
          .str();
  printTuneText(best, options, summary, outputFile, outs());
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(tuneCat);
  // `--zeropp false` as --help shows a flag with its value.
  ::zero::FlagArgs args(argc, argv);
  cl::ParseCommandLineOptions(
      args.argc(), args.argv(),
      "zero-tune: the ZeRO configuration that fits a memory budget and runs "
      "fastest, by the memory planner and the cost model\n\n"
      "  zero-tune model.mlir --world-size N --hardware PRESET "
      "[--memory-budget B] [--remat auto|none|selective|layer] "
      "[--loss-chunk auto|0|ROWS] [--sp-size auto|P] [--ep-size auto|P] "
      "[--tiled-mlp auto|0|K] [--offload-activations auto|none|cpu] "
      "[--offload none|cpu|nvme [--nvme-path DIR] [--host-budget B]] "
      "[--top K] [--format text|json] [-o best.json]\n"
      "  zero-tune model.mlir --max-seq [--seq-multiple N] --world-size N "
      "--hardware PRESET ...\n");
  HardwarePreset rates;
  if (!checkInputFiles() || !checkHardware(rates) || !checkSearch())
    return 1;

  mlir::DialectRegistry registry;
  zero::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      zero::parseModelFile(inputFiles.front(), sourceMgr, context, error);
  if (!module)
    return error.empty() ? 1 : fail(error);

  if (maxSeq)
    return runMaxSeq(*module, context);

  const TuneOptions &options = tuneOptions;
  auto start = std::chrono::steady_clock::now();
  mlir::FailureOr<TuneResult> result = tuneTrainStep(*module, options);
  if (failed(result))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  std::string summary = describeTuneSearch(*result, options, seconds);
  // Beside a JSON array or an error, the summary goes to stderr.
  if (shared.isJson() || result->ranked.empty()) {
    errs() << "zero-tune: " << summary << "\n";
    if (std::string note = getTuneEpNote(*result); !note.empty())
      errs() << "zero-tune: " << note << "\n";
  }
  if (shared.isJson() && !result->ranked.empty())
    if (std::string note = getTuneBandNote(*result); !note.empty())
      errs() << "zero-tune: " << note << "\n";
  if (result->ranked.empty())
    return fail(describeTuneNoFit(*result, options));

  if (!writeBest(*result))
    return 1;

  if (shared.isJson()) {
    json::Array array;
    int64_t rank = 0;
    for (const TuneCandidate &c : result->ranked)
      array.push_back(tuneCandidateToJson(c, ++rank, *result, options));
    outs() << formatv("{0:2}", json::Value(std::move(array))) << "\n";
    return 0;
  }
  printTuneText(*result, options, summary, outputFile, outs());
  return 0;
}
