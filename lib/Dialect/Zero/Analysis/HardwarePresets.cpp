//===- HardwarePresets.cpp - Machines the cost model knows ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"

using namespace mlir;
using namespace mlir::zero;

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

// Where every number comes from (data sheets, public measurements and our
// own calibration runs) is in docs/HardwarePresets.md. The `cpu` preset's
// rows by ranks per node are generated from zrt-bench-calibrate's results by
// bench/cpu_preset.py.
static const RankShare kCpuShares[] = {
#include "CpuPresetShares.inc"
};

static const HardwarePreset kPresets[] = {
    {"h100-sxm",
     "NVIDIA H100 SXM 80GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3 bandwidth, "
     "NCCL ring busbw 365 GB/s",
     /*gemmFlops16=*/0.8 * 989e12, /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/2.97e12, /*linkBandwidth=*/365e9,
     /*collectiveLatency=*/1.8e-6, /*kernelOverhead=*/3e-6},
    {"h200-sxm",
     "NVIDIA H200 SXM 141GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3e bandwidth, "
     "NCCL ring busbw 362 GB/s",
     /*gemmFlops16=*/0.8 * 989e12, /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/4.15e12, /*linkBandwidth=*/362e9,
     /*collectiveLatency=*/2.1e-6, /*kernelOverhead=*/3e-6},
    {"cpu",
     "One rank of this 2-core development machine beside a second rank "
     "(measured by zrt-bench-calibrate): small-model zrt_matmul and "
     "streaming kernels on one thread, Open MPI shared-memory collectives "
     "between ranks on shared cores",
     /*gemmFlops16=*/36e9, /*gemmFlops32=*/36e9,
     /*memoryBandwidth=*/11e9, /*linkBandwidth=*/0.86e9,
     /*collectiveLatency=*/0.41e-3, /*kernelOverhead=*/0.22e-6,
     /*shares=*/kCpuShares},
};

HardwarePreset HardwarePreset::forWorldSize(int64_t worldSize) const {
  HardwarePreset hw = *this;
  const RankShare *row = nullptr;
  for (const RankShare &share : shares)
    if (share.ranks <= worldSize)
      row = &share;
  if (!row)
    return hw;
  // Beyond the last calibrated row, more processes divide the same cores.
  double crowd = worldSize > row->ranks ? double(row->ranks) / worldSize : 1;
  hw.gemmFlops16 = hw.gemmFlops32 = row->gemmFlops * crowd;
  hw.memoryBandwidth = row->memoryBandwidth * crowd;
  hw.kernelOverhead = row->kernelOverhead;
  if (row->linkBandwidth > 0)
    hw.linkBandwidth = row->linkBandwidth;
  if (row->collectiveLatency > 0)
    hw.collectiveLatency = row->collectiveLatency;
  hw.attentionFlops = row->attentionFlops * crowd;
  hw.activationElements = row->activationElements * crowd;
  hw.backToBackLatency = row->backToBackLatency;
  hw.skewCompute = row->skewCompute;
  hw.reduceScatterBandwidth = row->reduceScatterBandwidth;
  hw.allGatherBandwidth = row->allGatherBandwidth;
  hw.shares = {};
  return hw;
}

ArrayRef<HardwarePreset> mlir::zero::getHardwarePresets() { return kPresets; }

const HardwarePreset *mlir::zero::lookupHardwarePreset(StringRef name) {
  for (const HardwarePreset &hw : kPresets)
    if (hw.name == name)
      return &hw;
  return nullptr;
}
