//===- ExpertParallel.cpp - Model states under expert parallelism ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// zero-estimate --ep-size P: the expert parameters of a model file split
// over P ranks (E/P experts a layer each) and partitioned over the n/P
// ranks that hold the same experts, the dense ones over all n, as
// zero-expert-parallel and zero-partition place them. The bytes per
// parameter are the estimate's own (modelStateSplit).
//
//===----------------------------------------------------------------------===//

#include "EstimateDetail.h"

using namespace llvm;
using namespace zero::estimate;
using namespace zero::estimate::detail;

Error zero::estimate::detail::addExpertParallel(Estimate &e, const Terms &t) {
  const int64_t p = e.options.epSize, n = e.n, stage = t.stage;
  const std::optional<ModelCounts> &model = e.model;
  if (!model)
    return createStringError("--ep-size splits the experts of a model: give a "
                             "model file with MoE layers, not --params");
  if (!model->experts)
    return createStringError(Twine("--ep-size ") + Twine(p) + ": '" +
                             model->file +
                             "' has no experts (no op reads a parameter as "
                             "experts)");
  const mlir::zero::ExpertParamCounts &x = *model->experts;
  if (n % p != 0)
    return createStringError(Twine("--ep-size ") + Twine(p) +
                             " must divide the " + Twine(n) + " ranks");
  if (x.minExperts % p != 0 || x.maxExperts % p != 0)
    return createStringError(Twine("--ep-size ") + Twine(p) +
                             " must divide every layer's expert count (" +
                             Twine(x.minExperts) + " to " +
                             Twine(x.maxExperts) + ")");
  if (t.frozen > 0)
    return createStringError("--ep-size with frozen parameters is not "
                             "estimated (zero-report plans it exactly)");

  ExpertParallelEstimate ep;
  ep.size = p;
  ep.experts = x.maxExperts;
  ep.expertsPerRank = x.maxExperts / p;
  ep.expertParams = x.expertParams;
  ep.expertParamsPerRank = x.expertParams / p;
  ep.replicas = n / p;
  ep.denseParams = x.denseParams;
  // Stage 0 shards nothing, so it pads nothing; otherwise each layout pads
  // to its ranks times the alignment.
  int64_t align = e.options.alignment;
  ep.densePadded =
      stage == 0 ? ep.denseParams : roundUp(ep.denseParams, n * align);
  ep.expertPadded = stage == 0
                        ? ep.expertParamsPerRank
                        : roundUp(ep.expertParamsPerRank, ep.replicas * align);

  auto [full, shard] = modelStateSplit(stage, t.c, t.optimizerBytes());
  auto formula = [&](StringRef whole, StringRef sharded, StringRef ranks) {
    std::string f;
    if (full)
      f = std::to_string(full) + whole.str();
    if (shard)
      f += (full ? " + " : "") + std::to_string(shard) + sharded.str() + "/" +
           ranks.str();
    return f;
  };
  int64_t dense = full * ep.denseParams + shard * (ep.densePadded / n);
  int64_t experts =
      full * ep.expertParamsPerRank + shard * (ep.expertPadded / ep.replicas);
  ep.lines.push_back({"ep_dense_states", "ours ep: dense states",
                      formula("D", "D'", "n"), dense});
  ep.lines.push_back({"ep_expert_states", "ours ep: expert states",
                      formula("X/P", "(X/P)'", "(n/P)"), experts});
  ep.modelStateBytes = dense + experts;
  ep.lines.push_back({"ep_model_states", "ours ep: model states",
                      "dense + expert states", ep.modelStateBytes});
  e.expertParallel = std::move(ep);
  return Error::success();
}
