//===- ToolOptions.h - Options both estimating tools take ---*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The command-line options that zero-estimate and zero-tune both take,
// declared once: each tool constructs one SharedToolOptions in its option
// category with its own descriptions, which say what the option means to
// that tool.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_SUPPORT_TOOLOPTIONS_H
#define ZERO_SUPPORT_TOOLOPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <string>

namespace zero {

struct SharedToolOptions {
  /// The tool's description of each option, for --help.
  struct Descriptions {
    llvm::StringRef hardware, interNodeBandwidth, zeropp, format;
  };

  SharedToolOptions(llvm::cl::OptionCategory &category,
                    const Descriptions &descriptions)
      : hardware("hardware", llvm::cl::desc(descriptions.hardware),
                 llvm::cl::init(""), llvm::cl::cat(category)),
        interNodeBandwidth("inter-node-bandwidth",
                           llvm::cl::desc(descriptions.interNodeBandwidth),
                           llvm::cl::init(""), llvm::cl::cat(category)),
        zeropp("zeropp", llvm::cl::desc(descriptions.zeropp),
               llvm::cl::init(false), llvm::cl::cat(category)),
        format("format", llvm::cl::desc(descriptions.format),
               llvm::cl::init("text"), llvm::cl::cat(category)) {}

  /// The hardware preset's name (mlir::zero::lookupHardwarePreset).
  llvm::cl::opt<std::string> hardware;
  /// The line rate of the preset's links between nodes
  /// (mlir::zero::applyInterNodeBandwidth); empty: the preset's.
  llvm::cl::opt<std::string> interNodeBandwidth;
  /// Compare or search the ZeRO++ and MiCS options of stage 3.
  llvm::cl::opt<bool> zeropp;
  /// The output: "text" or "json".
  llvm::cl::opt<std::string> format;

  /// Whether the output is JSON, and whether --format names an output the
  /// tools write.
  bool isJson() const { return format == "json"; }
  bool isValidFormat() const { return format == "text" || isJson(); }
};

} // namespace zero

#endif // ZERO_SUPPORT_TOOLOPTIONS_H
