//===- Pipeline.h - The zero-pipeline pass pipeline -------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_PIPELINES_PIPELINE_H
#define ZERO_PIPELINES_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::zero {

/// Options of `zero-pipeline`: those of every pass it runs, plus `config`.
/// Options given explicitly override the values of the config file.
struct ZeroPipelineOptions : public PassPipelineOptions<ZeroPipelineOptions> {
  Option<std::string> config{
      *this, "config",
      llvm::cl::desc("DeepSpeed ds_config.json whose keys set the options "
                     "below (explicit options win)")};
  Option<int64_t> stage{
      *this, "stage",
      llvm::cl::desc("ZeRO stage 0-3 (zero_optimization.stage)"),
      llvm::cl::init(0)};
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("Number of data-parallel ranks"),
                            llvm::cl::init(1)};
  Option<int64_t> alignment{
      *this, "alignment",
      llvm::cl::desc("Padding granule per rank (nccl_start_alignment_factor)"),
      llvm::cl::init(2)};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("Compute precision: auto, fp32, bf16 or fp16 "
                     "(fp16.enabled / bf16.enabled)"),
      llvm::cl::init("auto")};
  Option<int64_t> reduceBucketSize{
      *this, "reduce-bucket-size",
      llvm::cl::desc("Elements per gradient bucket "
                     "(zero_optimization.reduce_bucket_size)"),
      llvm::cl::init(500000000)};
  Option<bool> reduceScatter{
      *this, "reduce-scatter",
      llvm::cl::desc("Reduce-scatter buckets; false: reduce to each owner "
                     "(zero_optimization.reduce_scatter)"),
      llvm::cl::init(true)};
  Option<bool> overlapComm{
      *this, "overlap-comm",
      llvm::cl::desc("Asynchronous reductions, two bucket buffers "
                     "(zero_optimization.overlap_comm)"),
      llvm::cl::init(false)};
  Option<bool> contiguousGradients{
      *this, "contiguous-gradients",
      llvm::cl::desc("Gradients live in the bucket buffer "
                     "(zero_optimization.contiguous_gradients)"),
      llvm::cl::init(true)};
  Option<int64_t> gradientAccumulationSteps{
      *this, "gradient-accumulation-steps",
      llvm::cl::desc("Micro steps per optimizer step "
                     "(gradient_accumulation_steps)"),
      llvm::cl::init(1)};
  Option<int64_t> allgatherBucketSize{
      *this, "allgather-bucket-size",
      llvm::cl::desc("Elements per post-step all-gather "
                     "(zero_optimization.allgather_bucket_size)"),
      llvm::cl::init(500000000)};
  Option<int64_t> paramPersistenceThreshold{
      *this, "param-persistence-threshold",
      llvm::cl::desc("Stage-3 groups below this size are gathered once per "
                     "step (stage3_param_persistence_threshold)"),
      llvm::cl::init(100000)};
  Option<int64_t> maxReuseDistance{
      *this, "max-reuse-distance",
      llvm::cl::desc("Keep a gathered group when reused within this many "
                     "elements (stage3_max_reuse_distance)"),
      llvm::cl::init(1000000000)};
  Option<int64_t> prefetchBucketSize{
      *this, "prefetch-bucket-size",
      llvm::cl::desc("Elements in flight (stage3_prefetch_bucket_size)"),
      llvm::cl::init(50000000)};
  Option<int64_t> maxLiveParameters{
      *this, "max-live-parameters",
      llvm::cl::desc("Gathered-but-not-freed elements "
                     "(stage3_max_live_parameters)"),
      llvm::cl::init(1000000000)};
  Option<double> gradientClipping{
      *this, "gradient-clipping",
      llvm::cl::desc("Global-norm clipping; -1 keeps the train step's value "
                     "(gradient_clipping)"),
      llvm::cl::init(-1.0)};
  Option<int64_t> padVocab{
      *this, "pad-vocab",
      llvm::cl::desc("Pad the vocabulary table to a multiple of this many "
                     "rows, masked out of the loss (zero-pad-vocab); 0: off"),
      llvm::cl::init(0)};
  Option<std::string> offloadOptimizer{
      *this, "offload-optimizer",
      llvm::cl::desc("Where the optimizer states live: none, cpu or nvme "
                     "(zero_optimization.offload_optimizer.device)"),
      llvm::cl::init("none")};
  Option<std::string> offloadParam{
      *this, "offload-param",
      llvm::cl::desc("Where stage-3 parameter shards live: none, cpu or nvme "
                     "(zero_optimization.offload_param.device)"),
      llvm::cl::init("none")};
  Option<std::string> nvmePath{
      *this, "nvme-path",
      llvm::cl::desc("Directory of nvme offload (offload_optimizer.nvme_path; "
                     "also the parameters' without param-nvme-path)"),
      llvm::cl::init("")};
  Option<std::string> paramNvmePath{
      *this, "param-nvme-path",
      llvm::cl::desc("Directory of the parameter swap files of "
                     "offload-param=nvme (offload_param.nvme_path)"),
      llvm::cl::init("")};
  Option<int64_t> paramBufferCount{
      *this, "param-buffer-count",
      llvm::cl::desc("Swap buffers of parameters offloaded to nvme "
                     "(offload_param.buffer_count)"),
      llvm::cl::init(5)};
  Option<int64_t> paramBufferSize{
      *this, "param-buffer-size",
      llvm::cl::desc("Elements one parameter swap buffer holds, at least the "
                     "largest shard (offload_param.buffer_size)"),
      llvm::cl::init(100000000)};
  Option<int64_t> nvmeBufferCount{
      *this, "nvme-buffer-count",
      llvm::cl::desc("Swap buffers of an optimizer offloaded to nvme "
                     "(offload_optimizer.buffer_count)"),
      llvm::cl::init(4)};
  Option<int64_t> nvmeBufferSize{
      *this, "nvme-buffer-size",
      llvm::cl::desc("Elements of each fp32 optimizer state per nvme swap "
                     "buffer, a multiple of 1024"),
      llvm::cl::init(1048576)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Activation recomputation (zero-remat): none, layer, "
                     "selective, or auto (the cheapest that fits "
                     "memory-budget)"),
      llvm::cl::init("none")};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes per rank the plan's peak must fit (40GiB, 80GB): "
                     "remat (auto unless remat is given), then smaller "
                     "buckets and prefetch windows, or an error"),
      llvm::cl::init("")};
  Option<std::string> hardware{
      *this, "hardware",
      llvm::cl::desc("Cost-model preset by which memory-budget ranks the "
                     "plans that fit"),
      llvm::cl::init("h100-sxm")};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("Learning-rate schedule TYPE[:name=value,...] with "
                     "DeepSpeed's scheduler names (WarmupLR, WarmupDecayLR, "
                     "WarmupCosineLR, OneCycle, LRRangeTest; scheduler); "
                     "none removes it")};
  Option<std::string> biasCorrection{
      *this, "bias-correction",
      llvm::cl::desc("Adam bias correction: true or false "
                     "(optimizer.params.bias_correction)")};
  Option<bool> noDecayBiasNorm{
      *this, "no-decay-bias-norm",
      llvm::cl::desc("No weight decay for 1-D parameters (biases, norm "
                     "weights)"),
      llvm::cl::init(false)};
  Option<bool> noDecayEmbeddings{
      *this, "no-decay-embeddings",
      llvm::cl::desc("No weight decay for embedding tables"),
      llvm::cl::init(false)};
  Option<bool> verify{
      *this, "verify",
      llvm::cl::desc("Run zero-verify-schedule at the end of the pipeline"),
      llvm::cl::init(true)};
};

/// Adds the passes of zero-pipeline to `pm`.
void buildZeroPipeline(OpPassManager &pm, const ZeroPipelineOptions &options);

/// Adds the passes of zero-pipeline that follow autodiff and mixed
/// precision (partition to optimizer, and the verifier), with `options` and
/// no config file: the part the ZeRO configuration decides. zero-tune runs
/// it on clones of one differentiated step.
void buildZeroSchedulePipeline(OpPassManager &pm,
                               const ZeroPipelineOptions &options);

/// Registers `zero-pipeline`.
void registerZeroPipeline();

} // namespace mlir::zero

#endif // ZERO_PIPELINES_PIPELINE_H
