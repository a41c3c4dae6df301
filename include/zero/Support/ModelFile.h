//===- ModelFile.h - Read a training-step module from a file ----*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The tools that take a model file (zero-compile, zero-estimate, zero-tune)
// read it the same way: open it, reject nesting the parser cannot survive
// (Nesting.h), then parse it with diagnostics through the caller's handler.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_MODELFILE_H
#define ZERO_SUPPORT_MODELFILE_H

#include "zero/Support/Nesting.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include <string>

namespace zero {

/// Parses `path` (`-` is stdin) into `sourceMgr`, whose diagnostic handler
/// the caller installed. Null on failure: when the file cannot be opened,
/// `error` says why and nothing is printed; too deep nesting and parse
/// errors are already reported.
inline mlir::OwningOpRef<mlir::ModuleOp>
parseModelFile(llvm::StringRef path, llvm::SourceMgr &sourceMgr,
               mlir::MLIRContext &context, std::string &error) {
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(path, &error);
  if (!file)
    return nullptr;
  if (llvm::failed(checkNesting(*file)))
    return nullptr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
}

} // namespace zero

#endif // ZERO_SUPPORT_MODELFILE_H
