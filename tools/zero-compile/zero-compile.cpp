//===- zero-compile.cpp - .mlir in, training executable out ---------------===//
//
// Part of the zero-mlir project.
//
// Runs zero-pipeline, plans memory, verifies the schedule, lowers it to the
// runtime ABI, emits an object file through LLVM and links it with the
// runtime into an executable that `mpirun -np N` trains, or into a shared
// object whose host drives the step through zero_rt/session.h (and which
// carries the step's zero-report JSON).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "zero/Conversion/Passes.h"
#include "zero/Dialect/Zero/Analysis/CostModel.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/InitAll.h"
#include "zero/Pipelines/Pipeline.h"
#include "zero/Pipelines/PipelineFlags.h"
#include "zero/Support/CommandLine.h"
#include "zero/Support/ModelFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <optional>
#include <string>
#include <vector>

using namespace llvm;

static cl::OptionCategory compileCat("zero-compile options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Optional,
                                      cl::desc("<model.mlir>"),
                                      cl::cat(compileCat));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::init("train"), cl::cat(compileCat));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: exe (default), shared "
                  "(a library of zero_rt/session.h), "
                  "obj, llvm (LLVM IR) or mlir (the "
                  "scheduled step)"),
         cl::init("exe"), cl::cat(compileCat));
static cl::opt<std::string> target("target",
                                   cl::desc("Runtime backend: cpu or cuda"),
                                   cl::init("cpu"), cl::cat(compileCat));

/// zero-compile's own options; every other `--name value` is a zero-pipeline
/// option.
static const char *const ownOptions[] = {"o",    "emit",        "target",
                                         "help", "help-hidden", "version"};
/// Those of them that take no value.
static const char *const ownFlags[] = {"help", "help-hidden", "version"};

static int fail(const Twine &msg) {
  WithColor::error(errs(), "zero-compile") << msg << "\n";
  return 1;
}

/// zero-compile's command line, split: its own options and the input go to
/// cl::ParseCommandLineOptions, the rest becomes the pipeline's options.
struct CommandLine {
  std::vector<const char *> own;
  std::string pipelineOptions;
  bool help = false;
};

/// Splits the command line, each option parsed as --help shows it: a flag
/// (a bool) takes no value after a space, except a literal true or false;
/// any other option takes one. None after reporting what is wrong.
static std::optional<CommandLine> splitCommandLine(int argc, char **argv) {
  auto bad = [](const Twine &msg) -> std::optional<CommandLine> {
    fail(msg);
    return std::nullopt;
  };
  CommandLine c;
  c.own.push_back(argv[0]);
  std::vector<StringRef> positional;
  // The flag given just before each positional argument, if any.
  std::vector<StringRef> flagBefore;
  llvm::StringSet<> ownSet, ownFlagSet;
  for (const char *f : ownOptions)
    ownSet.insert(f);
  for (const char *f : ownFlags)
    ownFlagSet.insert(f);
  StringRef lastFlag;
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i];
    StringRef previousFlag = lastFlag;
    lastFlag = "";
    if (!arg.starts_with("-") || arg == "-") {
      c.own.push_back(argv[i]);
      positional.push_back(arg);
      flagBefore.push_back(previousFlag);
      continue;
    }
    StringRef body = arg.ltrim('-');
    auto [name, value] = body.split('=');
    bool hasValue = body.contains('=');
    StringRef spelled = arg.split('=').first;
    if (name == "help") {
      // Printed below, with the zero-pipeline options.
      c.help = true;
      continue;
    }
    // A value-taking option followed by another option has no value.
    auto needsValue = [&]() -> std::optional<CommandLine> {
      if (i + 1 >= argc)
        return bad("option " + spelled + " needs a value");
      return bad("option " + spelled + " needs a value, got the option '" +
                 argv[i + 1] + "' (write " + spelled +
                 "=VALUE for a value that starts with '-')");
    };
    if (ownSet.contains(name)) {
      c.own.push_back(argv[i]);
      if (!hasValue && !ownFlagSet.contains(name)) {
        if (i + 1 >= argc || ::zero::looksLikeOption(argv[i + 1]))
          return needsValue();
        c.own.push_back(argv[++i]);
      }
      continue;
    }
    if (!mlir::zero::isZeroPipelineOption(name))
      return bad("unknown option '" + spelled +
                 "' (zero-compile --help lists the options)");
    if (mlir::zero::isZeroPipelineFlag(name)) {
      if (hasValue && !::zero::parseFlagValue(value))
        return bad("option " + spelled + " is a flag: " + spelled +
                   " sets it, " + spelled + "=false clears it; got '" + value +
                   "'");
      if (!hasValue) {
        value = "true";
        if (i + 1 < argc && ::zero::parseFlagValue(argv[i + 1]))
          value = argv[++i];
        else
          lastFlag = spelled;
      }
    } else if (!hasValue) {
      if (i + 1 >= argc || ::zero::looksLikeOption(argv[i + 1]))
        return needsValue();
      value = argv[++i];
    }
    // A value with a space is quoted, so that the pipeline's own check
    // (memory-budget='40 GB') reports it rather than the option parser.
    std::string quoted = value.str();
    if (value.find_first_of(" \t") != StringRef::npos)
      quoted = value.contains('\'') ? "\"" + quoted + "\"" : "'" + quoted + "'";
    c.pipelineOptions +=
        (c.pipelineOptions.empty() ? "" : " ") + name.str() + "=" + quoted;
  }
  if (positional.size() > 1) {
    // `--memory-budget 40 GB` leaves the unit behind as an argument.
    std::string hint;
    if (mlir::zero::isStrayByteUnit(positional[1]))
      hint = " (a memory budget is written without a space, as in 40GB)";
    // `--overlap-comm 2` leaves the 2 behind: a flag takes no value.
    else if (StringRef flag =
                 flagBefore[1].empty() ? flagBefore[0] : flagBefore[1];
             !flag.empty())
      hint = (" (" + flag + " is a flag and takes no value: " + flag +
              " sets it, " + flag + "=false clears it)")
                 .str();
    return bad("one input file expected, got '" + positional[0] + "' and '" +
               positional[1] + "'" + hint);
  }
  return c;
}

/// A library carries the report of the schedule it runs
/// (zrt_session_report): zero-report's JSON, written to a temporary file at
/// `path`, priced on the pipeline's hardware preset and inter-node
/// bandwidth. An error message, or nothing.
static std::string addReportPass(mlir::PassManager &pm,
                                 StringRef pipelineOptions,
                                 SmallVectorImpl<char> &path) {
  mlir::zero::ZeroPipelineOptions parsed;
  if (failed(parsed.parseFromString(pipelineOptions, errs())))
    return ("invalid options: " + pipelineOptions).str();
  int fd;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("zero-compile", "json", fd, path))
    return "cannot write a report: " + ec.message();
  sys::Process::SafelyCloseFileDescriptor(fd);
  mlir::zero::ZeroReportPassOptions report;
  report.out = std::string(path.begin(), path.end());
  report.hardware = parsed.hardware;
  report.interNodeBandwidth = parsed.interNodeBandwidth;
  pm.addPass(mlir::zero::createZeroReportPass(report));
  return "";
}

/// The report as the library's `zero_report`, hidden: the runtime's weak
/// reference binds within the library.
static void embedReport(llvm::Module &module, StringRef json) {
  auto *text = llvm::ConstantDataArray::getString(module.getContext(), json);
  auto *report = new llvm::GlobalVariable(
      module, text->getType(), /*isConstant=*/true,
      llvm::GlobalValue::ExternalLinkage, text, "zero_report");
  report->setVisibility(llvm::GlobalValue::HiddenVisibility);
}

/// Compiles `module` for the host into the object file `path` (position
/// independent, for an executable or a library alike). An error message,
/// or nothing.
static std::string emitObject(llvm::Module &module, const std::string &path) {
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  std::string triple = sys::getDefaultTargetTriple(), error;
  const Target *tgt = TargetRegistry::lookupTarget(Triple(triple), error);
  if (!tgt)
    return error;
  TargetOptions options;
  std::unique_ptr<TargetMachine> tm(tgt->createTargetMachine(
      Triple(triple), "generic", "", options, Reloc::PIC_));
  module.setDataLayout(tm->createDataLayout());
  module.setTargetTriple(Triple(triple));
  std::error_code ec;
  ToolOutputFile obj(path, ec, sys::fs::OF_None);
  if (ec)
    return "cannot write '" + path + "': " + ec.message();
  legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, obj.os(), nullptr,
                              CodeGenFileType::ObjectFile))
    return "the target cannot emit object files";
  codegen.run(module);
  obj.keep();
  return "";
}

int main(int argc, char **argv) {
  InitLLVM y(argc, argv);
  std::optional<CommandLine> line = splitCommandLine(argc, argv);
  if (!line)
    return 1;
  std::vector<const char *> &own = line->own;
  std::string pipelineOptions = line->pipelineOptions;
  cl::HideUnrelatedOptions(compileCat);
  cl::ParseCommandLineOptions(
      static_cast<int>(own.size()), own.data(),
      "zero-compile: compile a training step into a ZeRO executable\n\n"
      "  zero-compile model.mlir --stage 2 --world-size 4 [--config "
      "ds_config.json] [--target cpu|cuda] [--<zero-pipeline option> value] "
      "-o train\n");
  if (line->help) {
    cl::PrintHelpMessage();
    outs() << "\nzero-pipeline options (--name value, or --name=value; a "
              "flag, shown without a value, is --name, --name=false or "
              "--name false):\n\n";
    mlir::zero::ZeroPipelineOptions options;
    // The descriptions start past the longest option name.
    options.printHelp(2, options.getOptionWidth() + 4);
    return 0;
  }
  if (inputFile.empty())
    return fail("no input file (zero-compile model.mlir ...; --help lists "
                "the options)");
  if (emit != "exe" && emit != "shared" && emit != "obj" && emit != "llvm" &&
      emit != "mlir")
    return fail("--emit must be exe, shared, obj, llvm or mlir, got '" + emit +
                "'");
  if (target != "cpu" && target != "cuda")
    return fail("--target must be cpu or cuda, got '" + target + "'");
  // The pipeline plans for the backend too (the cuda target pads a 16-bit
  // step's vocabulary unless --pad-vocab is given).
  pipelineOptions += std::string(pipelineOptions.empty() ? "" : " ") +
                     "target=" + target.getValue();
  std::string libDir = ZERO_RUNTIME_LIBRARY_DIR;
  // The CUDA backend's link line is written by its CMake (it is only built
  // where a CUDA toolkit was found).
  std::string cudaLinkFile = libDir + "/zero_runtime_cuda.link";
  if (target == "cuda" && !sys::fs::exists(cudaLinkFile))
    return fail("this zero-compile was built without the CUDA backend "
                "(ZERO_ENABLE_CUDA=OFF, or no CUDA toolkit was found); use "
                "--target cpu");

  mlir::DialectRegistry registry;
  zero::registerAllDialects(registry);
  registry.insert<mlir::LLVM::LLVMDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  zero::registerAllPasses();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      zero::parseModelFile(inputFile, sourceMgr, context, error);
  if (!module)
    return error.empty() ? 1 : fail(error);

  mlir::PassManager pm(&context);
  std::string pipeline = "zero-pipeline{" + pipelineOptions +
                         "},zero-plan-memory,zero-verify-schedule";
  if (failed(mlir::parsePassPipeline(pipeline, pm, errs())))
    return fail("invalid options: " + pipelineOptions);
  bool shared = emit == "shared";
  SmallString<128> reportPath;
  std::error_code ec;
  if (shared) {
    std::string error = addReportPass(pm, pipelineOptions, reportPath);
    if (!error.empty())
      return fail(error);
  }
  if (emit != "mlir")
    pm.addPass(mlir::zero::createConvertZeroToRuntimePass());
  if (getenv("ZERO_COMPILE_DEBUG"))
    errs() << "pipeline: " << pipeline << (shared ? ",zero-report" : "")
           << (emit != "mlir" ? ",convert-zero-to-runtime" : "") << "\n";
  LogicalResult ran = pm.run(*module);
  std::string reportText;
  if (shared) {
    auto text = MemoryBuffer::getFile(reportPath);
    sys::fs::remove(reportPath);
    if (succeeded(ran) && !text)
      return fail("cannot read the report '" + reportPath + "'");
    if (text)
      reportText = (*text)->getBuffer().str();
  }
  if (failed(ran))
    return 1;

  if (emit == "mlir") {
    ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write '" + outputFile + "': " + ec.message());
    module->print(out.os());
    out.keep();
    return 0;
  }

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(*module, llvmContext, "zero_program");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  if (shared)
    embedReport(*llvmModule, reportText);
  if (emit == "llvm") {
    ToolOutputFile out(outputFile, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write '" + outputFile + "': " + ec.message());
    llvmModule->print(out.os(), nullptr);
    out.keep();
    return 0;
  }

  std::string objPath = emit == "obj" ? outputFile.getValue()
                                      : outputFile + ".o";
  error = emitObject(*llvmModule, objPath);
  if (!error.empty())
    return fail(error);
  if (emit == "obj")
    return 0;

  // Link with the runtime through Open MPI's compiler wrapper, which adds
  // the MPI libraries.
  auto linker = sys::findProgramByName("mpicxx");
  if (!linker)
    return fail("mpicxx not found on PATH (install openmpi-bin)");
  std::vector<std::string> args = {*linker, objPath};
  if (!shared)
    args.push_back(libDir + "/libzero_runtime_main.a");
  // LLVM's lld, where it was installed beside LLVM, links the runtime
  // archive about three times faster than the system's ld.bfd.
  std::string lldDir = ZERO_LLVM_TOOLS_DIR;
  if (sys::fs::can_execute(lldDir + "/ld.lld"))
    args.insert(args.begin() + 1, {"-B" + lldDir, "-fuse-ld=lld"});
  // A library exports the session calls, which nothing in the program
  // object references: the backend's archive goes in whole.
  auto addBackend = [&](const std::string &archive) {
    if (shared)
      args.insert(args.end(),
                  {"-Wl,--whole-archive", archive, "-Wl,--no-whole-archive"});
    else
      args.push_back(archive);
  };
  if (target == "cuda") {
    auto linkLine = MemoryBuffer::getFile(cudaLinkFile);
    if (!linkLine)
      return fail("cannot read '" + cudaLinkFile + "'");
    SmallVector<StringRef> flags;
    (*linkLine)->getBuffer().split(flags, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef flag : flags) {
      flag = flag.trim();
      if (sys::path::filename(flag) == "libzero_runtime_cuda.a")
        addBackend(flag.str());
      else
        args.push_back(flag.str());
    }
  } else {
    addBackend(libDir + "/libzero_runtime.a");
    // liburing: the swap-file I/O of an optimizer offloaded to NVMe.
    args.insert(args.end(), {"-lopenblas", "-luring", "-fopenmp"});
  }
  // The library exports the session calls and the program only: the
  // runtime's own symbols (and the C++ libraries' inlined copies) stay
  // private, so that they cannot clash with what else the host loads.
  SmallString<128> versionScript;
  if (shared) {
    int fd;
    if ((ec = sys::fs::createTemporaryFile("zero-compile", "map", fd,
                                           versionScript)))
      return fail("cannot write a version script: " + ec.message());
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << "{\n  global: zrt_session_*; zero_program;\n  local: *;\n};\n";
    os.close();
    if (os.has_error())
      return fail("cannot write '" + versionScript + "'");
    // -z defs: a symbol the runtime needs and no library defines fails the
    // link rather than the host's dlopen.
    args.insert(args.begin() + 1,
                {"-shared", "-Wl,-z,defs",
                 "-Wl,--version-script=" + versionScript.str().str()});
  }
  args.insert(args.end(), {"-o", outputFile});
  std::vector<StringRef> argRefs(args.begin(), args.end());
  std::string linkError;
  int rc = sys::ExecuteAndWait(*linker, argRefs, std::nullopt, {}, 0, 0,
                               &linkError);
  sys::fs::remove(objPath);
  if (!versionScript.empty())
    sys::fs::remove(versionScript);
  if (rc != 0)
    return fail("linking failed" +
                (linkError.empty() ? "" : ": " + linkError));
  return 0;
}
