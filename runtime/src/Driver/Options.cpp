//===- Options.cpp - The training driver's command line -------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Driver/Options.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

using namespace zrt;

const char *const zrt::kUsage =
    "usage: %s [options]   (under mpirun -np <world size> for several ranks)\n"
    "\n"
    "Trains the compiled step. Options:\n"
    "  --steps N               train until step N (default 10; counts the\n"
    "                          steps of a resumed checkpoint)\n"
    "  --seed S                initialization seed (default 1234)\n"
    "  --data FILE             token file for a model with inputs tokens\n"
    "                          and targets [B, T]: raw tokens (nanoGPT's\n"
    "                          train.bin) or a 1-D .npy array of uint16,\n"
    "                          uint32, int32 or int64 tokens\n"
    "  --data-dtype u16|u32    the tokens of raw files (--data, --eval-data;\n"
    "                          default u16)\n"
    "  --inputs X.npy --labels Y.npy\n"
    "                          float32 features [N, ...] and int32/int64\n"
    "                          labels [N] for a classifier, or integer\n"
    "                          token ids and labels [N, T] for a token model\n"
    "  --positions P.npy       the rows' positions [N, T] (integer) for a\n"
    "                          model imported with --packed: restarting at\n"
    "                          0 at each document of a packed row, as\n"
    "                          zero-data tokens --pack writes them\n"
    "  --eval-data FILE        held-out tokens (the --data format): runs the\n"
    "                          forward step only on them after the last step\n"
    "                          and logs eval_loss (mean over batches and\n"
    "                          ranks; with ignore_index also eval_tokens,\n"
    "                          their valid labels); without steps to train,\n"
    "                          evaluates the initial or resumed weights\n"
    "  --eval-inputs X.npy --eval-labels Y.npy\n"
    "                          held-out features and labels (the --inputs\n"
    "                          format), evaluated the same way\n"
    "  --eval-positions P.npy  their positions (the --positions format)\n"
    "  --eval-every K          ... also every K optimizer steps\n"
    "  --eval-batches M        ... on the first M global batches of the\n"
    "                          held-out data (default: every whole one)\n"
    "  --log-json FILE         one JSON object per step (rank 0): step,\n"
    "                          loss, tokens (the labels the loss averages\n"
    "                          over: the valid labels of the global batch),\n"
    "                          loss scales, grad_norm, times, peaks, lr\n"
    "  --init-from PATH        initial weights from safetensors (F32, BF16\n"
    "                          or F16; Hugging Face GPT-2 names accepted): a\n"
    "                          file, or a Hugging Face model directory\n"
    "                          (single or sharded); each rank reads only the\n"
    "                          bytes it keeps\n"
    "  --export FILE           write the fp32 weights as safetensors at the\n"
    "                          end (--steps 0: the initial weights)\n"
    "  --export-hf DIR         ... as a Hugging Face model directory that\n"
    "                          from_pretrained loads (a program imported\n"
    "                          with zero-import --hf)\n"
    "                          (of a PEFT LoRA program: the merged model)\n"
    "  --export-adapters DIR   a PEFT LoRA program's adapters as PEFT's\n"
    "                          adapter directory (adapter_config.json and\n"
    "                          adapter_model.safetensors) that\n"
    "                          PeftModel.from_pretrained loads\n"
    "  --max-shard-size SIZE   --export-hf's shard size, as save_pretrained's\n"
    "                          max_shard_size (default 50GB)\n"
    "  --save DIR              write a sharded checkpoint at the end\n"
    "  --save-every K          ... and every K steps (needs --save); on\n"
    "                          SIGUSR2 (mpirun passes it on) every rank\n"
    "                          stops after the step, writing its checkpoint\n"
    "  --overwrite             let a new run (no --resume of it) save into\n"
    "                          a directory holding another run's\n"
    "                          checkpoints (refused without): they are\n"
    "                          removed once this run's first checkpoint is\n"
    "                          complete, and kept if it fails before\n"
    "  --resume DIR            continue from DIR/latest or a step directory\n"
    "                          (of the same model, dtype and optimizer; any\n"
    "                          world size, stage or grouping: resharded)\n"
    "  --trace FILE.json       a Chrome trace per rank R, written to\n"
    "                          FILE.rank<R>.json (a FILE not ending in .json\n"
    "                          gets .rank<R>.json appended): spans of steps,\n"
    "                          waits and kernels, and memory in use over time\n"
    "                          (counter track \"memory\", with the plan;\n"
    "                          scripts/memory-plot.py draws both)\n"
    "  --threads N             OpenMP threads per rank (default: cores /\n"
    "                          ranks on the node, or OMP_NUM_THREADS)\n"
    "  --ranks-per-node K      simulate nodes of K ranks (rank r on node\n"
    "                          r / K) instead of MPI's shared-memory nodes;\n"
    "                          also ZRT_RANKS_PER_NODE=K (mpirun -x). Must\n"
    "                          match the program's compiled topology\n"
    "  --collectives host|nccl tensors through MPI over host memory (host:\n"
    "                          the CPU backend's only way; with --target\n"
    "                          cuda, ranks may share a GPU and NCCL is not\n"
    "                          used) or NCCL (the CUDA default); also\n"
    "                          ZRT_COLLECTIVES\n"
    "  --attention-precision fp32|16bit\n"
    "                          how attention's tensor-core kernels (--target\n"
    "                          cuda, 16-bit steps) multiply probabilities\n"
    "                          and their gradients: to fp32's bits (default)\n"
    "                          or rounded to 16 bits, as FlashAttention;\n"
    "                          also ZRT_ATTENTION_PRECISION\n"
    "  --cuda-graphs           run each training step's kernels (--target\n"
    "                          cuda) as CUDA graphs, captured between the\n"
    "                          step's host synchronisations and collectives\n"
    "                          and updated every step; also ZRT_CUDA_GRAPHS=1\n"
    "  --collective-timeout-s S\n"
    "                          abort every rank when a collective of a\n"
    "                          training step waits longer than S seconds\n"
    "                          (a peer rank is stuck or lost; default 60,\n"
    "                          0: never)\n"
    "  --flight-dir DIR        where each rank writes its last collectives\n"
    "                          (flight-rank<R>.json) when the watchdog fires\n"
    "                          or on SIGUSR1 (default: the --log-json file's\n"
    "                          directory, else the working directory)\n"
    "  --on-min-loss-scale stop|continue\n"
    "                          fp16: a gradient overflow when the loss scale\n"
    "                          already is at min_loss_scale stops training\n"
    "                          as DeepSpeed does (default stop), or skips\n"
    "                          the step and goes on (continue)\n"
    "  --quiet                 no per-step progress lines\n"
    "  --print-manifest        print the program's manifest (its layout, as\n"
    "                          zero-ckpt reshard --for reads it) and exit\n"
    "  --help                  this text\n"
    "Test hooks (fault injection):\n"
    "  --inject-overflow-step K | K-L | K-\n"
    "                          a gradient overflow at step K (at steps K to\n"
    "                          L, at every step from K)\n"
    "  --inject-kill-rank R --inject-kill-step K\n"
    "                          rank R kills itself (SIGKILL) at the start\n"
    "                          of step K\n"
    "  --inject-kill-during-save K [--inject-kill-rank R]\n"
    "      [--inject-kill-at rank-file|latest|relink]\n"
    "                          rank R (default 0) kills itself while saving\n"
    "                          step K's checkpoint: with its rank file\n"
    "                          written but not renamed (rank-file, the\n"
    "                          default), or (rank 0) with manifest.json in\n"
    "                          place but latest not updated (latest), or\n"
    "                          (rank 0, --overwrite's first checkpoint)\n"
    "                          with latest naming step_K.new, the earlier\n"
    "                          run's checkpoints removed and step_K linked,\n"
    "                          but latest not yet moved to it (relink)\n"
    "  --inject-hang-rank R --inject-hang-step K\n"
    "                          rank R stops making progress (sleeps\n"
    "                          forever) at the start of step K\n";

namespace {

int64_t parseCount(const std::string &opt, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 0)
    fail("option " + opt + " needs a non-negative integer, got '" + text + "'");
  return v;
}

/// A count of ranks per node, K >= 1; `what` names where it came from.
int64_t parseRanksPerNode(const std::string &what, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > INT32_MAX)
    fail(what + " needs a positive number of ranks, got '" + text + "'");
  return v;
}

/// ZRT_TEST_KILL_AT_STEP's value: STEP:RANK[,RANK...] entries separated by
/// ';' (STEP >= 1).
std::vector<std::pair<int64_t, int64_t>> parseKillAtStep(const std::string &v) {
  std::vector<std::pair<int64_t, int64_t>> kills;
  auto number = [&](const std::string &t, int64_t min) {
    errno = 0;
    char *end = nullptr;
    long long x = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno == ERANGE || x < min)
      fail("ZRT_TEST_KILL_AT_STEP needs STEP:RANK[,RANK...] entries "
           "separated by ';', got '" +
           v + "'");
    return int64_t(x);
  };
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(';', start);
    std::string entry = v.substr(start, end - start);
    size_t colon = entry.find(':');
    int64_t step = number(entry.substr(0, colon), 1);
    if (colon == std::string::npos)
      number("", 0); // Fails: no ranks.
    size_t at = colon + 1;
    while (true) {
      size_t comma = entry.find(',', at);
      kills.push_back({step, number(entry.substr(at, comma - at), 0)});
      if (comma == std::string::npos)
        break;
      at = comma + 1;
    }
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return kills;
}

/// K (one step), K-L (steps K to L) or K- (every step from K), K >= 1.
void parseStepRange(const std::string &opt, const std::string &text,
                    int64_t &first, int64_t &last) {
  auto number = [](const std::string &t, int64_t &v) {
    errno = 0;
    char *end = nullptr;
    long long x = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno == ERANGE || x < 1)
      return false;
    v = x;
    return true;
  };
  size_t dash = text.find('-');
  bool ok;
  if (dash == std::string::npos) {
    ok = number(text, first);
    last = first;
  } else {
    ok = number(text.substr(0, dash), first);
    last = INT64_MAX;
    if (ok && dash + 1 < text.size())
      ok = number(text.substr(dash + 1), last) && last >= first;
  }
  if (!ok)
    fail("option " + opt + " needs a step K >= 1, a range K-L or K-, got '" +
         text + "'");
}

/// `value` when it is `a` or `b`; else fails naming `what` (an option or
/// an environment variable).
std::string oneOf(const std::string &what, const std::string &value,
                  const char *a, const char *b) {
  if (value != a && value != b)
    fail(what + " needs " + a + " or " + b + ", got '" + value + "'");
  return value;
}

/// What the environment sets that the command line did not.
void readEnvironment(Options &o) {
  if (o.collectives.empty())
    if (const char *env = std::getenv("ZRT_COLLECTIVES"); env && *env)
      o.collectives = oneOf("ZRT_COLLECTIVES", env, "host", "nccl");
  if (o.attentionPrecision.empty())
    if (const char *env = std::getenv("ZRT_ATTENTION_PRECISION"); env && *env)
      o.attentionPrecision =
          oneOf("ZRT_ATTENTION_PRECISION", env, "fp32", "16bit");
  if (const char *env = std::getenv("ZRT_CUDA_GRAPHS"); env && *env)
    o.cudaGraphs =
        o.cudaGraphs || oneOf("ZRT_CUDA_GRAPHS", env, "0", "1") == "1";
  if (o.ranksPerNode == 0)
    if (const char *env = std::getenv("ZRT_RANKS_PER_NODE"); env && *env) {
      o.ranksPerNode = parseRanksPerNode("ZRT_RANKS_PER_NODE", env);
      o.ranksPerNodeFromEnv = true;
    }
  if (const char *kill = std::getenv("ZRT_TEST_KILL_AT_STEP"); kill && *kill)
    o.killAfterStep = parseKillAtStep(kill);
}

} // namespace

Options zrt::parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0)
      fail("unexpected argument '" + arg + "' (options start with --)");
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    auto flag = [&](bool &target) {
      if (inlineValue)
        fail("option " + name + " takes no value");
      target = true;
    };
    auto next = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        fail("option " + name + " needs a value");
      return argv[++i];
    };
    auto text = [&](std::string &target) {
      target = next();
      if (target.empty())
        fail("option " + name + " needs a non-empty value");
    };
    if (name == "--help")
      flag(o.help);
    else if (name == "--print-manifest")
      flag(o.printManifest);
    else if (name == "--quiet")
      flag(o.quiet);
    else if (name == "--overwrite")
      flag(o.overwrite);
    else if (name == "--steps")
      o.steps = parseCount(name, next());
    else if (name == "--seed")
      o.seed = uint64_t(parseCount(name, next()));
    else if (name == "--save-every")
      o.saveEvery = parseCount(name, next());
    else if (name == "--eval-every" || name == "--eval-batches") {
      int64_t v = parseCount(name, next());
      if (v < 1)
        fail("option " + name + " needs a count >= 1, got " +
             std::to_string(v));
      (name == "--eval-every" ? o.evalEvery : o.evalBatches) = v;
    } else if (name == "--inject-overflow-step")
      parseStepRange(name, next(), o.injectOverflowFirst, o.injectOverflowLast);
    else if (name == "--inject-kill-rank")
      o.injectKillRank = parseCount(name, next());
    else if (name == "--inject-kill-step")
      o.injectKillStep = parseCount(name, next());
    else if (name == "--inject-kill-during-save")
      o.injectKillDuringSave = parseCount(name, next());
    else if (name == "--inject-kill-at") {
      o.injectKillAt = next();
      if (o.injectKillAt != "rank-file" && o.injectKillAt != "latest" &&
          o.injectKillAt != "relink")
        fail("option --inject-kill-at needs rank-file, latest or relink, "
             "got '" +
             o.injectKillAt + "'");
    } else if (name == "--inject-hang-rank")
      o.injectHangRank = parseCount(name, next());
    else if (name == "--inject-hang-step")
      o.injectHangStep = parseCount(name, next());
    else if (name == "--collective-timeout-s")
      o.collectiveTimeoutS = parseCount(name, next());
    else if (name == "--on-min-loss-scale")
      o.stopAtMinLossScale =
          oneOf("option " + name, next(), "stop", "continue") == "stop";
    else if (name == "--threads") {
      int64_t t = parseCount(name, next());
      if (t < 1 || t > 4096)
        fail("option --threads needs a count in [1, 4096]");
      o.threads = int(t);
    } else if (name == "--collectives")
      o.collectives = oneOf("option " + name, next(), "host", "nccl");
    else if (name == "--attention-precision")
      o.attentionPrecision = oneOf("option " + name, next(), "fp32", "16bit");
    else if (name == "--cuda-graphs")
      flag(o.cudaGraphs);
    else if (name == "--ranks-per-node") {
      std::string v = next();
      o.ranksPerNode = parseRanksPerNode("option --ranks-per-node", v);
    } else if (name == "--data")
      text(o.data);
    else if (name == "--data-dtype")
      o.dataDtype = oneOf("option " + name, next(), "u16", "u32");
    else if (name == "--inputs")
      text(o.inputs);
    else if (name == "--labels")
      text(o.labels);
    else if (name == "--eval-data")
      text(o.evalData);
    else if (name == "--eval-inputs")
      text(o.evalInputs);
    else if (name == "--eval-labels")
      text(o.evalLabels);
    else if (name == "--positions")
      text(o.positions);
    else if (name == "--eval-positions")
      text(o.evalPositions);
    else if (name == "--log-json")
      text(o.logJson);
    else if (name == "--flight-dir")
      text(o.flightDir);
    else if (name == "--init-from")
      text(o.initFrom);
    else if (name == "--export")
      text(o.exportPath);
    else if (name == "--export-hf")
      text(o.exportHf);
    else if (name == "--export-adapters")
      text(o.exportAdapters);
    else if (name == "--max-shard-size")
      text(o.maxShardSize);
    else if (name == "--save")
      text(o.save);
    else if (name == "--resume")
      text(o.resume);
    else if (name == "--trace")
      text(o.trace);
    else
      fail("unknown option '" + name + "' (see --help)");
  }
  if (o.help)
    return o;
  readEnvironment(o);
  if (!o.data.empty() && (!o.inputs.empty() || !o.labels.empty()))
    fail("--data (tokens) and --inputs/--labels (features) exclude each other");
  if (o.inputs.empty() != o.labels.empty())
    fail("--inputs and --labels go together");
  if (!o.dataDtype.empty() && o.data.empty() && o.evalData.empty())
    fail("--data-dtype needs a token file: --data FILE or --eval-data FILE");
  if (!o.evalData.empty() && (!o.evalInputs.empty() || !o.evalLabels.empty()))
    fail("--eval-data (tokens) and --eval-inputs/--eval-labels (features) "
         "exclude each other");
  if (o.evalInputs.empty() != o.evalLabels.empty())
    fail("--eval-inputs and --eval-labels go together");
  if (!o.positions.empty() && o.inputs.empty())
    fail("--positions goes with --inputs/--labels (token ids and labels "
         "[N, T] of packed rows); a token file's windows (--data) are one "
         "document each, at positions 0..T-1");
  if (!o.evalPositions.empty() && o.evalInputs.empty())
    fail("--eval-positions goes with --eval-inputs/--eval-labels");
  bool evaluating = !o.evalData.empty() || !o.evalInputs.empty();
  if (!evaluating && (o.evalEvery > 0 || o.evalBatches > 0))
    fail(std::string(o.evalEvery > 0 ? "--eval-every" : "--eval-batches") +
         " needs --eval-data FILE or --eval-inputs X.npy --eval-labels "
         "Y.npy");
  if (!o.evalData.empty() && !o.inputs.empty())
    fail("--eval-data holds tokens but the training data are features "
         "(--inputs/--labels): evaluate with --eval-inputs/--eval-labels");
  if (!o.evalInputs.empty() && !o.data.empty())
    fail("--eval-inputs/--eval-labels hold features but the training data "
         "are tokens (--data): evaluate with --eval-data");
  if (o.saveEvery > 0 && o.save.empty())
    fail("--save-every needs --save DIR");
  if (o.overwrite && o.save.empty())
    fail("--overwrite needs --save DIR");
  if (!o.initFrom.empty() && !o.resume.empty())
    fail("--init-from and --resume exclude each other");
  if (!o.maxShardSize.empty() && o.exportHf.empty())
    fail("--max-shard-size needs --export-hf DIR");
  o.maxShardBytes = parseShardSize(o.maxShardSize.empty() ? kDefaultMaxShardSize
                                                          : o.maxShardSize,
                                   "--max-shard-size");
  if (o.injectKillStep > 0 && o.injectKillRank < 0)
    fail("--inject-kill-step needs --inject-kill-rank R");
  if (o.injectKillRank >= 0 && o.injectKillStep == 0 &&
      o.injectKillDuringSave == 0)
    fail("--inject-kill-rank needs --inject-kill-step K or "
         "--inject-kill-during-save K");
  if (o.injectKillDuringSave > 0 && o.save.empty())
    fail("--inject-kill-during-save needs --save DIR");
  if (o.injectKillDuringSave > 0 && o.injectKillRank < 0)
    o.injectKillRank = 0;
  if (o.injectKillAt != "rank-file" && o.injectKillDuringSave == 0)
    fail("--inject-kill-at needs --inject-kill-during-save K");
  if (o.injectKillAt != "rank-file" && o.injectKillRank != 0)
    fail("--inject-kill-at " + o.injectKillAt +
         " needs --inject-kill-rank 0 (rank 0 writes latest)");
  if ((o.injectHangRank >= 0) != (o.injectHangStep > 0))
    fail("--inject-hang-rank and --inject-hang-step go together");
  if (o.collectiveTimeoutS > 1000000000)
    fail("option --collective-timeout-s needs at most 1e9 seconds");
  return o;
}
