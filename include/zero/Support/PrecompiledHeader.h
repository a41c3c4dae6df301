//===- PrecompiledHeader.h - Headers most of the compiler parses -*- C++ -*-===//
//
// The headers that most translation units of lib/ and tools/ include, parsed
// once per build into a precompiled header (ZERO_PRECOMPILED_HEADERS). Parsing
// the dialects' generated op classes and the MLIR headers under them is most
// of a typical file's compile time. Every file still includes what it uses:
// the build without precompiled headers (-DZERO_PRECOMPILED_HEADERS=OFF, and
// the clang build of scripts/fuzz.sh) compiles the same sources.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_PRECOMPILEDHEADER_H
#define ZERO_SUPPORT_PRECOMPILEDHEADER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#endif // ZERO_SUPPORT_PRECOMPILEDHEADER_H
