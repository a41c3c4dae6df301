//===- zero-opt.cpp - The zero-mlir pass driver ---------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "zero/InitAll.h"
#include "zero/Support/Nesting.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

// Test-only passes (test/lib), which zero-opt alone registers; they have no
// public header.
namespace mlir::zero::test {
void registerTestRuntimeABIPass();
void registerTestMuonLayoutPass();
} // namespace mlir::zero::test

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  mlir::DialectRegistry registry;
  zero::registerAllDialects(registry);
  // convert-zero-to-runtime's output reads back in (the input of
  // -test-zero-runtime-abi is such IR).
  registry.insert<mlir::LLVM::LLVMDialect>();
  zero::registerAllPasses();
  mlir::zero::test::registerTestRuntimeABIPass();
  mlir::zero::test::registerTestMuonLayoutPass();
  // mlir::MlirOptMain(argc, argv, ...), except that the input is checked for
  // nesting that would overflow the parser's stack before it is parsed.
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv,
      "zero-mlir optimizer driver: ZeRO schedules for training steps\n",
      registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  auto defaultToTrue = [](llvm::StringRef name) {
    if (llvm::cl::Option *option =
            llvm::cl::getRegisteredOptions().lookup(name);
        option && option->getNumOccurrences() == 0)
      option->addOccurrence(0, option->ArgStr, "true");
  };
  auto given = [](llvm::StringRef name) {
    llvm::cl::Option *option = llvm::cl::getRegisteredOptions().lookup(name);
    return option && option->getNumOccurrences() > 0;
  };
  // The parser verifies the input and the pass manager each pass's output,
  // so the printer need not verify the result again (a tenth of the time of
  // a large step) unless the command line says otherwise or turns either
  // verification off.
  if (config.shouldVerifyPasses() && config.shouldVerifyOnParsing())
    defaultToTrue("mlir-print-assume-verified");
  // The printer first prints every op once more to collect aliases (an
  // eighth of the instructions of a large step). Neither zero dialect
  // defines an alias, so zero-mlir IR prints the same in local scope, which
  // skips that pass; printed locations keep their `#loc` aliases.
  if (!given("mlir-print-debuginfo"))
    defaultToTrue("mlir-print-local-scope");
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
  std::string errorMessage;
  auto file = mlir::openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (failed(zero::checkNesting(*file)))
    return EXIT_FAILURE;
  auto output = mlir::openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (failed(
          mlir::MlirOptMain(output->os(), std::move(file), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
