//===- Muon.cpp - Muon's matrices and their owners ------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/Muon.h"

#include "zero/Dialect/NN/IR/NNDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The parameter `value` reads, through the casts and views between a
/// zero.get_param and its use; empty when it reads none.
StringRef tracedParam(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (auto get = dyn_cast<GetParamOp>(op))
      return get.getParam();
    if (isa<nn::CastOp, nn::ReshapeOp, nn::TransposeOp>(op)) {
      value = op->getOperand(0);
      continue;
    }
    break;
  }
  return {};
}

/// What the train steps of a module read each parameter as.
struct ParamUses {
  /// Read as a projection's weight (`nn.matmul`, `nn.tiled_mlp`).
  llvm::StringSet<> projections;
  /// Read as an embedding table (`nn.embedding`) or as the output head (the
  /// projection into the loss's logits).
  llvm::StringSet<> embeddingsAndHeads;
};

ParamUses getParamUses(ModuleOp module) {
  ParamUses uses;
  auto add = [](llvm::StringSet<> &set, Value v) {
    StringRef name = tracedParam(v);
    if (!name.empty())
      set.insert(name);
  };
  for (TrainStepOp step : module.getOps<TrainStepOp>()) {
    step.walk([&](Operation *op) {
      if (auto matmul = dyn_cast<nn::MatmulOp>(op)) {
        add(uses.projections, matmul.getLhs());
        add(uses.projections, matmul.getRhs());
      } else if (auto mlp = dyn_cast<nn::TiledMlpOp>(op)) {
        add(uses.projections, mlp.getGateWeight());
        add(uses.projections, mlp.getUpWeight());
        add(uses.projections, mlp.getDownWeight());
      } else if (auto embedding = dyn_cast<nn::EmbeddingOp>(op)) {
        add(uses.embeddingsAndHeads, embedding.getTable());
      } else if (auto fused = dyn_cast<nn::LinearCrossEntropyOp>(op)) {
        add(uses.embeddingsAndHeads, fused.getWeight());
      } else if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(op)) {
        // The logits' projection, through the views before the loss.
        Value logits = loss.getLogits();
        while (auto reshape = logits.getDefiningOp<nn::ReshapeOp>())
          logits = reshape.getInput();
        if (auto matmul = logits.getDefiningOp<nn::MatmulOp>()) {
          add(uses.embeddingsAndHeads, matmul.getLhs());
          add(uses.embeddingsAndHeads, matmul.getRhs());
        }
      }
    });
  }
  return uses;
}

bool isMuonMatrix(ParamOp param, const ParamUses &uses) {
  StringRef name = param.getSymName();
  return !param.getFrozen() && param.getTensorType().getRank() == 2 &&
         uses.projections.contains(name) &&
         !uses.embeddingsAndHeads.contains(name);
}

} // namespace

bool mlir::zero::isMuonMatrix(ParamOp param) {
  return ::isMuonMatrix(param,
                        getParamUses(param->getParentOfType<ModuleOp>()));
}

SmallVector<ParamOp> mlir::zero::getMuonParams(ModuleOp module) {
  ParamUses uses = getParamUses(module);
  SmallVector<ParamOp> params;
  for (ParamOp param : module.getOps<ParamOp>())
    if (::isMuonMatrix(param, uses))
      params.push_back(param);
  return params;
}

int64_t mlir::zero::getMuonStepFlops(int64_t rows, int64_t cols,
                                     int64_t nsSteps) {
  int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  return nsSteps * (4 * m * m * n + 2 * m * m * m);
}

MuonSlotLayout mlir::zero::layoutMuonSlots(ArrayRef<int64_t> matrixElements,
                                           ArrayRef<int64_t> matrixFlops,
                                           int64_t adamwElements, int64_t ranks,
                                           int64_t alignment) {
  assert(matrixElements.size() == matrixFlops.size() && ranks >= 1 &&
         alignment >= 1 && "one FLOP count per matrix, and some ranks");
  size_t num = matrixElements.size();
  MuonSlotLayout layout;
  layout.owner.assign(num, 0);
  layout.offset.assign(num, 0);
  layout.flops.assign(ranks, 0);
  layout.muonElements.assign(ranks, 0);

  // Largest first (the earlier matrix on a tie), each to the rank with the
  // fewest FLOPs so far (the lower rank on a tie).
  SmallVector<size_t> order(num);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return matrixFlops[a] > matrixFlops[b];
  });
  for (size_t i : order) {
    int64_t rank = std::min_element(layout.flops.begin(), layout.flops.end()) -
                   layout.flops.begin();
    layout.owner[i] = rank;
    layout.flops[rank] += matrixFlops[i];
    layout.muonElements[rank] += matrixElements[i];
  }

  // AdamW's slot: every element over the ranks, in whole alignment units.
  int64_t total = adamwElements;
  for (int64_t e : matrixElements)
    total += e;
  auto roundUp = [&](int64_t n) {
    return (n + alignment - 1) / alignment * alignment;
  };
  int64_t adamwSlot = roundUp((total + ranks - 1) / ranks);
  int64_t most =
      *std::max_element(layout.muonElements.begin(), layout.muonElements.end());
  layout.slot = std::max(adamwSlot, roundUp(most));
  layout.padding = (layout.slot - adamwSlot) * ranks;

  // Each rank's matrices from the front of its slot, in declaration order.
  SmallVector<int64_t> filled(ranks, 0);
  for (size_t i = 0; i < num; ++i) {
    int64_t rank = layout.owner[i];
    layout.offset[i] = rank * layout.slot + filled[rank];
    filled[rank] += matrixElements[i];
  }
  return layout;
}
