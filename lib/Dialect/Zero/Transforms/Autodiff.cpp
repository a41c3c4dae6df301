//===- Autodiff.cpp - Reverse-mode differentiation of a train step -------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROAUTODIFFPASS
#include "zero/Dialect/Zero/Transforms/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

namespace {

/// Differentiates one train step in place.
class StepDifferentiator {
public:
  explicit StepDifferentiator(TrainStepOp step) : step(step) {}

  LogicalResult run();

private:
  /// Adds `grad` to the running gradient of `value`.
  void accumulate(OpBuilder &b, Value value, Value grad);
  /// Emits `zero.grad` for every parameter whose gradient just became complete.
  void emitCompletedGrads(OpBuilder &b, Operation *user);

  TrainStepOp step;
  DenseMap<Value, Value> grads;
  /// Parameter -> number of forward users of its values not yet differentiated.
  llvm::MapVector<StringAttr, int64_t> pendingUsers;
  /// Parameter -> accumulated gradient.
  DenseMap<StringAttr, Value> paramGrads;
  /// Parameter values (get_param results) grouped by parameter.
  DenseMap<Operation *, SmallVector<StringAttr, 1>> userToParams;
};

} // namespace

void StepDifferentiator::accumulate(OpBuilder &b, Value value, Value grad) {
  if (!grad)
    return;
  auto [it, inserted] = grads.try_emplace(value, grad);
  if (!inserted) {
    it->second = nn::AddOp::create(b, grad.getLoc(), it->second, grad);
  }
}

void StepDifferentiator::emitCompletedGrads(OpBuilder &b, Operation *user) {
  auto it = userToParams.find(user);
  if (it == userToParams.end())
    return;
  for (StringAttr name : it->second) {
    if (--pendingUsers[name] != 0)
      continue;
    Value g = paramGrads.lookup(name);
    if (!g) {
      // The path to the loss carries no gradient (e.g. through integer ids).
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          step, FlatSymbolRefAttr::get(name));
      g = nn::FillOp::create(b, user->getLoc(), param.getComputeTensorType(),
                             b.getF64FloatAttr(0.0));
    }
    GradOp::create(b, user->getLoc(), FlatSymbolRefAttr::get(name), g);
  }
}

LogicalResult StepDifferentiator::run() {
  Block &body = step.getBodyBlock();
  ReturnOp ret = step.getReturnOp();
  Value loss = ret.getLoss();
  if (!step.getOps<GradOp>().empty())
    return step.emitOpError("is already differentiated (it has zero.grad ops)");

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);

  // A frozen parameter gets no gradient, so its values start no derivative:
  // what only frozen parameters feed (a frozen first layer's input
  // gradient, its weight gradient) is never differentiated.
  auto module = step->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  auto isFrozen = [&](StringAttr name) {
    auto param = symbols.lookup<ParamOp>(name);
    return param && param.getFrozen();
  };
  bool anyFrozen = false, anyTrainable = false;
  for (ParamOp param : module.getOps<ParamOp>())
    (param.getFrozen() ? anyFrozen : anyTrainable) = true;
  if (anyFrozen && !anyTrainable)
    return step.emitOpError("every parameter is frozen: nothing to train");

  // Values that depend on a trainable parameter (forward reachability).
  DenseSet<Value> varied;
  for (Operation *op : forward) {
    auto get = dyn_cast<GetParamOp>(op);
    bool fromParam = (get && !isFrozen(get.getParamAttr().getAttr())) ||
                     llvm::any_of(op->getOperands(),
                                  [&](Value v) { return varied.contains(v); });
    if (fromParam)
      varied.insert(op->result_begin(), op->result_end());
  }
  // Values the loss depends on (backward reachability).
  DenseSet<Value> useful;
  useful.insert(loss);
  for (Operation *op : llvm::reverse(forward))
    if (llvm::any_of(op->getResults(),
                     [&](Value v) { return useful.contains(v); }))
      useful.insert(op->operand_begin(), op->operand_end());
  auto active = [&](Value v) {
    return varied.contains(v) && useful.contains(v);
  };

  // Every op on a path from a parameter to the loss needs a rule.
  for (Operation *op : forward) {
    if (isa<GetParamOp>(op) || !llvm::any_of(op->getResults(), active))
      continue;
    if (!isa<DerivativeOpInterface>(op))
      return op->emitOpError("has no derivative rule (DerivativeOpInterface), "
                             "so zero-autodiff cannot differentiate the loss "
                             "through it");
  }

  // A parameter's gradient is complete after the derivative of the earliest
  // forward op that uses any of its values.
  for (Operation *op : forward) {
    auto get = dyn_cast<GetParamOp>(op);
    if (!get || !active(get.getResult()))
      continue;
    StringAttr name = get.getParamAttr().getAttr();
    pendingUsers.insert({name, 0});
    for (Operation *user : get.getResult().getUsers()) {
      if (!llvm::any_of(user->getResults(), active))
        continue;
      auto &params = userToParams[user];
      if (!llvm::is_contained(params, name)) {
        params.push_back(name);
        ++pendingUsers[name];
      }
    }
  }

  OpBuilder b(ret);
  if (!varied.contains(loss))
    return step.emitOpError("loss does not depend on any ")
           << (anyFrozen ? "trainable parameter" : "parameter");
  // d loss / d loss = 1, tagged so that zero-mixed-precision can seed with
  // the loss scale instead; if mixed precision already ran at fp16, seed with
  // the loss scale directly.
  bool scaled = step.getPrecision().getKind() == PrecisionKind::fp16 &&
                llvm::any_of(module.getOps<ParamOp>(), [](ParamOp p) {
                  return p.getComputeAttr() != nullptr;
                });
  Operation *seed =
      scaled
          ? LossScaleOp::create(b, ret.getLoc(), loss.getType()).getOperation()
          : nn::FillOp::create(b, ret.getLoc(), loss.getType(),
                               b.getF64FloatAttr(1.0))
                .getOperation();
  if (!scaled)
    b.getContext()
        ->getLoadedDialect<ZeroDialect>()
        ->getLossSeedAttrHelper()
        .setAttr(seed, b.getUnitAttr());
  grads[loss] = seed->getResult(0);

  for (Operation *op : llvm::reverse(forward)) {
    if (isa<GetParamOp>(op) || !llvm::any_of(op->getResults(), active))
      continue;
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(active(r) ? grads.lookup(r) : Value());
    if (llvm::any_of(resultGrads, [](Value g) { return g != nullptr; })) {
      SmallVector<Value> operandGrads;
      if (failed(cast<DerivativeOpInterface>(op).buildDerivative(b, resultGrads,
                                                                 operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError("derivative rule returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g && active(operand))
          accumulate(b, operand, g);
    }
    // Contributions to a parameter arrive through its get_param values; fold
    // them now so that the gradient is complete right after this op.
    auto it = userToParams.find(op);
    if (it == userToParams.end())
      continue;
    for (Value operand : op->getOperands()) {
      auto get = operand.getDefiningOp<GetParamOp>();
      if (!get)
        continue;
      StringAttr name = get.getParamAttr().getAttr();
      Value g = grads.lookup(operand);
      if (!g || !llvm::is_contained(it->second, name))
        continue;
      grads.erase(operand);
      Value &acc = paramGrads[name];
      acc = acc ? nn::AddOp::create(b, op->getLoc(), acc, g).getResult() : g;
    }
    emitCompletedGrads(b, op);
  }

  // Derivative rules emit every operand gradient; drop those nobody needs
  // (e.g. the gradient of the input batch) so the backward keeps no more
  // activations alive than the gradients require.
  SmallVector<Operation *> backward;
  for (Operation *op = seed->getNextNode(); op != ret; op = op->getNextNode())
    backward.push_back(op);
  for (Operation *op : llvm::reverse(backward))
    if (op->use_empty() && isPure(op))
      op->erase();

  // Trainable parameters that do not influence the loss.
  for (ParamOp param : module.getOps<ParamOp>()) {
    StringAttr name = param.getSymNameAttr();
    if (param.getFrozen() || pendingUsers.count(name))
      continue;
    param.emitWarning("parameter @")
        << name.getValue()
        << " does not influence the loss; its gradient is zero and it is "
           "only affected by weight decay (DeepSpeed: "
           "ignore_unused_parameters)";
    Value zero =
        nn::FillOp::create(b, param.getLoc(), param.getComputeTensorType(),
                           b.getF64FloatAttr(0.0));
    GradOp::create(b, param.getLoc(), FlatSymbolRefAttr::get(name), zero);
  }
  return success();
}

namespace {
struct ZeroAutodiffPass
    : public mlir::zero::impl::ZeroAutodiffPassBase<ZeroAutodiffPass> {
  using Base::Base;
  void runOnOperation() override {
    for (TrainStepOp step : getOperation().getOps<TrainStepOp>())
      if (failed(StepDifferentiator(step).run()))
        return signalPassFailure();
  }
};
} // namespace
