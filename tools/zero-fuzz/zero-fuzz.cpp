//===- zero-fuzz.cpp - libFuzzer target for the zero-mlir compiler --------===//
//
// Part of the zero-mlir project.
//
// Treats the input bytes as .mlir text: parses it with the project's dialects,
// verifies it, and runs the compiler over it. Every crash, assertion,
// sanitizer report or hang (libFuzzer's -timeout) is a bug: malformed input
// must end in a diagnostic. Diagnostics are captured by a handler, not
// printed. Built only with -DZERO_ENABLE_FUZZER=ON (clang); see
// scripts/fuzz.sh and docs/reliability.md.
//
// What runs depends on a hash of the input, so that one corpus exercises
// every stage and several world sizes and options:
//   * input without zero.partition (a model): zero-pipeline at a stage 0-3
//     and a world size 1-8 (mostly a power of two) from the low bits of the
//     hash, with small bucket sizes, overlap-comm, reduce instead of
//     reduce-scatter, gradient accumulation and stage-3 thresholds chosen by
//     further bits, then zero-verify-schedule, zero-plan-memory and
//     zero-report (json or text), and for one input in two
//     convert-zero-to-runtime (what zero-compile runs);
//   * input with zero.partition (an already scheduled step, as the plan,
//     verifier and lowering tests): the same without zero-pipeline.
// Reports go to /dev/null. Two more properties abort (a finding): a pass that
// succeeds must leave valid IR (the module is verified after every pass), and
// a pass that fails must have reported an error.
//
//===----------------------------------------------------------------------===//

#include "zero/Conversion/Passes.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Pipelines/Pipeline.h"
#include "zero/InitAll.h"
#include "zero/Support/Nesting.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {

const DialectRegistry &getRegistry() {
  static const DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    ::zero::registerAllDialects(*r);
    return r;
  }();
  return *registry;
}

/// Consumes the bits of the input's hash.
class Bits {
public:
  explicit Bits(uint64_t h) : h(h) {}
  uint64_t take(unsigned n) {
    uint64_t v = h & ((uint64_t(1) << n) - 1);
    h >>= n;
    return v;
  }
  bool flag() { return take(1); }

private:
  uint64_t h;
};

/// The pipeline options the hash selects (printed by ZERO_FUZZ_VERBOSE, so
/// that a finding replays with zero-opt --zero-pipeline="...").
std::string pipelineOptions(Bits &bits, int64_t paramElements) {
  int64_t stage = bits.take(2);
  // Mostly powers of two, which divide the seeds' batches; sometimes any
  // size up to 8.
  int64_t worldSize = bits.take(3) == 0 ? 1 + bits.take(3)
                                        : int64_t(1) << bits.take(2);
  std::string o = "stage=" + std::to_string(stage) +
                  " world-size=" + std::to_string(worldSize);
  // Small buckets and thresholds split gradients and layers across buckets,
  // frees and prefetches, where the interesting corner cases are. At most
  // ~256 buckets, though: a bucket of 1 element on a seed model of 10^6
  // parameters makes 10^6 collectives, which takes longer than -timeout
  // without being a bug (the schedule is linear in the number of buckets;
  // the verifier and the memory plan are quadratic in the number of slices
  // of one gradient).
  if (bits.flag()) {
    int64_t floor = paramElements / 256;
    o += " reduce-bucket-size=" +
         std::to_string(std::max<int64_t>(1 + bits.take(7), floor)) +
         " allgather-bucket-size=" +
         std::to_string(std::max<int64_t>(1 + bits.take(7), floor));
  }
  if (bits.flag())
    o += " overlap-comm=true";
  if (bits.flag())
    o += " reduce-scatter=false";
  if (bits.flag())
    o += " contiguous-gradients=false";
  if (bits.flag())
    o += " gradient-accumulation-steps=" + std::to_string(1 << bits.take(2));
  if (bits.flag())
    o += " param-persistence-threshold=" + std::to_string(bits.take(6)) +
         " max-reuse-distance=" + std::to_string(bits.take(6)) +
         " prefetch-bucket-size=" + std::to_string(1 + bits.take(6)) +
         " max-live-parameters=" + std::to_string(1 + bits.take(8));
  return o;
}

bool hasPartition(ModuleOp module) {
  return !module.getOps<mlir::zero::PartitionOp>().empty();
}

/// Checks the two properties above around every pass.
struct Checker : public PassInstrumentation {
  explicit Checker(const int64_t &errors) : errors(errors) {}
  void runBeforePass(Pass *, Operation *) override { errorsBefore = errors; }
  void runAfterPass(Pass *pass, Operation *op) override {
    if (succeeded(verify(op)))
      return;
    llvm::errs() << "zero-fuzz: pass '" << pass->getArgument()
                 << "' succeeded but left invalid IR\n";
    abort();
  }
  void runAfterPassFailed(Pass *pass, Operation *) override {
    if (errors > errorsBefore)
      return;
    llvm::errs() << "zero-fuzz: pass '" << pass->getArgument()
                 << "' failed without reporting an error\n";
    abort();
  }
  const int64_t &errors;
  int64_t errorsBefore = 0;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::zero::registerAllPasses();
  (void)getRegistry();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool verbose = std::getenv("ZERO_FUZZ_VERBOSE") != nullptr;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  uint64_t h = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(data, size));

  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects(false);
  // Capture every diagnostic; print it only when asked (replaying a finding).
  int64_t errors = 0;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    if (verbose)
      llvm::errs() << "diagnostic: " << diag << "\n";
    return success();
  });

  // The tools reject this before parsing (MLIR's parser would overflow the
  // stack): zero/Support/Nesting.h.
  if (::zero::findExcessiveNesting(text))
    return 0;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir"), llvm::SMLoc());
  ParserConfig config(&context, /*verifyAfterParse=*/true);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!module)
    return 0;
  if (failed(verify(*module)))
    return 0;

  PassManager pm(&context, ModuleOp::getOperationName());
  pm.enableVerifier(false); // the Checker verifies, and aborts on failure
  pm.addInstrumentation(std::make_unique<Checker>(errors));
  bool scheduled = hasPartition(*module);
  Bits bits(h);
  int64_t paramElements = 0;
  for (auto p : module->getOps<mlir::zero::ParamOp>())
    paramElements += p.getNumElements(); // each < 2^48: no overflow here
  std::string opts = pipelineOptions(bits, paramElements);
  if (!scheduled) {
    auto options = mlir::zero::ZeroPipelineOptions::createFromString(opts);
    if (!options) // cannot happen: the options above are valid
      abort();
    mlir::zero::buildZeroPipeline(pm, *options);
  }
  pm.addPass(mlir::zero::createZeroVerifySchedulePass());
  pm.addPass(mlir::zero::createZeroPlanMemoryPass());
  mlir::zero::ZeroReportPassOptions report;
  report.out = "/dev/null";
  report.format = bits.flag() ? "text" : "json";
  report.hardware = bits.flag() ? "cpu" : "h100-sxm";
  pm.addPass(mlir::zero::createZeroReportPass(report));
  // Lowering to runtime calls, as zero-compile does after the pipeline.
  bool lower = bits.flag();
  if (lower)
    pm.addPass(mlir::zero::createConvertZeroToRuntimePass());
  if (verbose)
    llvm::errs() << "zero-fuzz: " << (scheduled ? "scheduled input" : opts)
                 << (lower ? ", lowering" : "") << "\n";
  LogicalResult result = pm.run(*module);
  if (verbose)
    llvm::errs() << "zero-fuzz: " << (succeeded(result) ? "ok" : "failed")
                 << "\n";
  return 0;
}
