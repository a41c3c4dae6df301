//===- HardwarePresets.cpp - Machines the cost model knows ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/CostModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

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

// Presets without our own measurements derive their rates from the data
// sheet with the ratios measured on H100/H200 (docs/HardwarePresets.md):
// GEMM at 0.8 of the dense peak, memory at 0.88 of the data-sheet bandwidth,
// collectives at 0.81 of the per-direction link rate a ring can use.
constexpr double kGemm = 0.8, kStream = 0.88, kBusbw = 0.81;
// The A100 has a measured matmul rate of its own: 267.9 of its 312 TFLOP/s
// (the same MAMF table as the H100's 0.8), taken for fp32 too as on H100;
// and a measured STREAM triad of 1.70 TB/s on the 80GB part (Azure ND A100
// v4), 0.83 of its data sheet's 2,039 GB/s.
constexpr double kGemmA100 = 267.9 / 312, kStreamA100 = 1.70e12;
// The torchtitan hosts' H100 SXM 96GB runs at a 500 W power limit, whose
// tensor clock no source gives. The data sheets' dense BF16 peaks of the two
// 132-SM Hopper parts are at the tensor clock each sustains at its power
// limit: the SXM's 989 TFLOP/s at 700 W (1,830 MHz), the NVL's 835 at 400 W
// (1,545 MHz). The 500 W part is taken on the line between them, which lies
// below the clock a concave power curve gives: 886 TFLOP/s.
constexpr double kH100Peak500W =
    835e12 + (500.0 - 400) / (700 - 400) * (989e12 - 835e12);
// Optimizer offload (assumed, not measured here): pinned copies at 0.8 of
// the PCIe x16 rate in one direction, and the CPU Adam of the host at 40
// GB/s through host memory.
constexpr double kPcie = 0.8, kHostAdam = 40e9;
// Optimizer offload to NVMe (assumed): one PCIe Gen4 data-center SSD per
// GPU, sequential O_DIRECT reads at 6 GB/s and writes at 3 GB/s.
constexpr double kNvmeRead = 6e9, kNvmeWrite = 3e9;
// The `cpu` preset's disk: this development machine's virtual disk as
// bench/nvme.py measured it with one process (docs/benchmarks.md); its
// ranks share it.
constexpr double kCpuNvmeRead = 1e9, kCpuNvmeWrite = 1.9e9;

// The fabric between nodes (docs/HardwarePresets.md): InfiniBand NDR at
// 400 Gb/s per link (ConnectX-7, one per GPU on DGX H100/H200-class and
// MI300X nodes), and 100 Gb/s links (HDR100/EDR class; four per node on
// A100 clusters such as AWS p4d). A ring step across nodes costs what
// NCCL's tuning model charges a network hop of its ring (Simple protocol).
constexpr double kIbNdr = 400e9 / 8, kIb100 = 100e9 / 8;
constexpr double kNetLatency = 9.6e-6;

// Launch and gap: the GPU idles between two kernels of an eager step while
// the host launches the next; PyTorch eager's GPT-2 step on one H100
// (docs/benchmarks.md) took 52.26 ms of which its 1968 kernels ran 45.82:
// 3.3 us a kernel.
constexpr double kLaunch = 3.3e-6;
// A 16-bit GEMM with a dimension that is not a multiple of 8 elements runs
// on unaligned kernels: GPT-2's LM-head GEMMs over its 50257-word
// vocabulary on that H100 moved 3 x 632 GFLOP in 15.5 ms, 122 TFLOP/s
// against the 791 of the aligned rate.
constexpr double kMisaligned = 122.0 / 791.0;

// FlashAttention-2 (the kernel of PyTorch's scaled_dot_product_attention and
// of the peers' training runs) on an H100 SXM5 in BF16, TFLOP/s by query
// length: FlashAttention-3 (arXiv 2407.08608), Figure 5 (forward) and
// Figure 6 (backward), its FlashAttention-2 bars.
static const double kFaSeqLens[] = {512, 1024, 2048, 4096, 8192, 16384};
static const double kFa2Forward64[] = {282, 306, 318, 321, 322, 324};
static const double kFa2Forward128[] = {309, 350, 362, 368, 370, 370};
static const double kFa2ForwardCausal128[] = {191, 260, 298, 319, 333, 335};
static const double kFa2Backward64[] = {198, 238, 264, 279, 287, 291};
static const double kFa2Backward128[] = {214, 260, 291, 310, 318, 322};
constexpr double kH100Peak16 = 989e12;
static const AttentionRates kFa2Hopper = {
    kFaSeqLens,     kFa2Forward64,   kFa2Forward128, kFa2ForwardCausal128,
    kFa2Backward64, kFa2Backward128, kH100Peak16};
// On A100, FlashAttention-2 (arXiv 2307.08691, section 4.1) reaches up to
// 73% of the dense peak forward and 63% backward; on the H100 above its
// best is 370 and 322 of 989 TFLOP/s. Other Ampere and Ada presets take
// the A100's.
constexpr double kFa2A100Forward = 0.73 / (370 / 989.0),
                 kFa2A100Backward = 0.63 / (322 / 989.0);
static const AttentionRates kFa2Ampere = {kFaSeqLens,
                                          kFa2Forward64,
                                          kFa2Forward128,
                                          kFa2ForwardCausal128,
                                          kFa2Backward64,
                                          kFa2Backward128,
                                          kH100Peak16,
                                          /*forwardScale=*/kFa2A100Forward,
                                          /*backwardScale=*/kFa2A100Backward};

// NCCL within one node of 8 GPUs by message size: the busbw of nccl-tests'
// all_reduce_perf from 1 KiB to 8 GiB (Azure/AI-benchmarking-guide,
// Azure_Results, "NCCL Bandwidth"). A ring all-reduce is a reduce-scatter
// and an all-gather of the same array over the same ring, so its busbw at
// a size is theirs; on Hopper NCCL takes NVLink SHARP from a few MiB up
// only where it is the faster, so the ring's is capped at its own measured
// plateau (linkBandwidth). A100 has no NVLink SHARP.
static const double kSweepBytes[] = {
    1024,      2048,      4096,       8192,       16384,      32768,
    65536,     131072,    262144,     524288,     1048576,    2097152,
    4194304,   8388608,   16777216,   33554432,   67108864,   134217728,
    268435456, 536870912, 1073741824, 2147483648, 4294967296, 8589934592};
static const double kNcclNdH100[] = {
    0.07,   0.14,   0.27,   0.53,   0.95,   1.71,   2.72,   5.40,
    10.86,  21.35,  43.70,  81.93,  128.73, 172.13, 234.45, 295.53,
    361.78, 400.61, 423.38, 438.46, 466.35, 472.36, 475.54, 478.87};
static const double kNcclNdH200[] = {
    0.06,   0.12,   0.23,   0.47,   0.93,   1.84,   3.72,   7.39,
    14.75,  29.38,  52.96,  88.78,  138.44, 181.94, 240.41, 300.91,
    368.11, 412.45, 432.24, 442.72, 467.58, 472.57, 477.41, 479.98};
static const double kNcclNdA100[] = {
    0.04,   0.08,   0.17,   0.33,   0.67,   1.37,   2.70,   5.15,
    10.11,  19.24,  36.22,  53.54,  71.43,  89.99,  109.22, 132.77,
    166.63, 174.18, 213.87, 221.58, 228.10, 230.22, 230.48, 231.58};
static const BusBandwidthCurve kBusbwH100 = {kSweepBytes, kNcclNdH100};
static const BusBandwidthCurve kBusbwH200 = {kSweepBytes, kNcclNdH200};
static const BusBandwidthCurve kBusbwA100 = {kSweepBytes, kNcclNdA100};

static const HardwarePreset kPresets[] = {
    {"a100-40gb",
     "NVIDIA A100 SXM 40GB, 8 GPUs on NVLink3/NVSwitch (data sheet: 312 "
     "TFLOP/s dense bf16, 19.5 TFLOP/s fp32, 1555 GB/s HBM2, 600 GB/s "
     "NVLink)",
     /*gemmFlops16=*/kGemmA100 * 312e12,
     /*gemmFlops32=*/kGemmA100 * 19.5e12,
     /*memoryBandwidth=*/kStream * 1555e9,
     /*linkBandwidth=*/kBusbw * 300e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/4,
     /*interNodeLinkBandwidth=*/kIb100,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/40'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 32e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/312e12,
     /*multiprocessors=*/108,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Ampere,
     /*busbwCurve=*/&kBusbwA100},
    {"a100-80gb",
     "NVIDIA A100 SXM 80GB, 8 GPUs on NVLink3/NVSwitch (data sheet: 312 "
     "TFLOP/s dense bf16, 19.5 TFLOP/s fp32, 2039 GB/s HBM2e, 600 GB/s "
     "NVLink)",
     /*gemmFlops16=*/kGemmA100 * 312e12,
     /*gemmFlops32=*/kGemmA100 * 19.5e12,
     /*memoryBandwidth=*/kStreamA100,
     /*linkBandwidth=*/kBusbw * 300e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/4,
     /*interNodeLinkBandwidth=*/kIb100,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/80'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 32e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/312e12,
     /*multiprocessors=*/108,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Ampere,
     /*busbwCurve=*/&kBusbwA100},
    {"l4",
     "NVIDIA L4 24GB, 8 GPUs on PCIe Gen4 x16 (data sheet: 121 TFLOP/s dense "
     "bf16, 30.3 TFLOP/s fp32, 300 GB/s GDDR6, 64 GB/s PCIe)",
     /*gemmFlops16=*/kGemm * 121e12,
     /*gemmFlops32=*/kGemm * 30.3e12,
     /*memoryBandwidth=*/kStream * 300e9,
     /*linkBandwidth=*/kBusbw * 32e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/1,
     /*interNodeLinkBandwidth=*/kIb100,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/24'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 32e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/121e12,
     /*multiprocessors=*/58,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Ampere,
     /*busbwCurve=*/nullptr},
    {"rtx-4090",
     "NVIDIA GeForce RTX 4090 24GB, 8 GPUs on PCIe Gen4 x16 (Ada whitepaper: "
     "165.2 TFLOP/s dense bf16 with fp32 accumulate, 82.6 TFLOP/s fp32, "
     "1008 GB/s GDDR6X)",
     /*gemmFlops16=*/kGemm * 165.2e12,
     /*gemmFlops32=*/kGemm * 82.6e12,
     /*memoryBandwidth=*/kStream * 1008e9,
     /*linkBandwidth=*/kBusbw * 32e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/1,
     /*interNodeLinkBandwidth=*/kIb100,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/24'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 32e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/165.2e12,
     /*multiprocessors=*/128,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Ampere,
     /*busbwCurve=*/nullptr},
    {"h100-sxm",
     "NVIDIA H100 SXM 80GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3 bandwidth, "
     "NCCL ring busbw 365 GB/s",
     /*gemmFlops16=*/0.8 * 989e12,
     /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/2.97e12,
     /*linkBandwidth=*/365e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/8,
     /*interNodeLinkBandwidth=*/kIbNdr,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/80'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 64e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/989e12,
     /*multiprocessors=*/132,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Hopper,
     /*busbwCurve=*/&kBusbwH100},
    {"h100-sxm-96gb",
     "NVIDIA H100 SXM 96GB HBM2e at 500 W, 8 GPUs on NVLink4/NVSwitch (the "
     "torchtitan benchmark hosts: 2.4 TB/s HBM2e; a 886 TFLOP/s dense bf16 "
     "peak between the 700 W SXM's and the 400 W NVL's; links as h100-sxm)",
     /*gemmFlops16=*/0.8 * kH100Peak500W,
     /*gemmFlops32=*/0.8 * 66.9e12 * kH100Peak500W / 989e12,
     /*memoryBandwidth=*/kStream * 2400e9,
     /*linkBandwidth=*/365e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/8,
     /*interNodeLinkBandwidth=*/kIbNdr,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/96'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 64e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/kH100Peak500W,
     /*multiprocessors=*/132,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Hopper,
     /*busbwCurve=*/&kBusbwH100},
    {"h100-pcie",
     "NVIDIA H100 PCIe 80GB, 8 GPUs on PCIe Gen5 x16 (data sheet: 756 "
     "TFLOP/s dense bf16, 51 TFLOP/s fp32, 2000 GB/s HBM2e, 128 GB/s PCIe; "
     "the NVLink bridge joins pairs only)",
     /*gemmFlops16=*/kGemm * 756e12,
     /*gemmFlops32=*/kGemm * 51e12,
     /*memoryBandwidth=*/kStream * 2000e9,
     /*linkBandwidth=*/kBusbw * 64e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/4,
     /*interNodeLinkBandwidth=*/kIb100,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/80'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 64e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/756e12,
     /*multiprocessors=*/114,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Hopper,
     /*busbwCurve=*/nullptr},
    {"h200-sxm",
     "NVIDIA H200 SXM 141GB, 8 GPUs on NVLink4/NVSwitch: GEMM at 80% of the "
     "989 TFLOP/s bf16 peak (measured MAMF), STREAM-triad HBM3e bandwidth, "
     "NCCL ring busbw 362 GB/s",
     /*gemmFlops16=*/0.8 * 989e12,
     /*gemmFlops32=*/0.8 * 66.9e12,
     /*memoryBandwidth=*/4.15e12,
     /*linkBandwidth=*/362e9,
     /*collectiveLatency=*/2.1e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/8,
     /*interNodeLinkBandwidth=*/kIbNdr,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/141'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 64e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/989e12,
     /*multiprocessors=*/132,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/&kFa2Hopper,
     /*busbwCurve=*/&kBusbwH200},
    {"mi300x",
     "AMD Instinct MI300X 192GB, 8 GPUs on Infinity Fabric (data sheet: "
     "1307.4 TFLOP/s dense bf16, 163.4 TFLOP/s fp32, 5.3 TB/s HBM3, 7 links "
     "of 128 GB/s)",
     /*gemmFlops16=*/kGemm * 1307.4e12,
     /*gemmFlops32=*/kGemm * 163.4e12,
     /*memoryBandwidth=*/kStream * 5.3e12,
     /*linkBandwidth=*/kBusbw * 448e9,
     /*collectiveLatency=*/1.8e-6,
     /*kernelOverhead=*/kLaunch,
     /*interNodeLinks=*/8,
     /*interNodeLinkBandwidth=*/kIbNdr,
     /*interNodeLatency=*/kNetLatency,
     /*deviceMemoryBytes=*/192'000'000'000,
     /*shares=*/{},
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/kPcie * 64e9,
     /*hostMemoryBandwidth=*/kHostAdam,
     /*nvmeReadBandwidth=*/kNvmeRead,
     /*nvmeWriteBandwidth=*/kNvmeWrite,
     /*copiesOnComputeStream=*/false,
     /*nvmeSharedByRanks=*/false,
     /*peakFlops16=*/1307.4e12,
     /*multiprocessors=*/304,
     /*misalignedGemmFraction=*/kMisaligned,
     /*attention=*/nullptr,
     /*busbwCurve=*/nullptr},
    {"cpu",
     "One rank of this 2-core development machine beside a second rank "
     "(measured by zrt-bench-calibrate): small-model zrt_matmul and "
     "streaming kernels on one thread, Open MPI shared-memory collectives "
     "between ranks on shared cores",
     /*gemmFlops16=*/36e9,
     /*gemmFlops32=*/36e9,
     /*memoryBandwidth=*/11e9,
     /*linkBandwidth=*/0.86e9,
     /*collectiveLatency=*/0.41e-3,
     /*kernelOverhead=*/0.22e-6,
     /*interNodeLinks=*/0,
     /*interNodeLinkBandwidth=*/0,
     /*interNodeLatency=*/0,
     /*deviceMemoryBytes=*/0,
     /*shares=*/kCpuShares,
     /*attentionFlops=*/0,
     /*activationElements=*/0,
     /*backToBackLatency=*/0,
     /*skewCompute=*/0,
     /*reduceScatterBandwidth=*/0,
     /*allGatherBandwidth=*/0,
     /*hostLinkBandwidth=*/0,
     /*hostMemoryBandwidth=*/0,
     /*nvmeReadBandwidth=*/kCpuNvmeRead,
     /*nvmeWriteBandwidth=*/kCpuNvmeWrite,
     /*copiesOnComputeStream=*/true,
     /*nvmeSharedByRanks=*/true},
};

/// Other names of presets.
static const std::pair<StringRef, StringRef> kAliases[] = {
    {"h200", "h200-sxm"}};

/// `values` at query length `seqLen`, interpolated in log2 of the length
/// between the measured ones and clamped to the first and last.
static double interpolate(ArrayRef<double> seqLens, ArrayRef<double> values,
                          double seqLen) {
  if (seqLen <= seqLens.front())
    return values.front();
  for (size_t i = 1; i < seqLens.size(); ++i)
    if (seqLen <= seqLens[i]) {
      double t = std::log2(seqLen / seqLens[i - 1]) /
                 std::log2(seqLens[i] / seqLens[i - 1]);
      return values[i - 1] + t * (values[i] - values[i - 1]);
    }
  return values.back();
}

double AttentionRates::getPeakFraction(int64_t headDim, int64_t seqLen,
                                       bool causal, bool backward) const {
  double t = std::clamp((double(headDim) - 64) / 64, 0.0, 1.0);
  ArrayRef<double> at64 = backward ? backward64 : forward64;
  ArrayRef<double> at128 = backward ? backward128 : forward128;
  double tflops = (1 - t) * interpolate(seqLens, at64, seqLen) +
                  t * interpolate(seqLens, at128, seqLen);
  if (causal)
    tflops *= interpolate(seqLens, forwardCausal128, seqLen) /
              interpolate(seqLens, forward128, seqLen);
  return tflops * 1e12 / referencePeak *
         (backward ? backwardScale : forwardScale);
}

double BusBandwidthCurve::getBusBandwidth(double chunkBytes,
                                          double peak) const {
  double size = chunkBytes * double(ranks);
  double gbs;
  if (size <= bytes.front())
    gbs = gbps.front() * size / bytes.front();
  else
    gbs = interpolate(bytes, gbps, size);
  return std::min(gbs * 1e9, peak);
}

HardwarePreset HardwarePreset::forWorldSize(int64_t worldSize) const {
  HardwarePreset hw = *this;
  if (nvmeSharedByRanks && worldSize > 1) {
    hw.nvmeReadBandwidth /= double(worldSize);
    hw.nvmeWriteBandwidth /= double(worldSize);
  }
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

double HardwarePreset::getInterNodeBandwidth() const {
  return kBusbw * double(interNodeLinks) * interNodeLinkBandwidth;
}

LogicalResult mlir::zero::applyInterNodeBandwidth(HardwarePreset &hw,
                                                  StringRef text,
                                                  std::string &error) {
  if (text.empty())
    return success();
  StringRef number = text.trim();
  for (StringRef unit : {"Gb/s", "Gbps"})
    if (number.ends_with_insensitive(unit))
      number = number.drop_back(unit.size()).rtrim();
  double gbps = 0;
  if (number.empty() || number.getAsDouble(gbps) || !(gbps > 0) || gbps > 1e6) {
    error = "expected a positive number of Gb/s per link, as in 400 or "
            "400Gb/s, got '" +
            text.str() + "'";
    return failure();
  }
  if (hw.interNodeLinks == 0) {
    error = "the '" + hw.name.str() +
            "' preset has no network between its nodes (they share memory)";
    return failure();
  }
  hw.interNodeLinkBandwidth = gbps * 1e9 / 8;
  return success();
}

ArrayRef<HardwarePreset> mlir::zero::getHardwarePresets() { return kPresets; }

const HardwarePreset *mlir::zero::lookupHardwarePreset(StringRef name) {
  for (auto [alias, preset] : kAliases)
    if (name == alias)
      name = preset;
  for (const HardwarePreset &hw : kPresets)
    if (hw.name == name)
      return &hw;
  return nullptr;
}

namespace {
struct PresetBand {
  StringRef preset;
  ValidationBand band;
};
} // namespace

// Generated by scripts/update-costmodel-doc.py with docs/CostModel.md.
static const PresetBand kValidationBands[] = {
#include "ValidationBands.inc"
};

std::optional<ValidationBand> mlir::zero::lookupValidationBand(StringRef name) {
  for (auto [alias, preset] : kAliases)
    if (name == alias)
      name = preset;
  for (const PresetBand &b : kValidationBands)
    if (b.preset == name)
      return b.band;
  return std::nullopt;
}

std::string mlir::zero::getHardwarePresetNames() {
  std::string names;
  for (const HardwarePreset &hw : kPresets)
    names += (names.empty() ? "" : ", ") + hw.name.str();
  return names;
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

std::optional<int64_t> mlir::zero::parseByteSize(StringRef text) {
  StringRef s = text.trim();
  size_t digits = s.find_first_not_of("0123456789.");
  StringRef number = s.take_front(digits), unit = s.drop_front(number.size());
  unit = unit.trim();
  // One decimal point at most, and a digit before it.
  if (number.empty() || !llvm::isDigit(number.front()) ||
      number.count('.') > 1 || number.back() == '.')
    return std::nullopt;
  static const std::pair<StringRef, double> kUnits[] = {
      {"", 1},         {"b", 1},        {"kib", 0x1p10}, {"mib", 0x1p20},
      {"gib", 0x1p30}, {"tib", 0x1p40}, {"kb", 1e3},     {"mb", 1e6},
      {"gb", 1e9},     {"tb", 1e12}};
  std::string lower = unit.lower();
  const double *scale = nullptr;
  for (const auto &[name, factor] : kUnits)
    if (lower == name)
      scale = &factor;
  if (!scale)
    return std::nullopt;
  // Whole part and fraction separately, so that `80GB` and `24GiB` are
  // exact; only a fraction of a unit goes through floating point.
  auto [whole, frac] = number.split('.');
  uint64_t w = 0;
  if (whole.getAsInteger(10, w) || w > (uint64_t(1) << 62))
    return std::nullopt;
  long double bytes = static_cast<long double>(w) * *scale;
  if (!frac.empty())
    bytes += std::strtold(("0." + frac).str().c_str(), nullptr) * *scale;
  if (bytes < 1 || bytes > 0x1p62)
    return std::nullopt;
  return static_cast<int64_t>(bytes);
}

std::optional<int64_t> mlir::zero::parseMemoryBudget(StringRef text,
                                                     std::string &error) {
  if (text.empty()) {
    error = "empty";
    return std::nullopt;
  }
  if (text.find_first_of(" \t\r\n") != StringRef::npos) {
    error = "a space in it; write the unit right after the number, as in "
            "40GB or 40GiB";
    return std::nullopt;
  }
  if (text.starts_with("-")) {
    error = "negative; a budget is a positive number of bytes";
    return std::nullopt;
  }
  std::optional<int64_t> bytes = parseByteSize(text);
  if (!bytes)
    error = "expected a positive number of bytes, optionally followed by "
            "KiB, MiB, GiB, TiB or decimal KB, MB, GB, TB (e.g. 40GiB)";
  return bytes;
}

bool mlir::zero::isStrayByteUnit(StringRef arg) {
  return !arg.empty() && llvm::isAlpha(arg.front()) &&
         parseByteSize(("1" + arg).str());
}

std::string mlir::zero::formatByteSize(int64_t bytes) {
  static const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::string s;
  llvm::raw_string_ostream os(s);
  if (bytes < 0)
    os << "-";
  uint64_t b = bytes < 0 ? -static_cast<uint64_t>(bytes) : bytes;
  if (b < 1024) {
    os << b << " B";
    return s;
  }
  double v = static_cast<double>(b);
  unsigned u = 0;
  while (u < 4 && v >= 1024) {
    v /= 1024;
    ++u;
  }
  os << llvm::format("%.2f ", v) << kUnits[u];
  return s;
}

void mlir::zero::printFitVerdict(const FitVerdict &fit, llvm::raw_ostream &os) {
  if (fit.fits)
    os << "fits: " << formatByteSize(fit.freeBytes) << " free of "
       << formatByteSize(fit.deviceMemoryBytes) << "\n";
  else
    os << "does not fit by " << formatByteSize(-fit.freeBytes)
       << "; largest item: " << fit.largestItem << " "
       << formatByteSize(fit.largestItemBytes) << "\n";
}
