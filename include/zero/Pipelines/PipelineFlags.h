//===- PipelineFlags.h - zero-pipeline options on command lines -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// zero-compile and zero-run take zero-pipeline's options as `--name value`
// or `--name=value`. Which names are options, and which of them are flags
// (bools, which take no value after a space but a literal true or false:
// zero/Support/CommandLine.h), is generated from the same Option records
// as the options struct (Pipeline.td, zero-tblgen), so that a command line
// parses as `--help` shows it. This header needs no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PIPELINEFLAGS_H
#define ZERO_PIPELINES_PIPELINEFLAGS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::zero {

#include "zero/Pipelines/PipelineFlags.h.inc"

} // namespace mlir::zero

#endif // ZERO_PIPELINES_PIPELINEFLAGS_H
