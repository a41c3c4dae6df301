//===- PrintMemoryPlan.cpp - Print the memory plan of each step -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/MemoryPlan.h"
#include "zero/Dialect/Zero/Analysis/Passes.h"

namespace mlir::zero {
#define GEN_PASS_DEF_ZEROPRINTMEMORYPLANPASS
#include "zero/Dialect/Zero/Analysis/Passes.h.inc"
} // namespace mlir::zero

using namespace mlir;
using namespace mlir::zero;

static void printPlan(const MemoryPlan &plan, TrainStepOp step,
                      raw_ostream &os) {
  os << "zero.train_step @" << step.getSymName() << "\n";
  os << "  persistent_bytes " << plan.persistentBytes << ", arena_bytes "
     << plan.arenaBytes << ", scratch_bytes " << plan.scratchBytes
     << ", peak_bytes " << plan.peakBytes;
  if (plan.hostBytes > 0)
    os << ", host_bytes " << plan.hostBytes;
  if (plan.nvmeBytes > 0)
    os << ", nvme_bytes " << plan.nvmeBytes;
  if (plan.swapBytes > 0)
    os << ", swap_offset " << plan.swapOffset << ", swap_bytes "
       << plan.swapBytes;
  if (plan.paramNvmeBytes > 0)
    os << ", param_nvme_bytes " << plan.paramNvmeBytes << ", param_swap_offset "
       << plan.paramSwapOffset << ", param_swap_bytes " << plan.paramSwapBytes;
  os << "\n";
  for (const PersistentBuffer &p : plan.persistent)
    os << "  "
       << (p.memory == MemoryKind::host   ? "host"
           : p.memory == MemoryKind::nvme ? "nvme"
                                          : "persistent")
       << " @" << p.partition.getSymName() << ' ' << stringifyBufferKind(p.kind)
       << " offset " << p.offset << " bytes " << p.bytes << "\n";
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(plan.ops))
    index[op] = i;
  // The offloaded activations' host places, in program order.
  for (auto [i, op] : llvm::enumerate(plan.ops))
    if (auto it = plan.hostActivations.find(op);
        it != plan.hostActivations.end())
      os << "  host activation op " << i << " offset " << it->second
         << " bytes " << getTensorBytes(op->getResult(0).getType()) << "\n";
  auto printRange = [&](int64_t offset, int64_t bytes, int64_t start,
                        int64_t end) {
    os << " offset " << offset << " bytes " << bytes << " live [" << start
       << ", " << end << "]";
  };
  for (const ArenaBuffer &b : plan.buffers) {
    os << "  arena ";
    if (b.argIndex >= 0)
      os << "input #" << b.argIndex;
    else
      os << "op " << index.lookup(b.op) << ' ' << b.op->getName() << ' ';
    if (b.argIndex < 0 && b.resultIndex >= 0)
      os << "result #" << b.resultIndex;
    else if (auto coll = dyn_cast_or_null<CollectiveOpInterface>(b.op);
             b.argIndex < 0 && coll && coll.getQuantizationBits())
      os << "staging";
    else if (b.argIndex < 0)
      os << "bucket";
    int64_t start = b.pieces.empty() ? 0 : b.pieces.front().start;
    int64_t end = start;
    for (const ArenaPiece &piece : b.pieces)
      end = std::max(end, piece.end);
    printRange(b.offset, b.bytes, start, end);
    os << ' ' << stringifyMemoryCategory(b.category) << "\n";
    if (b.pieces.size() > 1)
      for (const ArenaPiece &piece : b.pieces) {
        os << "    piece";
        printRange(piece.offset, piece.bytes, piece.start, piece.end);
        os << "\n";
      }
  }
}

namespace {
struct ZeroPrintMemoryPlanPass
    : public mlir::zero::impl::ZeroPrintMemoryPlanPassBase<
          ZeroPrintMemoryPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    for (TrainStepOp step : getOperation().getOps<TrainStepOp>()) {
      FailureOr<MemoryPlan> plan = computeMemoryPlan(step);
      if (failed(plan))
        return signalPassFailure();
      printPlan(*plan, step, llvm::outs());
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
