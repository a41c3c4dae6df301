//===- TestMuonLayout.cpp - Print Muon's split, owners and slots ----------===//
//
// Part of the zero-mlir project.
//
// Prints what Analysis/Muon.h decides for a module's parameters: which are
// Muon's matrices and which AdamW's, each matrix's owner among `ranks`
// ranks and its offset in the whole-matrix reduce-scatter slots, the slot's
// size and its padding beyond AdamW's layout, and each rank's Newton-Schulz
// FLOPs.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/Muon.h"

#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::zero;

namespace {

struct TestMuonLayoutPass
    : public PassWrapper<TestMuonLayoutPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestMuonLayoutPass)

  TestMuonLayoutPass() = default;
  TestMuonLayoutPass(const TestMuonLayoutPass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "test-zero-muon-layout"; }
  StringRef getDescription() const final {
    return "Print Muon's matrices, their owners and the whole-matrix "
           "reduce-scatter slots over `ranks` ranks";
  }

  Option<int64_t> ranks{*this, "ranks", llvm::cl::desc("Ranks"),
                        llvm::cl::init(1)};
  Option<int64_t> alignment{*this, "alignment",
                            llvm::cl::desc("Elements a slot is a multiple of"),
                            llvm::cl::init(1)};
  Option<int64_t> nsSteps{*this, "ns-steps",
                          llvm::cl::desc("Newton-Schulz iterations"),
                          llvm::cl::init(5)};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || alignment < 1 || nsSteps < 0) {
      module.emitError("test-zero-muon-layout: ranks and alignment must be "
                       ">= 1, ns-steps >= 0");
      return signalPassFailure();
    }
    SmallVector<ParamOp> muon = getMuonParams(module);
    llvm::raw_ostream &os = llvm::outs();
    SmallVector<int64_t> elements, flops;
    int64_t adamw = 0;
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (param.getFrozen())
        continue;
      if (isMuonMatrix(param) != llvm::is_contained(muon, param)) {
        param.emitError("isMuonMatrix and getMuonParams disagree");
        return signalPassFailure();
      }
      if (!isMuonMatrix(param)) {
        adamw += param.getNumElements();
        os << "adamw @" << param.getSymName() << " " << param.getNumElements()
           << "\n";
      }
    }
    for (ParamOp param : muon) {
      ArrayRef<int64_t> shape = param.getTensorType().getShape();
      elements.push_back(param.getNumElements());
      flops.push_back(getMuonStepFlops(shape[0], shape[1], nsSteps));
    }
    MuonSlotLayout layout =
        layoutMuonSlots(elements, flops, adamw, ranks, alignment);
    for (auto [i, param] : llvm::enumerate(muon)) {
      ArrayRef<int64_t> shape = param.getTensorType().getShape();
      os << "muon @" << param.getSymName() << " [" << shape[0] << ", "
         << shape[1] << "] flops " << flops[i] << " owner " << layout.owner[i]
         << " offset " << layout.offset[i] << "\n";
    }
    os << "slot " << layout.slot << " x " << int64_t(ranks)
       << " ranks, padding " << layout.padding << "\n";
    for (int64_t r = 0; r < ranks; ++r)
      os << "rank " << r << ": flops " << layout.flops[r] << ", muon elements "
         << layout.muonElements[r] << "\n";
  }
};

} // namespace

namespace mlir::zero::test {
void registerTestMuonLayoutPass() { PassRegistration<TestMuonLayoutPass>(); }
} // namespace mlir::zero::test
