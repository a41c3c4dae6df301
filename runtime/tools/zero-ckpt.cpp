//===- zero-ckpt.cpp - Inspect, consolidate and reshard checkpoints -------===//
//
// Part of the zero-mlir project.
//
// A checkpoint of a training executable (--save) is one file per rank. This
// tool reads them without MPI or a device:
//
//   zero-ckpt inspect DIR
//       what the checkpoint holds (step, world size, stage, dtype, groups,
//       sizes) and the CRC-32 check of every file; exit 1 if one fails.
//   zero-ckpt consolidate DIR -o model.safetensors [--optimizer-states]
//                         [--compute-dtype]
//   zero-ckpt consolidate DIR --hf OUTDIR [--max-shard-size SIZE]
//   zero-ckpt consolidate DIR --adapters OUTDIR
//       the fp32 master weights by parameter name, as --export writes them
//       (DeepSpeed's zero_to_fp32); with the Adam moments as well; or each
//       parameter in the dtype it computes in; or, for a model imported
//       from Hugging Face, as --export-hf writes them (config.json and
//       safetensors that from_pretrained loads; of a PEFT LoRA model the
//       merged weights); or a PEFT model's adapter directory.
//   zero-ckpt reshard DIR (--for PROGRAM | --manifest FILE) -o NEWDIR
//   zero-ckpt reshard DIR --world-size M [--stage S] -o NEWDIR
//       the same state in another program's layout (world size, stage,
//       grouping), which `PROGRAM --resume NEWDIR` continues, or in the
//       checkpoint's own groups split for M ranks.
//
// DIR is a step directory or a save directory (its `latest`). An
// expert-parallel checkpoint's rank files hold their own experts under the
// same names: consolidate gathers them by the expert layout the checkpoint
// records, and reshard moves them only into the layout that saved them.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Format.h"
#include "Checkpoint/Reader.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "zero_rt/optimizers.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <vector>

using namespace zrt;
using nlohmann::json;

namespace {

const char *const kUsage =
    "usage: zero-ckpt inspect DIR\n"
    "       zero-ckpt consolidate DIR -o OUT.safetensors [--optimizer-states]\n"
    "                             [--compute-dtype]\n"
    "       zero-ckpt consolidate DIR --hf OUTDIR [--max-shard-size SIZE]\n"
    "       zero-ckpt consolidate DIR --adapters OUTDIR\n"
    "       zero-ckpt reshard DIR (--for PROGRAM | --manifest FILE) -o NEWDIR\n"
    "       zero-ckpt reshard DIR --world-size M [--stage S] -o NEWDIR\n"
    "\n"
    "DIR is a checkpoint step directory or a --save directory (its latest).\n"
    "  inspect       step, world size, stage, dtype, groups and sizes, and\n"
    "                the CRC-32 check of every rank file, and the first\n"
    "                NaN or infinity of each (exit 1 if one fails)\n"
    "  consolidate   the fp32 weights by parameter name as safetensors, as\n"
    "                --export writes them; --optimizer-states adds each\n"
    "                parameter's Adam moments as NAME.exp_avg and\n"
    "                NAME.exp_avg_sq (fp32); --compute-dtype writes each\n"
    "                parameter in the dtype it computes in instead (bf16\n"
    "                and f16 ones rounded from the masters as training\n"
    "                does, f32 ones as they are); --hf writes a Hugging\n"
    "                Face model directory as --export-hf does (a model\n"
    "                imported with zero-import --hf), in shards above\n"
    "                --max-shard-size (default 50GB, as save_pretrained);\n"
    "                of a PEFT LoRA model, --hf writes the merged model\n"
    "                and --adapters the adapter directory that\n"
    "                PeftModel.from_pretrained loads\n"
    "  reshard       writes NEWDIR/step_N (and NEWDIR/latest) in the layout\n"
    "                of PROGRAM, a training executable (or of FILE, the\n"
    "                manifest `PROGRAM --print-manifest` prints), which\n"
    "                `PROGRAM --resume NEWDIR` continues; the step, data\n"
    "                position, Adam step count and loss scaler carry over.\n"
    "                --world-size M [--stage S] keeps the checkpoint's groups\n"
    "                and splits each into M even shards at stage S (default\n"
    "                the saved one); any program of the model resumes it\n"
    "\n"
    "An expert-parallel checkpoint (zero-compile --ep-size) is consolidated\n"
    "with every expert, gathered from the ranks that hold them; reshard\n"
    "refuses it for any layout but the one that saved it.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An integer option in [lo, hi].
int64_t count(const std::string &opt, const std::string &text, int64_t lo,
              int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    throw UsageError(opt + " needs an integer in [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "], got '" + text + "'");
  return v;
}

std::string quoted(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The manifest a training executable prints with --print-manifest.
std::string programManifest(const std::string &program) {
  std::string cmd = quoted(program) + " --print-manifest";
  FILE *pipe = ::popen(cmd.c_str(), "r");
  if (!pipe)
    fail("cannot run '" + program + "': " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0)
    text.append(buf, n);
  int status = ::pclose(pipe);
  if (status != 0 || text.empty())
    fail("'" + program + " --print-manifest' failed (exit status " +
         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
         "); --for takes a training executable of zero-compile");
  return text;
}

Manifest parseProgram(const std::string &text, const std::string &from) {
  try {
    return Manifest::parse(text);
  } catch (const std::exception &e) {
    fail(from + ": " + e.what());
  }
}

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 10 * 1024)
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  else if (bytes < 10ull * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", double(bytes) / 1024);
  else if (bytes < 10ull * 1024 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof(buf), "%.1f GiB", double(bytes) / (1 << 30));
  return buf;
}

int inspect(const std::string &path) {
  CheckpointReader ckpt(path);
  const json &m = ckpt.manifest();
  std::printf("%s\n", ckpt.where().c_str());
  std::printf("  format %d, step %lld\n", ckpt.format, (long long)ckpt.step);
  std::printf("  saved by: stage %d on %d rank(s), compute dtype %s, "
              "schedule %s\n",
              ckpt.stage, ckpt.world, ckpt.computeDtypes().c_str(),
              ckpt.scheduleHash.c_str());
  if (ckpt.expertParallel > 1)
    std::printf("  %s: each rank file holds its expert set member's experts "
                "of them\n",
                ckpt.expertText().c_str());
  using checkpoint::ManifestFile;
  if (m.contains(ManifestFile::optimizer))
    std::printf("  precision %s, optimizer %s\n",
                m.value(ManifestFile::precision, std::string("?")).c_str(),
                m.at(ManifestFile::optimizer).dump().c_str());
  if (ckpt.layoutStates)
    std::printf("  optimizer states: %s, each section its buffer's own "
                "bytes: resumed bitwise by the program and world that saved "
                "it, by parameter into another layout\n",
                ckpt.layoutStates);
  if (ckpt.int8States)
    std::printf("  optimizer states: int8, each state's section its buffer's "
                "own bytes (an fp32 absmax per 2048 elements, then a code per "
                "element): resumed bitwise by the program and world that "
                "saved it, never resharded\n");
  int64_t elements = 0;
  for (const SavedParam &p : ckpt.params)
    elements += p.numel;
  if (ckpt.format < 3)
    std::printf("  model: %zu group(s); format 2 records no parameter table "
                "(only the program that saved it resumes it)\n",
                ckpt.groups.size());
  else
    std::printf("  model: %zu parameters, %lld elements, in %zu group(s)\n",
                ckpt.params.size(), (long long)elements, ckpt.groups.size());
  for (const SavedGroup &g : ckpt.groups)
    std::printf("    group '%s': %lld elements, %lld per rank\n",
                g.name.c_str(), (long long)g.numel,
                (long long)(ckpt.stage == 0 ? g.numel : g.shardNumel));

  int bad = 0;
  uint64_t total = 0;
  bool haveState = false;
  TrainingState state;
  for (int r = 0; r < ckpt.world; ++r) {
    const json &entry = m.at(ManifestFile::files).at(size_t(r));
    uint64_t bytes = entry.at(checkpoint::RankFile::bytes).get<uint64_t>();
    total += bytes;
    // Reading the file checks it (size, CRC-32, header); one that matches
    // may still hold a NaN (saved by a run that diverged, or written by
    // another tool), which would train NaN.
    std::string problem;
    try {
      problem = ckpt.nonFinite(r);
      if (!haveState) {
        state = ckpt.state(r);
        haveState = true;
      }
    } catch (const std::runtime_error &e) {
      problem = e.what();
    }
    ckpt.release();
    // The CRC as manifest.json records it (decimal).
    std::printf("  %s: %llu bytes, crc32 %u: %s\n",
                entry.at(checkpoint::RankFile::file).get<std::string>().c_str(),
                (unsigned long long)bytes,
                entry.at(checkpoint::RankFile::crc32).get<uint32_t>(),
                problem.empty() ? "ok" : "FAILED");
    if (!problem.empty()) {
      std::fprintf(stderr, "zero-ckpt: error: %s\n", problem.c_str());
      ++bad;
    }
  }
  std::printf("  total: %llu bytes (%s) in %d rank file(s)\n",
              (unsigned long long)total, humanBytes(total).c_str(), ckpt.world);
  if (haveState)
    std::printf("  state: data position %lld rows, %lld Adam steps, loss "
                "scale %s\n",
                (long long)state.dataPosition, (long long)state.adamSteps,
                state.lossScaler.contains(checkpoint::LossScaler::cur_scale)
                    ? state.lossScaler.at(checkpoint::LossScaler::cur_scale)
                          .dump()
                          .c_str()
                    : "?");
  if (bad) {
    std::fprintf(stderr,
                 "zero-ckpt: error: %d of %d rank file(s) fail their "
                 "check\n",
                 bad, ckpt.world);
    return 1;
  }
  std::printf("  every file matches its CRC-32 and holds finite values\n");
  return 0;
}

/// The optimizer `ckpt` was saved with (optimizers.def).
manifest::OptimizerKind savedOptimizer(const CheckpointReader &ckpt) {
  std::string kind;
  try {
    kind = ckpt.manifest()
               .at(checkpoint::ManifestFile::optimizer)
               .at(checkpoint::Optimizer::kind)
               .get<std::string>();
  } catch (const json::exception &e) {
    fail(ckpt.where() + ": malformed checkpoint metadata: " + e.what());
  }
  std::optional<manifest::OptimizerKind> optimizer =
      manifest::enumOf<manifest::OptimizerKind>(kind);
  if (!optimizer)
    fail(ckpt.where() + " was saved with optimizer '" + kind +
         "', which this runtime does not know");
  return *optimizer;
}

/// The state buffers of `kind` saved with the checkpoint's optimizer
/// settings `opt`, in the table's order: a gated state (SGD's
/// momentum_buffer) only when its hyper-parameter, saved under its name,
/// is not 0 (absent: 0, the defaults of checkpoints from before it).
std::vector<BufferKind> stateBuffers(manifest::OptimizerKind kind,
                                     const json &opt) {
  std::vector<BufferKind> states;
  for (const optimizers::State &s : optimizers::kStates) {
    if (s.kind != kind)
      continue;
    if (const char *gate = optimizers::stateGate(kind, s.buffer)) {
      const json *v = opt.contains(gate) ? &opt.at(gate) : nullptr;
      if (!v || (v->is_boolean() ? !v->get<bool>() : v->get<double>() == 0))
        continue;
    }
    states.push_back(s.buffer);
  }
  return states;
}

/// Parameter `i`'s values of layout state `kind` as tensors: the
/// element-wise ones in its (unpadded) shape, named as the other states
/// (`NAME.momentum_buffer`, `NAME.exp_avg`); a factored tensor's row and
/// column statistics as torch.optim.Adafactor keeps them (`NAME.row_var`
/// [..., rows, 1], `NAME.col_var` [..., 1, cols]) and a vector's
/// `NAME.variance`. A parameter that keeps none (the other part's) adds
/// nothing.
void addLayoutState(CheckpointReader &ckpt, size_t i, BufferKind kind,
                    const std::vector<int64_t> &shape,
                    std::vector<Tensor> &tensors) {
  const SavedParam &p = ckpt.params[i];
  int64_t values = layoutStateValues(ckpt.optimizer, kind, p);
  if (values == 0)
    return;
  // An expert-parallel parameter's values are each expert set member's,
  // of its experts: the whole tensor's are theirs in member order.
  int64_t members = p.expertParallel;
  bool factored = optimizers::isFactored(ckpt.optimizer, kind);
  if (!factored || p.shape.size() < 2) {
    Tensor t{p.name + "." +
                 (factored ? std::string("variance")
                           : std::string(kBufferNames[kind])),
             shape, std::vector<float>(size_t(numelOf(shape)))};
    for (int64_t q = 0; q < members; ++q)
      ckpt.readState(i, kind, 0, values, t.data.data() + q * values, q);
    tensors.push_back(std::move(t));
    return;
  }
  // A matrix of experts is factored over them as a whole: each member's
  // column statistics sum its own experts only.
  if (members > 1 && p.shape.size() == 2)
    fail("consolidate --optimizer-states: " + ckpt.where() + ": parameter '" +
         p.name + "' " + shapeText(p.shape) + " holds " + kBufferNames[kind] +
         " statistics of each expert set member's " +
         std::to_string(p.shape[0]) + " experts (its " + ckpt.expertText() +
         "), which are not those of the whole " + shapeText(shape) +
         " tensor; consolidate without --optimizer-states");
  std::vector<int64_t> lead(p.shape.begin(), p.shape.end() - 2);
  int64_t rows = p.shape[p.shape.size() - 2], cols = p.shape.back();
  // A member's statistics: its batch of [rows, 1] then of [1, cols].
  int64_t batch = numelOf(lead);
  if (members > 1)
    lead[0] *= members;
  std::vector<int64_t> rowShape = lead, colShape = lead;
  rowShape.insert(rowShape.end(), {rows, 1});
  colShape.insert(colShape.end(), {1, cols});
  Tensor row{p.name + ".row_var", rowShape,
             std::vector<float>(size_t(members * batch * rows))};
  Tensor col{p.name + ".col_var", colShape,
             std::vector<float>(size_t(members * batch * cols))};
  for (int64_t q = 0; q < members; ++q) {
    ckpt.readState(i, kind, 0, batch * rows, row.data.data() + q * batch * rows,
                   q);
    ckpt.readState(i, kind, batch * rows, values,
                   col.data.data() + q * batch * cols, q);
  }
  tensors.push_back(std::move(row));
  tensors.push_back(std::move(col));
}

/// The checkpoint's optimizer settings (its manifest's optimizer object).
const json &savedOptimizerSettings(const CheckpointReader &ckpt) {
  try {
    return ckpt.manifest().at(checkpoint::ManifestFile::optimizer);
  } catch (const json::exception &e) {
    fail(ckpt.where() + ": malformed checkpoint metadata: " + e.what());
  }
}

int consolidate(const std::string &path, const std::string &out,
                const std::string &hfOut, const std::string &adaptersOut,
                int64_t maxShardBytes, bool optimizerStates,
                bool computeDtype) {
  CheckpointReader ckpt(path);
  if (ckpt.format < 3)
    fail(ckpt.where() + " has format 2, which records no parameter names; "
                        "resume it and --export instead");
  ckpt.checkExpertsRecorded("consolidate");
  std::optional<manifest::HfModel> hf =
      savedHfModel(ckpt.manifest(), ckpt.where());
  if (!hfOut.empty())
    hfModelOf(hf, "consolidate --hf");
  std::optional<manifest::Peft> peft = savedPeft(ckpt.manifest(), ckpt.where());
  if (!adaptersOut.empty())
    peftOf(peft, "consolidate --adapters");
  std::vector<Tensor> tensors;
  std::vector<BufferKind> kinds = {kMaster};
  if (optimizerStates && ckpt.int8States)
    fail(ckpt.where() + " holds int8 optimizer states (codes and absmaxes), "
                        "which --optimizer-states does not write as fp32 "
                        "tensors; consolidate the masters without it");
  if (optimizerStates)
    for (BufferKind k :
         stateBuffers(savedOptimizer(ckpt), savedOptimizerSettings(ckpt)))
      kinds.push_back(k);
  for (BufferKind kind : kinds)
    for (size_t i = 0; i < ckpt.params.size(); ++i) {
      const SavedParam &p = ckpt.params[i];
      // A frozen parameter has no moments.
      if (kind != kMaster && p.frozen)
        continue;
      // As --export: without the padding rows, which follow the rest, and
      // with every expert.
      std::vector<int64_t> shape = ckpt.wholeShape(i);
      int64_t numel = numelOf(shape);
      if (kind != kMaster && ckpt.layoutStates) {
        addLayoutState(ckpt, i, kind, shape, tensors);
        continue;
      }
      Tensor t{p.name, shape, std::vector<float>(size_t(numel))};
      if (kind != kMaster)
        t.name += std::string(".") + kBufferNames[kind];
      else if (computeDtype)
        t.dtype = computeDtypeOf(p.computeDtype);
      ckpt.readWhole(i, kind, 0, numel, t.data.data());
      tensors.push_back(std::move(t));
    }
  // The metadata --export writes, so that the files are equal byte for byte.
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", std::to_string(ckpt.step)}};
  if (optimizerStates) {
    TrainingState s = ckpt.state(0);
    metadata[checkpoint::Header::adamSteps] = std::to_string(s.adamSteps);
    metadata[checkpoint::Header::dataPosition] = std::to_string(s.dataPosition);
    metadata[checkpoint::Header::lossScaler] = s.lossScaler.dump();
  }
  if (!out.empty()) {
    writeFileAtomic(out, writeSafetensors(tensors, metadata));
    std::printf("consolidated %zu tensors of step %lld into %s\n",
                tensors.size(), (long long)ckpt.step, out.c_str());
  }
  if (!adaptersOut.empty()) {
    writeAdapterDirectory(adaptersOut, *peft, tensors, metadata);
    std::printf("consolidated the LoRA adapters of %zu layer(s) of step %lld "
                "into %s (PEFT: adapter_config.json and "
                "adapter_model.safetensors)\n",
                peft->layers.size(), (long long)ckpt.step, adaptersOut.c_str());
  }
  if (!hfOut.empty()) {
    // A PEFT model's merged weights: its base model's.
    if (peft)
      tensors = mergeAdapters(*peft, std::move(tensors));
    // A checkpoint keeps the parameters, not the tensors the step never
    // uses.
    std::vector<std::string> missing = appendUntrained(*hf, {}, tensors);
    if (!missing.empty())
      std::fprintf(stderr,
                   "zero-ckpt: warning: %zu tensor(s) of the model that the "
                   "step never uses (%s%s) are not in checkpoints; the "
                   "consolidated model leaves them out\n",
                   missing.size(), missing[0].c_str(),
                   missing.size() > 1 ? ", ..." : "");
    int files =
        writeHfDirectory(hfOut, hf->config, tensors, maxShardBytes, metadata);
    std::printf("consolidated %zu tensors of step %lld into %s (Hugging "
                "Face: config.json and %d safetensors file(s))\n",
                tensors.size(), (long long)ckpt.step, hfOut.c_str(), files);
  }
  return 0;
}

/// The layout of `ckpt`'s model and groups on `world` ranks at `stage`: each
/// group split into even shards (the last ones may own fewer elements).
/// --resume reads any layout, so no compiler's padding rule is needed.
Manifest splitLayout(const CheckpointReader &ckpt, int world, int stage) {
  if (ckpt.format < 3)
    fail(ckpt.where() + " has format 2, which records no parameters; "
                        "reshard it --for the program that resumes it");
  Manifest m;
  json groups;
  m.stage = stage;
  m.worldSize = world;
  try {
    const json &saved = ckpt.manifest();
    using checkpoint::Optimizer;
    m.precision =
        saved.at(checkpoint::ManifestFile::precision).get<std::string>();
    const json &opt = saved.at(checkpoint::ManifestFile::optimizer);
    std::string kind = opt.at(Optimizer::kind).get<std::string>();
    std::optional<manifest::OptimizerKind> optimizer =
        manifest::enumOf<manifest::OptimizerKind>(kind);
    if (!optimizer)
      fail(ckpt.where() + " was saved with optimizer '" + kind +
           "', which this runtime does not know");
    m.optimizer = *optimizer;
    m.lr = opt.at(Optimizer::lr).get<double>();
    // As checkSameModel compares them: a key that a checkpoint from before
    // its row lacks is the row's default (Manifest's), and one from before
    // schedules has none.
    for (const optimizers::HyperParamRow &p : optimizers::kHyperParams)
      if (auto it = opt.find(p.name); it != opt.end())
        m.hyperParams[size_t(p.id)] = hyperParamValue(*it);
    std::string schedule =
        opt.value(Optimizer::lrSchedule, std::string("none"));
    if (schedule != "none")
      m.scheduleText = schedule;
    groups = opt.value(Optimizer::paramWeightDecay, json::object());
  } catch (const json::exception &e) {
    fail(ckpt.where() + ": malformed checkpoint metadata: " + e.what());
  }
  // The values are those the saved schedule trained.
  m.hashText = ckpt.scheduleHash;
  m.hfModel = savedHfModel(ckpt.manifest(), ckpt.where());
  m.peft = savedPeft(ckpt.manifest(), ckpt.where());
  // Each group computes in its parameters' dtype (a group holds one), and
  // is frozen when they are (all or none).
  std::vector<std::string> dtypes(ckpt.groups.size());
  std::vector<bool> frozen(ckpt.groups.size(), false);
  for (const SavedParam &p : ckpt.params) {
    dtypes[size_t(p.group)] = p.computeDtype;
    frozen[size_t(p.group)] = p.frozen;
  }
  for (size_t i = 0; i < ckpt.groups.size(); ++i) {
    const SavedGroup &g = ckpt.groups[i];
    PartitionInfo part;
    part.name = g.name;
    part.numel = g.numel;
    part.shardNumel = stage == 0 ? g.numel : (g.numel + world - 1) / world;
    part.paddedNumel = stage == 0 ? g.numel : part.shardNumel * world;
    // A group without parameters holds only padding; f32 needs no master.
    part.computeDtypeName = dtypes[i].empty() ? "f32" : dtypes[i];
    part.computeDtype = computeDtypeOf(part.computeDtypeName);
    part.computeBytes = zrt_dtype_size(part.computeDtype);
    part.paramsAreMasters = part.computeDtype == ZRT_F32;
    part.frozen = frozen[i];
    // A frozen group has only its params.
    for (BufferKind k : {kParams, kGrads, kMaster})
      part.present[k] =
          k == kParams ||
          (!part.frozen && (k != kMaster || !part.paramsAreMasters));
    for (BufferKind k : optimizers::kStateBuffers)
      part.present[k] = !part.frozen && m.keepsState(k);
    auto count = [&](bool full) { return full ? g.numel : part.shardNumel; };
    part.counts[kParams] = count(stage <= 2);
    part.counts[kGrads] = count(stage <= 1);
    for (BufferKind k : kSavedBuffers)
      part.counts[k] = part.hasBuffer(k) ? count(stage == 0) : 0;
    m.partitions.push_back(part);
  }
  for (const SavedParam &p : ckpt.params) {
    ParamInfo info;
    info.name = p.name;
    info.shape = p.shape;
    info.numel = p.numel;
    info.partition = p.group;
    info.offset = p.offset;
    if (groups.contains(p.name) && groups.at(p.name).is_number())
      info.weightDecay = groups.at(p.name).get<double>();
    info.rows = p.rows;
    info.frozen = p.frozen;
    info.muon = p.muon;
    m.partitions[size_t(p.group)].params.push_back(p.name);
    m.params.push_back(info);
  }
  // A layout state holds, on every rank, the values of the rank that packs
  // the most (layoutStateRuns).
  std::vector<SavedParam> table = savedParams(m);
  for (int32_t g = 0; g < int32_t(m.partitions.size()); ++g) {
    PartitionInfo &part = m.partitions[size_t(g)];
    for (BufferKind k : optimizers::kStateBuffers) {
      if (!part.hasBuffer(k) || !isRawState(m, k))
        continue;
      int64_t most = 0;
      for (int r = 0; r < (stage == 0 ? 1 : world); ++r) {
        Range own = m.owned(part, r);
        for (const StateRun &run :
             layoutStateRuns(m.optimizer, k, table, g, own.begin, own.end))
          most = std::max(most, run.at + run.count);
      }
      part.counts[k] = most;
    }
  }
  return m;
}

int reshard(const std::string &path,
            const std::function<Manifest(const CheckpointReader &)> &layout,
            const std::string &outRoot) {
  CheckpointReader ckpt(path);
  // Each 8-bit state's blocks are its shard's: moving elements between
  // ranks re-forms them, and re-quantising is not exact.
  if (ckpt.int8States)
    fail(ckpt.where() + " holds int8 optimizer states (codes and absmaxes "
                        "per 2048 elements of each shard), which are not "
                        "resharded: resume it with the program and world "
                        "that saved it");
  ckpt.checkExpertsRecorded("reshard");
  Manifest target = layout(ckpt);
  // Its rank files hold each member's experts under the same names, which
  // only the layout that saved them resumes (checkSameModel); the split
  // layout would hold one member's as the whole model.
  if (ckpt.expertParallel > 1 && target.expertParallel == 1)
    fail("reshard: " + ckpt.where() + " has its " + ckpt.expertText() +
         "; resharding an expert-parallel checkpoint is not supported (the "
         "programs resume it only in the layout that saved it): "
         "consolidate it (zero-ckpt consolidate -o) and start the other "
         "layout with --init-from");
  checkSameModel(ckpt, target);
  std::string dir = checkpointDir(outRoot, ckpt.step);
  struct stat st;
  if (::stat((dir + "/manifest.json").c_str(), &st) == 0)
    fail("'" + dir + "' already holds a checkpoint; choose another -o");
  makeDirs(dir);
  TrainingState state = ckpt.state(0);
  int world = target.worldSize;
  std::vector<SavedFile> files;
  std::vector<float> values;
  for (int r = 0; r < world; ++r) {
    std::string bytes = packRankFile(
        target, r, world, state,
        [&](int32_t p, BufferKind kind, char *dst, int64_t size) {
          if (isRawState(target, kind)) {
            std::vector<float> state =
                loadLayoutState(ckpt, target, p, r, kind);
            std::memcpy(dst, state.data(), size_t(size));
            return;
          }
          remapOwned(ckpt, target, p, r, kind, values);
          if (int64_t(values.size() * sizeof(float)) > size)
            fail("group '" + target.partitions[size_t(p)].name +
                 "': the owned range exceeds its buffer");
          std::memcpy(dst, values.data(), values.size() * sizeof(float));
        });
    writeFileAtomic(dir + "/" + rankFileName(r), bytes);
    files.push_back({rankFileCrc(bytes), bytes.size()});
  }
  writeFileAtomic(dir + "/manifest.json",
                  checkpointManifest(target, world, ckpt.step, files));
  writeFileAtomic(outRoot + "/latest",
                  dir.substr(dir.find_last_of('/') + 1) + "\n");
  std::printf("resharded step %lld from stage %d on %d rank(s) to stage %d "
              "on %d rank(s): %s\n",
              (long long)ckpt.step, ckpt.stage, ckpt.world, target.stage, world,
              dir.c_str());
  return 0;
}

int run(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty())
    throw UsageError("no command");
  if (args[0] == "--help" || args[0] == "-h") {
    std::printf("%s", kUsage);
    return 0;
  }
  std::string command = args[0], dir, out, program, manifestFile, hfOut,
              adaptersOut, maxShardSize;
  bool optimizerStates = false, computeDtype = false;
  int64_t world = 0, stage = -1;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        throw UsageError("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "-o")
      out = value();
    else if (a == "--for" && command == "reshard")
      program = value();
    else if (a == "--manifest" && command == "reshard")
      manifestFile = value();
    else if (a == "--world-size" && command == "reshard")
      world = count(a, value(), 1, 1 << 20);
    else if (a == "--stage" && command == "reshard")
      stage = count(a, value(), 0, 3);
    else if (a == "--optimizer-states" && command == "consolidate")
      optimizerStates = true;
    else if (a == "--compute-dtype" && command == "consolidate")
      computeDtype = true;
    else if (a == "--hf" && command == "consolidate")
      hfOut = value();
    else if (a == "--adapters" && command == "consolidate")
      adaptersOut = value();
    else if (a == "--max-shard-size" && command == "consolidate")
      maxShardSize = value();
    else if (a.rfind("-", 0) == 0)
      throw UsageError("unknown option '" + a + "' for " + command);
    else if (dir.empty())
      dir = a;
    else
      throw UsageError("unexpected argument '" + a + "'");
  }
  if (command != "inspect" && command != "consolidate" && command != "reshard")
    throw UsageError("unknown command '" + command + "'");
  if (dir.empty())
    throw UsageError(command + " needs a checkpoint directory");
  if (command == "inspect") {
    if (!out.empty())
      throw UsageError("inspect writes nothing (no -o)");
    return inspect(dir);
  }
  if (command == "consolidate") {
    if (int(!out.empty()) + int(!hfOut.empty()) + int(!adaptersOut.empty()) !=
        1)
      throw UsageError("consolidate needs -o FILE, --hf DIR or --adapters DIR "
                       "(one of them)");
    if (out.empty() && (optimizerStates || computeDtype))
      throw UsageError(std::string(optimizerStates ? "--optimizer-states"
                                                   : "--compute-dtype") +
                       " goes with -o; " +
                       (hfOut.empty() ? "--adapters writes the fp32 adapters "
                                        "that PeftModel.from_pretrained loads"
                                      : "--hf writes the fp32 weights that "
                                        "from_pretrained loads"));
    if (!maxShardSize.empty() && hfOut.empty())
      throw UsageError("--max-shard-size goes with --hf");
    int64_t maxShardBytes = parseShardSize(
        maxShardSize.empty() ? kDefaultMaxShardSize : maxShardSize,
        "--max-shard-size");
    return consolidate(dir, out, hfOut, adaptersOut, maxShardBytes,
                       optimizerStates, computeDtype);
  }
  if (out.empty())
    throw UsageError(command + " needs -o");
  if (stage >= 0 && world == 0)
    throw UsageError("--stage needs --world-size");
  if (int(!program.empty()) + int(!manifestFile.empty()) + int(world > 0) != 1)
    throw UsageError("reshard needs the target layout: --for PROGRAM, "
                     "--manifest FILE or --world-size M (one of them)");
  if (world > 0)
    return reshard(
        dir,
        [&](const CheckpointReader &ckpt) {
          return splitLayout(ckpt, int(world),
                             stage >= 0 ? int(stage) : ckpt.stage);
        },
        out);
  std::string text =
      program.empty() ? readFile(manifestFile) : programManifest(program);
  std::string from = program.empty() ? manifestFile : "'" + program + "'";
  return reshard(
      dir, [&](const CheckpointReader &) { return parseProgram(text, from); },
      out);
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "zero-ckpt: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "zero-ckpt: error: %s\n", e.what());
    return 1;
  }
}
