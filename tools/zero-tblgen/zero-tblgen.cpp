//===- zero-tblgen.cpp - zero-mlir's TableGen backends --------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// mlir-tblgen's driver with the project's own backends, which register
// themselves (mlir::GenRegistration): -gen-pass-pipeline-decls and
// -gen-pass-pipeline-doc (PassPipelineGen.cpp).
//
//===----------------------------------------------------------------------===//

#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
