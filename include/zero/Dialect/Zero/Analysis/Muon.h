//===- Muon.h - Muon's matrices and their owners ----------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// Muon orthogonalizes each matrix's momentum with Newton-Schulz over the
// whole matrix, so under ZeRO each Muon matrix has one owner rank that holds
// its whole reduced gradient and momentum and runs its step
// (owner-computes). What is decided here, once: which parameters Muon
// updates (the rest are AdamW's, as DeepSpeed tags them), which rank owns
// each, and where each lies in the ranks' reduce-scatter slots.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_ZERO_ANALYSIS_MUON_H
#define ZERO_DIALECT_ZERO_ANALYSIS_MUON_H

#include "zero/Dialect/Zero/IR/ZeroDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::zero {

/// Whether Muon updates `param`, the split of torch.optim.Muon plus AdamW
/// that DeepSpeed tags (`use_muon`, 2-D hidden matrices), read from how the
/// module's train steps use it rather than from its name: a trainable 2-D
/// parameter that some `nn.matmul` or `nn.tiled_mlp` reads as a
/// projection's weight and none reads as an embedding table
/// (`nn.embedding`) or as the output head (`nn.linear_cross_entropy`'s
/// weight, or an operand of the `nn.matmul` whose result
/// `nn.softmax_cross_entropy` reads). Everything else is AdamW's: norms,
/// biases, token and position embeddings (GPT-2's `wpe` is added, not
/// projected), the head (tied or not), 3-D expert weights and the MoE
/// router.
bool isMuonMatrix(ParamOp param);

/// The parameters of `module` that Muon updates, in declaration order.
llvm::SmallVector<ParamOp> getMuonParams(ModuleOp module);

/// The FLOPs of one Muon step's Newton-Schulz on a [rows, cols] matrix:
/// `nsSteps` iterations of X X^T ([m, m] from [m, n]: 2 m m n), its square
/// (2 m m m) and the product with X (2 m m n), m = min(rows, cols).
int64_t getMuonStepFlops(int64_t rows, int64_t cols, int64_t nsSteps);

/// Owner-computes over `ranks` ranks: each Muon matrix (its elements and its
/// step's FLOPs) goes whole to one owner, the matrices largest first to the
/// rank with the fewest FLOPs so far (the lower rank on a tie). Each rank's
/// slot of the reduce-scatter holds its matrices whole and contiguous, in
/// declaration order, then AdamW elements, split at any element, fill every
/// slot to the same size. The slot is AdamW's (the elements over the ranks,
/// rounded up to `alignment`) unless a rank's matrices exceed it: then it is
/// that rank's matrices, rounded up, and `padding` counts the elements the
/// slots hold beyond AdamW's layout.
struct MuonSlotLayout {
  /// Elements of one rank's slot.
  int64_t slot = 0;
  /// Per matrix, in the order given: its owner and its element offset in
  /// the slots laid end to end (owner * slot + its place in the slot).
  llvm::SmallVector<int64_t> owner, offset;
  /// Per rank: Newton-Schulz FLOPs and Muon elements it owns.
  llvm::SmallVector<int64_t> flops, muonElements;
  /// slot * ranks less AdamW's padded layout of the same elements.
  int64_t padding = 0;
};
MuonSlotLayout layoutMuonSlots(llvm::ArrayRef<int64_t> matrixElements,
                               llvm::ArrayRef<int64_t> matrixFlops,
                               int64_t adamwElements, int64_t ranks,
                               int64_t alignment);

/// Owner-computes in AdamW's own layout: an order of a group's parameters,
/// laid out contiguously from element 0 in slots of `shard` elements over
/// `ranks` ranks (the reduce-scatter's slots, padding only at the end),
/// in which every Muon matrix lies whole in one slot, its owner's. Each
/// rank's matrices are contiguous; AdamW's parameters fill the runs between
/// them and may cross a slot boundary. Among the layouts it finds it keeps
/// the one whose busiest rank has the fewest Newton-Schulz FLOPs (the
/// owners tried largest matrix first, each to the rank with the fewest
/// FLOPs so far first), searching at most `budget` steps; none when no
/// layout is found: the matrices fit the slots only with gaps
/// (`layoutMuonSlots`' padding).
struct MuonGapFreeLayout {
  /// The parameters in layout order, as indices into the lists given.
  llvm::SmallVector<size_t> order;
  /// Per parameter, in the order given: its owner, -1 for AdamW's.
  llvm::SmallVector<int64_t> owner;
  /// Per rank: the Newton-Schulz FLOPs it owns.
  llvm::SmallVector<int64_t> flops;
};
std::optional<MuonGapFreeLayout>
layoutMuonGapFree(llvm::ArrayRef<int64_t> elements, llvm::ArrayRef<bool> muon,
                  llvm::ArrayRef<int64_t> flops, int64_t shard, int64_t ranks,
                  int64_t budget = 1 << 22);

/// Owner-computes with gaps, where layoutMuonGapFree finds no layout: the
/// owners of layoutMuonSlots, slots of equal size (its slot first, grown
/// by `alignment` units until everything fits), each rank's matrices
/// whole and contiguous in its slot, and AdamW's parameters (whole, in
/// declaration order, first fit) after them and into the next slots as far
/// as those slots' matrices leave room. What they do not fill is a gap:
/// elements of no parameter, zero in every buffer.
struct MuonGappedLayout {
  /// The parameters in layout order (increasing offsets), as indices into
  /// the lists given.
  llvm::SmallVector<size_t> order;
  /// Per parameter, in the order given: its owner (-1 for AdamW's) and its
  /// element offset.
  llvm::SmallVector<int64_t> owner, offsets;
  /// Elements of one rank's slot, and the end of the last parameter.
  int64_t slot = 0, end = 0;
};
MuonGappedLayout layoutMuonGapped(llvm::ArrayRef<int64_t> elements,
                                  llvm::ArrayRef<bool> muon,
                                  llvm::ArrayRef<int64_t> flops, int64_t ranks,
                                  int64_t alignment);

/// The elements owner-computes' gaps add to `part` beyond AdamW's layout
/// of the same parameters (contiguous, padded to a multiple of world_size
/// * alignment): 0 without owners or gaps.
int64_t getMuonGapPadding(PartitionOp part);

class StepSchedule;

/// A Muon matrix that crosses a rank's shard boundary of its group: its
/// elements [begin, end) in the group's layout and the shard's `slot`
/// elements. Owner-computes needs each matrix whole in one rank's shard
/// (zero-partition orders a group so where it can), so the lowering refuses
/// such a step and the report says so.
struct MuonCrossing {
  ParamOp param;
  PartitionOp group;
  int64_t begin = 0, end = 0, slot = 0;
};

/// The first Muon matrix, in declaration order, that crosses a shard
/// boundary of its group (of `group` only, when given) in a schedule at
/// stages 1-3 on several ranks; none otherwise.
std::optional<MuonCrossing> findMuonCrossing(const StepSchedule &s,
                                             ModuleOp module,
                                             llvm::StringRef group = {});

} // namespace mlir::zero

#endif // ZERO_DIALECT_ZERO_ANALYSIS_MUON_H
