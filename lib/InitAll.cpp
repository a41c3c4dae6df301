//===- InitAll.cpp - Register the project's dialects and passes -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/InitAll.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/Passes.h"
#include "zero/Conversion/Passes.h"
#include "zero/Conversion/ZeroToRuntime.h"
#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Dialect/Zero/Transforms/Passes.h"
#include "zero/ModelGen/ModelGen.h"
#include "zero/Pipelines/Pipeline.h"

void zero::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::zero::ZeroDialect, mlir::nn::NNDialect,
                  mlir::zero::ModelGenDialect, mlir::func::FuncDialect,
                  mlir::scf::SCFDialect, mlir::arith::ArithDialect>();
  mlir::zero::registerRuntimeKernelModels(registry);
  mlir::zero::registerRuntimeCollectiveModels(registry);
  mlir::zero::registerAllToAllDerivativeModel(registry);
  mlir::zero::registerMoeExchangeDerivativeModels(registry);
}

void zero::registerAllPasses() {
  mlir::zero::registerZeroPasses();
  mlir::zero::registerZeroPipeline();
  mlir::zero::registerZeroAnalysisPasses();
  mlir::zero::registerZeroConversionPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
