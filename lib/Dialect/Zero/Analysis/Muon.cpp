//===- Muon.cpp - Muon's matrices and their owners ------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/Muon.h"

#include "zero/Dialect/NN/IR/NNDialect.h"
#include "zero/Dialect/Zero/Analysis/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <limits>
#include <map>
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
    if (op->hasTrait<nn::OpTrait::TensorView>()) {
      value = op->getOperand(0);
      continue;
    }
    break;
  }
  return {};
}

/// What the train steps of a module read each parameter as.
struct ParamUses {
  /// Read as a projection's weight (ProjectionOpInterface).
  llvm::StringSet<> projections;
  /// Read as an embedding table (EmbeddingOpInterface) or as the output
  /// head (the projection into the loss's logits).
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
      if (auto projection = dyn_cast<ProjectionOpInterface>(op)) {
        for (Value w : projection.getWeightOperands())
          add(uses.projections, w);
      } else if (auto embedding = dyn_cast<EmbeddingOpInterface>(op)) {
        add(uses.embeddingsAndHeads, embedding.getTableMutable().get());
      } else if (auto loss = dyn_cast<LossOpInterface>(op)) {
        for (Value w : loss.getHeadOperands())
          add(uses.embeddingsAndHeads, w);
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

namespace {

/// The search of layoutMuonGapFree: owners first (branch and bound on the
/// busiest rank's FLOPs), then for each full assignment the AdamW
/// parameters between the ranks' matrices, as counts of each distinct size.
class GapFreeSearch {
public:
  GapFreeSearch(ArrayRef<int64_t> elements, ArrayRef<bool> muon,
                ArrayRef<int64_t> flops, int64_t shard, int64_t ranks,
                int64_t budget)
      : elements(elements), flops(flops), shard(shard), ranks(ranks),
        budget(budget), load(ranks, 0), rankFlops(ranks, 0) {
    for (size_t i = 0; i < elements.size(); ++i)
      if (muon[i])
        matrices.push_back(i);
      else if (elements[i] > 0)
        adamw[elements[i]] += 1;
    std::stable_sort(matrices.begin(), matrices.end(), [&](size_t a, size_t b) {
      return std::make_pair(flops[a], elements[a]) >
             std::make_pair(flops[b], elements[b]);
    });
    for (auto [size, count] : llvm::reverse(adamw)) {
      sizes.push_back(size);
      counts.push_back(count);
    }
    suffix.assign(matrices.size() + 1, 0);
    for (size_t k = matrices.size(); k-- > 0;)
      suffix[k] = suffix[k + 1] + elements[matrices[k]];
    int64_t total = 0, most = 0;
    for (size_t i : matrices) {
      total += flops[i];
      most = std::max(most, flops[i]);
    }
    lowerBound = std::max(most, (total + ranks - 1) / ranks);
    assign.assign(matrices.size(), 0);
  }

  /// Owners of matrices[k...] after those before it.
  void assignFrom(size_t k) {
    nodes += ranks;
    if (nodes > budget || bestMax == lowerBound)
      return;
    int64_t busiest = *std::max_element(rankFlops.begin(), rankFlops.end());
    if (busiest >= bestMax)
      return;
    int64_t free = 0;
    for (int64_t l : load)
      free += shard - l;
    if (free < suffix[k])
      return;
    if (k == matrices.size()) {
      take.assign(ranks, SmallVector<int64_t>(sizes.size(), 0));
      SmallVector<int64_t> left = counts;
      before.assign(ranks + 1, 0);
      for (int64_t r = 0; r < ranks; ++r)
        before[r + 1] = before[r] + load[r];
      if (placeAdamW(0, 0, left)) {
        bestMax = busiest;
        bestAssign = assign;
        bestTake = take;
      }
      return;
    }
    size_t m = matrices[k];
    // An equal matrix after an equal one goes to the same or a later rank.
    bool equal = k > 0 && elements[matrices[k - 1]] == elements[m] &&
                 flops[matrices[k - 1]] == flops[m];
    int64_t first = equal ? assign[k - 1] : 0;
    SmallVector<int64_t> order;
    for (int64_t r = first; r < ranks; ++r)
      if (load[r] + elements[m] <= shard)
        order.push_back(r);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return rankFlops[a] < rankFlops[b];
    });
    // Packing: an equal matrix tries its predecessor's rank first, so that
    // many equal matrices (layers grouped) fill ranks in turn, as the
    // symmetry rule above wants them, instead of spreading and backtracking.
    if (pack && equal && llvm::is_contained(order, first)) {
      llvm::erase(order, first);
      order.insert(order.begin(), first);
    }
    for (int64_t r : order) {
      assign[k] = r;
      load[r] += elements[m];
      rankFlops[r] += flops[m];
      assignFrom(k + 1);
      load[r] -= elements[m];
      rankFlops[r] -= flops[m];
    }
  }

  /// The AdamW elements before rank r's matrices bring the prefix from
  /// `prefix` into the range that puts them whole in slot r.
  bool placeAdamW(int64_t r, int64_t prefix, SmallVector<int64_t> &left) {
    while (r < ranks && load[r] == 0)
      ++r;
    if (r == ranks)
      return true;
    if (++nodes > budget)
      return false;
    int64_t lo = r * shard - before[r] - prefix;
    int64_t hi = (r + 1) * shard - before[r + 1] - prefix;
    if (hi < 0)
      return false;
    return chooseSizes(r, 0, 0, std::max<int64_t>(lo, 0), hi, prefix, left);
  }

  /// Counts of sizes[i...] adding up to [lo, hi] with `sum` so far, fewest
  /// first.
  bool chooseSizes(int64_t r, size_t i, int64_t sum, int64_t lo, int64_t hi,
                   int64_t prefix, SmallVector<int64_t> &left) {
    if (++nodes > budget)
      return false;
    if (i == sizes.size())
      return sum >= lo && placeAdamW(r + 1, prefix + sum, left);
    int64_t rest = 0;
    for (size_t j = i; j < sizes.size(); ++j)
      rest += sizes[j] * left[j];
    if (sum + rest < lo)
      return false;
    int64_t most = std::min(left[i], (hi - sum) / sizes[i]);
    for (int64_t n = 0; n <= most; ++n) {
      left[i] -= n;
      take[r][i] += n;
      if (chooseSizes(r, i + 1, sum + n * sizes[i], lo, hi, prefix, left))
        return true;
      left[i] += n;
      take[r][i] -= n;
    }
    return false;
  }

  std::optional<MuonGapFreeLayout> run();

  /// Whether the matrices may fit the slots at all: no more than j * ranks
  /// of them larger than shard / (j + 1), since a slot holds at most j such.
  bool mayFit() const;

  /// Tries equal matrices on their predecessor's rank first (see assignFrom).
  bool pack = false;

private:
  ArrayRef<int64_t> elements, flops;
  int64_t shard, ranks, budget, nodes = 0, lowerBound = 0;
  /// Muon's matrices, most FLOPs first; AdamW's sizes, largest first.
  SmallVector<size_t> matrices;
  std::map<int64_t, int64_t> adamw;
  SmallVector<int64_t> sizes, counts, suffix;
  /// The assignment being tried: per rank its elements, FLOPs and the
  /// elements of the ranks before it; per matrix its rank; per rank the
  /// AdamW sizes before its matrices.
  SmallVector<int64_t> load, rankFlops, before, assign;
  SmallVector<SmallVector<int64_t>> take;
  int64_t bestMax = std::numeric_limits<int64_t>::max();
  SmallVector<int64_t> bestAssign;
  SmallVector<SmallVector<int64_t>> bestTake;
};

bool GapFreeSearch::mayFit() const {
  SmallVector<int64_t> sizes;
  for (size_t i : matrices)
    sizes.push_back(elements[i]);
  llvm::sort(sizes, std::greater<int64_t>());
  // sizes[n - 1] > shard / (j + 1) for the n largest: a slot holds at most
  // j of them (j = shard / sizes[n - 1], rounded down).
  for (size_t n = 1; n <= sizes.size(); ++n) {
    int64_t perSlot = shard / sizes[n - 1];
    if (perSlot == 0 || int64_t(n) > perSlot * ranks)
      return false;
  }
  return true;
}

std::optional<MuonGapFreeLayout> GapFreeSearch::run() {
  if (shard <= 0 || ranks < 1 || !mayFit())
    return std::nullopt;
  assignFrom(0);
  if (bestAssign.size() != matrices.size() || bestTake.empty())
    return std::nullopt;
  MuonGapFreeLayout layout;
  layout.owner.assign(elements.size(), -1);
  layout.flops.assign(ranks, 0);
  for (auto [k, m] : llvm::enumerate(matrices)) {
    layout.owner[m] = bestAssign[k];
    layout.flops[bestAssign[k]] += flops[m];
  }
  // AdamW's parameters of each size in declaration order, taken in turn.
  std::map<int64_t, SmallVector<size_t>> pool;
  for (size_t i = 0; i < elements.size(); ++i)
    if (layout.owner[i] < 0 && elements[i] > 0)
      pool[elements[i]].push_back(i);
  std::map<int64_t, size_t> used;
  for (int64_t r = 0; r < ranks; ++r) {
    SmallVector<size_t> run;
    for (auto [i, size] : llvm::enumerate(sizes))
      for (int64_t n = 0; n < bestTake[r][i]; ++n)
        run.push_back(pool[size][used[size]++]);
    llvm::sort(run);
    llvm::append_range(layout.order, run);
    for (size_t i = 0; i < elements.size(); ++i)
      if (layout.owner[i] == r)
        layout.order.push_back(i);
  }
  // The rest of AdamW's after the last matrices.
  for (size_t i = 0; i < elements.size(); ++i)
    if (layout.owner[i] < 0 &&
        (elements[i] == 0 ||
         llvm::find(pool[elements[i]], i) - pool[elements[i]].begin() >=
             int64_t(used[elements[i]])))
      layout.order.push_back(i);
  return layout;
}

} // namespace

std::optional<MuonGapFreeLayout>
mlir::zero::layoutMuonGapFree(ArrayRef<int64_t> elements, ArrayRef<bool> muon,
                              ArrayRef<int64_t> flops, int64_t shard,
                              int64_t ranks, int64_t budget) {
  assert(elements.size() == muon.size() && elements.size() == flops.size() &&
         "one flag and one FLOP count per parameter");
  if (std::optional<MuonGapFreeLayout> layout =
          GapFreeSearch(elements, muon, flops, shard, ranks, budget).run())
    return layout;
  // Many equal matrices (groups of layers) defeat the balancing order's
  // first descent; packing them finds such layouts at once.
  GapFreeSearch packed(elements, muon, flops, shard, ranks, budget);
  packed.pack = true;
  return packed.run();
}

namespace {

/// layoutMuonGapped's placement in slots of `slot` elements; false when
/// some AdamW parameter finds no room, with `left` its elements.
bool placeGapped(ArrayRef<int64_t> elements, ArrayRef<int64_t> owner,
                 ArrayRef<int64_t> load, int64_t ranks, int64_t slot,
                 MuonGappedLayout &layout, int64_t &left) {
  size_t num = elements.size();
  layout.order.clear();
  layout.offsets.assign(num, 0);
  SmallVector<bool> placed(num, false);
  // [begin, end) leaves each later slot it reaches room for its matrices.
  auto fits = [&](int64_t begin, int64_t end) {
    if (end > ranks * slot)
      return false;
    for (int64_t q = begin / slot + 1; q < ranks && q * slot < end; ++q)
      if (end + load[q] > (q + 1) * slot)
        return false;
    return true;
  };
  int64_t cursor = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    cursor = std::max(cursor, r * slot);
    for (size_t i = 0; i < num; ++i)
      if (owner[i] == r) {
        layout.offsets[i] = cursor;
        layout.order.push_back(i);
        cursor += elements[i];
      }
    for (size_t i = 0; i < num && cursor < (r + 1) * slot; ++i)
      if (owner[i] < 0 && !placed[i] && fits(cursor, cursor + elements[i])) {
        placed[i] = true;
        layout.offsets[i] = cursor;
        layout.order.push_back(i);
        cursor += elements[i];
      }
  }
  left = 0;
  for (size_t i = 0; i < num; ++i)
    if (owner[i] < 0 && !placed[i])
      left += elements[i];
  // The end of the last parameter (a last rank without matrices or AdamW
  // parameters moves the cursor, not the end).
  layout.end = 0;
  for (size_t i : layout.order)
    layout.end = std::max(layout.end, layout.offsets[i] + elements[i]);
  return left == 0;
}

} // namespace

MuonGappedLayout mlir::zero::layoutMuonGapped(ArrayRef<int64_t> elements,
                                              ArrayRef<bool> muon,
                                              ArrayRef<int64_t> flops,
                                              int64_t ranks,
                                              int64_t alignment) {
  assert(elements.size() == muon.size() && elements.size() == flops.size() &&
         ranks >= 1 && alignment >= 1 &&
         "one flag and one FLOP count per parameter, and some ranks");
  SmallVector<int64_t> matrixElements, matrixFlops;
  int64_t adamw = 0;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (muon[i]) {
      matrixElements.push_back(elements[i]);
      matrixFlops.push_back(flops[i]);
    } else {
      adamw += elements[i];
    }
  }
  MuonSlotLayout slots =
      layoutMuonSlots(matrixElements, matrixFlops, adamw, ranks, alignment);
  MuonGappedLayout layout;
  layout.owner.assign(elements.size(), -1);
  for (size_t i = 0, k = 0; i < elements.size(); ++i)
    if (muon[i])
      layout.owner[i] = slots.owner[k++];
  // Each grown slot adds `ranks` elements of room; grow by what did not
  // fit over the ranks, in whole alignment units.
  int64_t slot = slots.slot, left = 0;
  while (!placeGapped(elements, layout.owner, slots.muonElements, ranks, slot,
                      layout, left)) {
    int64_t grow = (left + ranks - 1) / ranks;
    slot += (grow + alignment - 1) / alignment * alignment;
  }
  layout.slot = slot;
  return layout;
}

int64_t mlir::zero::getMuonGapPadding(PartitionOp part) {
  if (!part.getOwners() || part.getStageValue() == 0)
    return 0;
  int64_t elements = 0;
  for (Attribute ref : part.getParams())
    if (auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
            part, cast<SymbolRefAttr>(ref)))
      elements += param.getNumElements();
  int64_t unit = part.getWorldSizeValue() * int64_t(part.getAlignment());
  int64_t minimal = (elements + unit - 1) / unit * unit;
  return part.getPaddedNumelValue() - minimal;
}

std::optional<MuonCrossing> mlir::zero::findMuonCrossing(const StepSchedule &s,
                                                         ModuleOp module,
                                                         StringRef group) {
  if (s.getStage() == 0 || s.getWorldSize() == 1)
    return std::nullopt;
  for (ParamOp p : getMuonParams(module)) {
    const ParamLocation *loc = s.lookupParam(p.getSymName());
    if (!loc || (!group.empty() && loc->partition.getSymName() != group))
      continue;
    PartitionOp part = loc->partition;
    int64_t slot = part.getShardNumel();
    int64_t begin = loc->offset, end = loc->offset + p.getNumElements();
    if (slot > 0 && begin / slot != (end - 1) / slot)
      return MuonCrossing{p, part, begin, end, slot};
  }
  return std::nullopt;
}
