//===- DeepSpeedConfig.cpp - Reading a DeepSpeed ds_config file -----------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//
//
// The keys of a ds_config file: each supported key is read once, into the
// DeepSpeedConfig field it sets, with the place of its value; the keys no
// read names are listed as not implemented. The syntax is DeepSpeedJson's.
//
//===----------------------------------------------------------------------===//

#include "zero/Pipelines/DeepSpeedConfig.h"
#include "zero/Dialect/Zero/IR/Optimizers.h"
#include "zero/Dialect/Zero/IR/ZeroDialect.h"
#include "zero/Pipelines/DeepSpeedKeys.h"
#include "zero_rt/optimizers.h"

#include "DeepSpeedJson.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::zero;
using namespace mlir::zero::deepspeed;
namespace json = llvm::json;

namespace {

bool isAutoValue(const json::Value &v) {
  std::optional<StringRef> s = v.getAsString();
  return s && *s == "auto";
}

/// Whether `v` turns a feature off: false, or a section with "enabled":
/// false (or an offload "device": "none"). Such keys need no support.
bool isOff(const json::Value &v) {
  if (v.getAsBoolean() == std::optional<bool>(false))
    return true;
  const json::Object *o = v.getAsObject();
  if (!o)
    return false;
  if (const json::Value *e = o->get("enabled"))
    return e->getAsBoolean() == std::optional<bool>(false);
  if (const json::Value *d = o->get(dskeys::kDevice))
    return d->getAsString() == std::optional<StringRef>("none");
  return false;
}

/// One object of the config. Each key is named once, by the read that takes
/// it; the keys no read named are listed as not implemented.
class Section {
public:
  /// Reads `obj` (at `path` in `positions`) with `body`, then lists the keys
  /// it did not read.
  static void read(DeepSpeedConfig &cfg, const Positions &positions,
                   const json::Object &obj, std::string prefix,
                   std::string path, function_ref<void(Section &)> body) {
    Section s(cfg, positions, obj, std::move(prefix), std::move(path));
    body(s);
    for (StringRef key : sortedKeys(obj))
      if (!s.seen.contains(key))
        cfg.unimplemented.push_back(s.prefix + key.str());
  }

  /// The place of the value at `key`.
  Position place(StringRef key) const {
    auto it = positions.find(path + kPathSeparator + key.str());
    return it == positions.end() ? Position{} : it->second;
  }

  void error(StringRef key, const Twine &msg) {
    Position p = place(key);
    cfg.errors.push_back({p.line, p.column, (prefix + key + ": " + msg).str()});
  }
  void warning(StringRef key, const Twine &msg) {
    Position p = place(key);
    cfg.warnings.push_back(
        {p.line, p.column, (prefix + key + ": " + msg).str()});
  }

  bool has(StringRef key) const { return obj.get(key) != nullptr; }

  /// Whether a read above has taken `key`.
  bool wasRead(StringRef key) const { return seen.contains(key); }

  /// The value at `key` without reading it (another read takes it).
  const json::Value *peek(StringRef key) const { return obj.get(key); }

  /// The keys of the object, sorted (read each with get).
  std::vector<StringRef> keys() const { return sortedKeys(obj); }

  /// The value at `key`, or null when the key is absent.
  const json::Value *get(StringRef key) {
    seen.insert(key);
    return obj.get(key);
  }

  /// Reads a boolean key that turns off a feature when false: quietly
  /// (null is absent). True is listed as not implemented, and a value of
  /// another type is an error, as a boolean key's.
  void acceptIfOff(StringRef key) {
    const json::Value *v = obj.get(key);
    if (!v || v->getAsBoolean() == std::optional<bool>(true))
      return;
    seen.insert(key);
    if (v->kind() != json::Value::Null && !v->getAsBoolean())
      error(key, "expected true or false, got " + dump(*v) + autoHint(*v));
  }

  /// Reads a section key (a logger, a profiler) that is off as false or as
  /// an object whose "enabled" is false: quietly. One that is on is listed
  /// as not implemented; another type, or an "enabled" that is not a
  /// boolean, is an error at its place.
  void acceptSectionIfOff(StringRef key) {
    const json::Value *v = obj.get(key);
    if (!v || v->getAsBoolean() == std::optional<bool>(true))
      return;
    if (const json::Object *o = v->getAsObject()) {
      const json::Value *enabled = o->get("enabled");
      if (enabled && enabled->kind() != json::Value::Null &&
          !enabled->getAsBoolean()) {
        seen.insert(key);
        Position p = positions.lookup(path + kPathSeparator + key.str() +
                                      kPathSeparator + "enabled");
        cfg.errors.push_back(
            {p.line, p.column,
             (Twine(prefix) + key + ".enabled: expected true or false, got " +
              dump(*enabled))
                 .str()});
      } else if (isOff(*v)) {
        seen.insert(key);
      }
      return;
    }
    seen.insert(key);
    if (v->kind() != json::Value::Null && !v->getAsBoolean())
      error(key, "expected an object or false, got " + dump(*v));
  }

  /// Reads the object at `key`, if there is one, with `body`.
  void section(StringRef key, function_ref<void(Section &)> body) {
    const json::Value *v = get(key);
    if (!v)
      return;
    if (const json::Object *o = v->getAsObject())
      return read(cfg, positions, *o, prefix + key.str() + ".",
                  path + kPathSeparator + key.str(), body);
    error(key, "expected an object, got " + dump(*v));
  }

  /// A number; null reads as absent. "auto" is taken where `autoAllowed`.
  DeepSpeedValue<double> number(StringRef key, bool autoAllowed = false) {
    return scalar(key, autoAllowed, &json::Value::getAsNumber, "a number");
  }

  DeepSpeedValue<int64_t> integer(StringRef key, bool autoAllowed = false) {
    DeepSpeedValue<double> d = number(key, autoAllowed);
    DeepSpeedValue<int64_t> r;
    r.isAuto = d.isAuto;
    r.line = d.line;
    r.column = d.column;
    if (!d.value)
      return r;
    // DeepSpeed configs write sizes as 5e8, so any whole number will do.
    if (std::floor(*d.value) != *d.value || std::fabs(*d.value) > 9.0e18)
      error(key, "expected an integer, got " + dump(*get(key)));
    else
      r.value = static_cast<int64_t>(*d.value);
    return r;
  }

  /// An integer in [lo, hi]: the config's own error, rather than one about
  /// the pass option it sets.
  DeepSpeedValue<int64_t>
  integerIn(StringRef key, int64_t lo,
            int64_t hi = std::numeric_limits<int64_t>::max(),
            bool autoAllowed = false) {
    DeepSpeedValue<int64_t> r = integer(key, autoAllowed);
    if (!r.value || (*r.value >= lo && *r.value <= hi))
      return r;
    std::string range = hi == std::numeric_limits<int64_t>::max()
                            ? "must be >= " + std::to_string(lo)
                            : "must be between " + std::to_string(lo) +
                                  " and " + std::to_string(hi);
    error(key, range + ", got " + std::to_string(*r.value));
    r.value.reset();
    return r;
  }

  /// A string; null reads as absent.
  DeepSpeedValue<std::string> string(StringRef key) {
    DeepSpeedValue<std::string> r;
    const json::Value *v = get(key);
    if (!v || v->kind() == json::Value::Null)
      return r;
    locate(key, r);
    if (std::optional<StringRef> str = v->getAsString())
      r.value = str->str();
    else
      error(key, "expected a string, got " + dump(*v));
    return r;
  }

  /// A boolean; null reads as absent.
  DeepSpeedValue<bool> boolean(StringRef key, bool autoAllowed = false) {
    return scalar(key, autoAllowed, &json::Value::getAsBoolean,
                  "true or false");
  }

private:
  Section(DeepSpeedConfig &cfg, const Positions &positions,
          const json::Object &obj, std::string prefix, std::string path)
      : cfg(cfg), positions(positions), obj(obj), prefix(std::move(prefix)),
        path(std::move(path)) {}

  /// The value at `key` as `read` takes it, with its place.
  template <typename T>
  DeepSpeedValue<T> scalar(StringRef key, bool autoAllowed,
                           std::optional<T> (json::Value::*read)() const,
                           StringRef expected) {
    DeepSpeedValue<T> r;
    const json::Value *v = get(key);
    if (!v || v->kind() == json::Value::Null)
      return r;
    locate(key, r);
    if (autoAllowed && isAutoValue(*v)) {
      r.isAuto = true;
      return r;
    }
    r.value = (v->*read)();
    if (!r.value)
      error(key, "expected " + expected + ", got " + dump(*v) + autoHint(*v));
    return r;
  }

  template <typename T>
  void locate(StringRef key, DeepSpeedValue<T> &v) const {
    Position p = place(key);
    v.line = p.line;
    v.column = p.column;
  }

  static std::string autoHint(const json::Value &v) {
    return isAutoValue(v) ? " (\"auto\" is resolved only where Hugging "
                            "Face's DeepSpeed integration resolves it)"
                          : "";
  }

  DeepSpeedConfig &cfg;
  const Positions &positions;
  const json::Object &obj;
  std::string prefix, path;
  llvm::StringSet<> seen;
};

/// The batch keys must be positive; DeepSpeed's _batch_assertion says so in
/// these words.
void checkPositive(Section &s, StringRef key, DeepSpeedValue<int64_t> &v,
                   StringRef what) {
  if (v.value && *v.value <= 0) {
    s.error(key, what + ": " + Twine(*v.value) + " has to be greater than 0");
    v.value.reset();
  }
}

/// The `scheduler` section: DeepSpeed's type and params, kept as text for
/// buildLrSchedule (which knows each type's parameters) with their places;
/// "auto" is resolved against the train step by the pipeline.
void readScheduler(Section &sch, Position section, DeepSpeedConfig &cfg) {
  const json::Value *t = sch.get("type");
  if (!t) {
    // DeepSpeed would train without a schedule, params or not.
    sch.get("params");
    cfg.errors.push_back({section.line, section.column,
                          "scheduler.type: is missing (DeepSpeed ignores a "
                          "scheduler without one)"});
    return;
  }
  std::optional<StringRef> type = t->getAsString();
  if (!type) {
    sch.error("type", "expected a string, got " + dump(*t));
    return;
  }
  Position at = sch.place("type");
  cfg.schedulerType = {type->str(), false, at.line, at.column};
  sch.section("params", [&](Section &p) {
    for (StringRef key : p.keys()) {
      const json::Value &v = *p.get(key);
      at = p.place(key);
      DeepSpeedValue<std::string> value{std::nullopt, isAutoValue(v), at.line,
                                        at.column};
      if (std::optional<StringRef> str = v.getAsString())
        value.value = str->str();
      else if (std::optional<bool> b = v.getAsBoolean())
        value.value = *b ? "true" : "false";
      else if (v.getAsNumber())
        value.value = dump(v);
      if (!value.value) {
        p.error(key,
                "expected a number, a string or true/false, got " + dump(v));
        continue;
      }
      if (value.isAuto)
        value.value.reset();
      cfg.schedulerParams.push_back({key.str(), std::move(value)});
    }
  });
}

/// zero_optimization's offload keys: the offload_optimizer and
/// offload_param sections, or the older cpu_offload and cpu_offload_params
/// booleans. Whether the stage allows them and whether they are implemented
/// is decided with the stage (Pipeline.cpp).
void readOffload(Section &z, DeepSpeedConfig &cfg) {
  auto section = [&](StringRef key, bool param,
                     DeepSpeedValue<std::string> &device) {
    z.section(key, [&](Section &o) {
      device = o.string(dskeys::kDevice);
      if (device.value && !symbolizeOffloadDevice(*device.value)) {
        o.error(dskeys::kDevice,
                "must be \"none\", \"cpu\" or \"nvme\", got \"" +
                    *device.value + "\"");
        device.value.reset();
      }
      // Each offload has its own swap folder, as DeepSpeed's.
      DeepSpeedValue<std::string> path = o.string(dskeys::kNvmePath);
      if (path.value)
        (param ? cfg.paramNvmePath : cfg.nvmePath) = path;
      // Host buffers are always pinned where pinning means anything (the
      // CUDA backend's cudaHostAlloc); DeepSpeed's buffer counts, sizes and
      // fast_init steer its NVMe swapper and parameter cache.
      DeepSpeedValue<bool> pin = o.boolean(dskeys::kPinMemory);
      // The swap buffers of an nvme device are pinned host buffers too.
      if (pin.value == std::optional<bool>(false) && device.value &&
          (*device.value == "cpu" || *device.value == "nvme"))
        o.warning(dskeys::kPinMemory,
                  "false changes nothing: host buffers are "
                  "always pinned (cudaHostAlloc on the GPU)");
      DeepSpeedValue<int64_t> count = o.integerIn(dskeys::kBufferCount, 1);
      (param ? cfg.paramBufferCount : cfg.optimizerBufferCount) = count;
      if (param) {
        cfg.paramBufferSize = o.integerIn(dskeys::kBufferSize, 1);
        // DeepSpeed caches up to max_in_cpu parameter elements in host
        // memory beside the NVMe swap; here every shard is fetched from
        // the swap file through the swap buffers, no cache is kept.
        DeepSpeedValue<int64_t> maxInCpu = o.integerIn("max_in_cpu", 0);
        if (maxInCpu.value && device.value && *device.value == "nvme")
          o.warning("max_in_cpu",
                    "changes nothing: no parameters are cached in host "
                    "memory, every shard is read from the swap file through "
                    "the swap buffers before its gather");
      } else {
        o.boolean("fast_init");
        // DeepSpeed overlaps the swap file's reads and writes with its
        // Adam only when asked; the host Adam here always does, chunk by
        // chunk, so only turning them off says something that is not done.
        for (StringRef key : {"pipeline_read", "pipeline_write"}) {
          DeepSpeedValue<bool> overlap = o.boolean(key);
          if (overlap.value == std::optional<bool>(false) && device.value &&
              *device.value == "nvme")
            o.warning(key, "false changes nothing: the host Adam always "
                           "overlaps the swap file's reads and writes with "
                           "its update, chunk by chunk");
        }
      }
    });
  };
  // The older booleans, as DeepSpeed maps them onto the sections.
  auto legacy = [&](StringRef key, StringRef sectionKey,
                    DeepSpeedValue<std::string> &device) {
    DeepSpeedValue<bool> on = z.boolean(key);
    if (!on.value)
      return;
    if (z.has(sectionKey)) {
      z.error(key, "give either " + sectionKey + " or the older " + key +
                       ", not both");
      return;
    }
    device.value = *on.value ? "cpu" : "none";
    device.line = on.line;
    device.column = on.column;
  };
  section(dskeys::kOffloadOptimizer, /*param=*/false, cfg.offloadOptimizer);
  section(dskeys::kOffloadParam, /*param=*/true, cfg.offloadParam);
  legacy("cpu_offload", dskeys::kOffloadOptimizer, cfg.offloadOptimizer);
  legacy("cpu_offload_params", dskeys::kOffloadParam, cfg.offloadParam);
}

/// zero_optimization's MiCS keys. mics_shard_size -1 (DeepSpeed's default)
/// is off. Our collectives over ranks on several nodes always run in two
/// levels, across the nodes first and then within each node, which is
/// DeepSpeed's hierarchical parameter gather: true is what happens, and
/// false is read with a warning that the gathers stay hierarchical.
void readMics(Section &z, DeepSpeedConfig &cfg) {
  cfg.micsShardSize = z.integer(dskeys::kMicsShardSize);
  if (cfg.micsShardSize.value && *cfg.micsShardSize.value < 1 &&
      *cfg.micsShardSize.value != -1) {
    z.error(dskeys::kMicsShardSize,
            "must be -1 (no MiCS) or a positive number of ranks, got " +
                std::to_string(*cfg.micsShardSize.value));
    cfg.micsShardSize.value.reset();
  }
  bool mics = cfg.micsShardSize.value && *cfg.micsShardSize.value > 0;
  cfg.micsHierarchicalParamsGather =
      z.boolean("mics_hierarchical_params_gather");
  if (cfg.micsHierarchicalParamsGather.value) {
    if (!mics && *cfg.micsHierarchicalParamsGather.value)
      z.warning("mics_hierarchical_params_gather",
                "has no effect without mics_shard_size");
    else if (mics && !*cfg.micsHierarchicalParamsGather.value)
      z.warning("mics_hierarchical_params_gather",
                "false is not honoured: gathers over ranks on several nodes "
                "always run in two levels (across the nodes, then within "
                "each node), as with true");
  }
}

/// The `elasticity` section, DeepSpeed's version 0.1, with its defaults
/// for the absent keys and its checks (ElasticityConfig). Train batches are
/// bounded so that listing the world sizes of a candidate stays cheap.
void readElasticity(Section &e, DeepSpeedConfig &cfg) {
  constexpr int64_t kMaxElasticBatch = int64_t(1) << 40;
  cfg.elasticEnabled = e.boolean("enabled");
  auto withDefault = [](auto v, auto d) {
    if (!v.value)
      v.value = d;
    return v;
  };
  cfg.elasticMaxTrainBatchSize = withDefault(
      e.integerIn("max_train_batch_size", 1, kMaxElasticBatch), 2000);
  cfg.elasticMinGpus =
      withDefault(e.integerIn("min_gpus", 1, kMaxWorldSize), int64_t(1));
  cfg.elasticMaxGpus = withDefault(e.integerIn("max_gpus", 1), 10000);
  cfg.elasticPreferLargerBatch =
      withDefault(e.boolean("prefer_larger_batch"), true);
  cfg.elasticIgnoreNonElasticBatchInfo =
      withDefault(e.boolean("ignore_non_elastic_batch_info"), false);
  // A hint for schedulers (how long to run before rescaling); no effect on
  // the batch.
  e.integerIn("min_time", 0);

  DeepSpeedValue<std::vector<int64_t>> &micros = cfg.elasticMicroBatchSizes;
  micros.value = std::vector<int64_t>{2, 4, 6};
  if (const json::Value *v = e.get("micro_batch_sizes")) {
    Position at = e.place("micro_batch_sizes");
    micros.line = at.line;
    micros.column = at.column;
    const json::Array *a = v->getAsArray();
    std::vector<int64_t> sizes;
    for (const json::Value &m : a ? *a : json::Array()) {
      std::optional<int64_t> i = m.getAsInteger();
      if (!i || *i < 1 || *i > kMaxElasticBatch)
        break;
      sizes.push_back(*i);
    }
    if (!a || a->empty() || sizes.size() != a->size()) {
      e.error("micro_batch_sizes",
              "expected a non-empty list of positive integers, got " +
                  dump(*v));
      micros.value.reset();
    } else {
      micros.value = std::move(sizes);
    }
  }
  int64_t maxBatch = *cfg.elasticMaxTrainBatchSize.value;
  if (micros.value &&
      llvm::any_of(*micros.value, [&](int64_t m) { return m > maxBatch; })) {
    e.error("micro_batch_sizes", "every micro batch must be at most "
                                 "max_train_batch_size " +
                                     Twine(maxBatch));
    micros.value.reset();
  }
  if (*cfg.elasticMaxGpus.value < *cfg.elasticMinGpus.value)
    e.error(cfg.elasticMaxGpus.line ? "max_gpus" : "min_gpus",
            "max_gpus " + Twine(*cfg.elasticMaxGpus.value) +
                " is below min_gpus " + Twine(*cfg.elasticMinGpus.value));

  // What version 0.1 does not have, or this project cannot do.
  if (DeepSpeedValue<double> version = e.number("version");
      version.value && *version.value != 0.1)
    e.error("version", "only version 0.1 is implemented, got " +
                           formatDeepSpeedNumber(*version.value));
  if (DeepSpeedValue<int64_t> mp = e.integer("model_parallel_size");
      mp.value && *mp.value != 1)
    e.error("model_parallel_size",
            "must be 1: ranks here are data-parallel only, got " +
                Twine(*mp.value));
  if (e.integer("num_gpus_per_node").value)
    e.warning("num_gpus_per_node",
              "changes nothing: DeepSpeed uses it in version 0.2 only "
              "(with model parallelism)");
}

/// torch.optim.Adafactor's keywords: `eps` is its pair (eps1, eps2), eps1
/// null for torch's None; foreach picks an implementation of the same update.
void readAdafactorParams(Section &p, DeepSpeedConfig &cfg) {
  cfg.beta2Decay = p.number("beta2_decay");
  cfg.d = p.number("d");
  cfg.maximize = p.boolean("maximize");
  p.boolean("foreach");
  const json::Value *e = p.get("eps");
  if (!e)
    return;
  Position at = p.place("eps");
  for (DeepSpeedValue<double> *v : {&cfg.eps1, &cfg.eps2}) {
    v->line = at.line;
    v->column = at.column;
  }
  const json::Array *a = e->getAsArray();
  if (!a || a->size() != 2 || !(*a)[1].getAsNumber() ||
      !((*a)[0].getAsNumber() || (*a)[0].getAsNull())) {
    p.error("eps", "expected [eps1 or null, eps2] (torch.optim.Adafactor's "
                   "eps), got " +
                       dump(*e));
    return;
  }
  cfg.eps1.value = (*a)[0].getAsNull() ? -1.0 : *(*a)[0].getAsNumber();
  cfg.eps2.value = (*a)[1].getAsNumber();
  // -1 stands for null only.
  if (!(*a)[0].getAsNull() && *cfg.eps1.value < 0.0)
    p.error("eps", "eps1 must be >= 0 or null, got " + dump((*a)[0]));
}

/// The `optimizer` section: its type (optimizers.def's names) and params.
void readOptimizer(Section &o, DeepSpeedConfig &cfg) {
  // optimizer.type, matched against optimizers.def's names.
  std::optional<zrt::optimizers::Kind> type;
  if (const json::Value *t = o.get("type")) {
    std::optional<StringRef> s = t->getAsString();
    if (s)
      type = zrt::optimizers::kindOfDsType(*s);
    if (!type)
      o.error("type", "'" + (s ? s->str() : dump(*t)) +
                          "' is not supported (supported: " +
                          llvm::join(getDeepSpeedOptimizerTypes(), ", ") + ")");
  }
  DeepSpeedValue<bool> adamWMode;
  o.section("params", [&](Section &p) {
    // A key the optimizer's constructor does not take is DeepSpeed's
    // TypeError (Lion has no eps, bias_correction or adam_w_mode; Adam no
    // momentum; SGD no betas).
    bool adam = type && (*type == zrt::optimizers::Kind::Adam ||
                         *type == zrt::optimizers::Kind::AdamW);
    if (type)
      for (StringRef key :
           {"eps", "betas", "weight_decay", "bias_correction", "adam_w_mode",
            "torch_adam", "amsgrad", "momentum", "dampening", "nesterov"})
        if (p.has(key) && !zrt::optimizers::hasParamKey(*type, key.str()) &&
            !(adam && (key == "adam_w_mode" || key == "torch_adam" ||
                       key == "amsgrad")))
          p.error(key, "is not a parameter of optimizer type '" +
                           o.peek("type")->getAsString()->str() + "'");
    bool muon = type && *type == zrt::optimizers::Kind::Muon;
    if (muon) {
      // DeepSpeed's Muon: the shared lr, each half's over it, Muon's
      // momentum; only torch's Newton-Schulz ("standard") is implemented,
      // and DeepSpeed's default is its "gram".
      cfg.muonLr = p.number("muon_lr", true);
      cfg.adamLr = p.number("adam_lr", true);
      cfg.muonMomentum = p.number("momentum");
      bool hasMethod = p.has("ns_method");
      DeepSpeedValue<std::string> method = p.string("ns_method");
      if (!hasMethod)
        o.error("type", "Muon's ns_method defaults to DeepSpeed's \"gram\", "
                        "which is not implemented: set optimizer.params."
                        "ns_method to \"standard\" (torch.optim.Muon's "
                        "Newton-Schulz)");
      else if (method.value && *method.value != "standard")
        p.error("ns_method", "'" + *method.value +
                                 "' is not supported (only \"standard\", "
                                 "torch.optim.Muon's Newton-Schulz)");
    }
    bool adafactor = type && *type == zrt::optimizers::Kind::Adafactor;
    if (adafactor)
      readAdafactorParams(p, cfg);
    if (type && !muon && zrt::optimizers::hasParamKey(*type, "momentum")) {
      cfg.momentum = p.number("momentum");
      cfg.dampening = p.number("dampening");
      cfg.nesterov = p.boolean("nesterov");
      // torch's implementation choices compute the same update; maximize
      // is not supported.
      p.boolean("foreach");
      p.boolean("fused");
      p.acceptIfOff("differentiable");
      DeepSpeedValue<bool> maximize = p.boolean("maximize");
      if (maximize.value && *maximize.value)
        p.error("maximize", "true is not supported (the update descends)");
    }
    cfg.lr = p.number("lr", true);
    if (!adafactor)
      cfg.eps = p.number("eps", true);
    cfg.weightDecay = p.number("weight_decay", true);
    if (const json::Value *b = p.get("betas")) {
      Position at = p.place("betas");
      for (DeepSpeedValue<double> *v : {&cfg.beta1, &cfg.beta2}) {
        v->line = at.line;
        v->column = at.column;
      }
      const json::Array *a = b->getAsArray();
      if (isAutoValue(*b)) {
        cfg.beta1.isAuto = cfg.beta2.isAuto = true;
      } else if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
                 !(*a)[1].getAsNumber()) {
        p.error("betas", "expected [beta1, beta2], got " + dump(*b));
      } else {
        cfg.beta1.value = (*a)[0].getAsNumber();
        cfg.beta2.value = (*a)[1].getAsNumber();
      }
    }
    adamWMode = p.boolean("adam_w_mode");
    // torch.optim.Adam(W) instead of DeepSpeed's fused kernel: the same
    // update.
    p.boolean("torch_adam");
    cfg.biasCorrection = p.boolean("bias_correction");
    p.acceptIfOff("amsgrad");
    // The rows that no read above takes, by their type: a new optimizer's
    // hyper-parameters need no code here.
    if (type)
      for (const zrt::optimizers::Param &row : zrt::optimizers::kParams) {
        StringRef key(row.key.data(), row.key.size());
        if (row.kind != *type || key.empty() || key.contains('[') ||
            p.wasRead(key) || !p.has(key))
          continue;
        DeepSpeedValue<double> v;
        if (isBoolHyperParam(row.name)) {
          DeepSpeedValue<bool> b = p.boolean(key);
          v.line = b.line;
          v.column = b.column;
          if (b.value)
            v.value = *b.value ? 1.0 : 0.0;
        } else {
          v = p.number(key);
        }
        cfg.hyperParams.emplace_back(row.name, v);
      }
  });
  if (type) {
    Position at = o.place("type");
    cfg.optimizer.line = at.line;
    cfg.optimizer.column = at.column;
    // DeepSpeed's engine: `Adam` is AdamW unless adam_w_mode is false.
    if (*type == zrt::optimizers::Kind::Adam && adamWMode.value.value_or(true))
      type = zrt::optimizers::Kind::AdamW;
    cfg.optimizer.value =
        stringifyOptimizerKind(static_cast<OptimizerKind>(*type)).str();
    cfg.optimizerIsTorch = zrt::optimizers::isTorchFallback(*type);
    cfg.optimizerType = o.peek("type")->getAsString()->str();
  }
}

/// The bf16 section. DeepSpeed's bf16_master_weights_and_grads makes bf16
/// parameters their own masters (#zero.optimizer's `bf16_masters`);
/// bf16_optimizer_states keeps the optimizer's states in bf16 and is valid
/// only with it (precision_config.py). The states are #zero.optimizer's
/// `states` (as zero_mlir_optimizer_states "bf16"). Both need ZeRO stage
/// 1-3, checked once the stage is read (checkBf16Masters).
void readBf16(Section &b, DeepSpeedConfig &cfg) {
  cfg.bf16 = b.boolean("enabled", true);
  DeepSpeedValue<bool> masters = b.boolean("bf16_master_weights_and_grads");
  DeepSpeedValue<bool> states = b.boolean("bf16_optimizer_states");
  if (masters.value)
    cfg.bf16Masters = masters;
  if (!states.value.value_or(false))
    return;
  if (!masters.value.value_or(false))
    b.error("bf16_optimizer_states",
            "DeepSpeed takes it only with bf16_master_weights_and_grads "
            "true; zero_mlir_optimizer_states \"bf16\" keeps the states "
            "in bf16 beside fp32 masters");
  else
    cfg.optimizerStates = {std::string("bf16"), false, states.line,
                           states.column};
  cfg.bf16OptimizerStates = states;
}

/// DeepSpeed's engine asserts that bf16 masters and bf16 optimizer states
/// run under ZeRO stage 1, 2 or 3 (the file's stage; absent: ZeRO off).
void checkBf16Masters(DeepSpeedConfig &cfg) {
  auto check = [&](const DeepSpeedValue<bool> &v, StringRef key) {
    if (v.value.value_or(false) && cfg.stage.value.value_or(0) == 0)
      cfg.errors.push_back(
          {v.line, v.column,
           ("bf16." + key +
            ": DeepSpeed supports it only with ZeRO stage 1, 2 or 3, the "
            "file's zero_optimization.stage is " +
            std::to_string(cfg.stage.value.value_or(0)))
               .str()});
  };
  check(cfg.bf16Masters, "bf16_master_weights_and_grads");
  check(cfg.bf16OptimizerStates, "bf16_optimizer_states");
}

/// The optimizer's states' precision, this project's key (zero-optimizer
/// checks the value), after the bf16 section: bf16.bf16_optimizer_states
/// says bf16.
void readOptimizerStates(Section &top, DeepSpeedConfig &cfg) {
  DeepSpeedValue<std::string> states = top.string(dskeys::kOptimizerStates);
  if (!states.value)
    return;
  if (cfg.optimizerStates.value && *states.value != "bf16")
    top.error(dskeys::kOptimizerStates,
              "\"" + *states.value +
                  "\" contradicts bf16.bf16_optimizer_states true");
  else
    cfg.optimizerStates = states;
}

/// Every supported key and the DeepSpeedConfig field it sets; each field is
/// one zero-pipeline option or a train-step attribute (see Pipeline.cpp).
// DeepSpeed AutoEP's section: the ranks that split each MoE layer's
// experts, and where they lie (this project's placement, or DeepSpeed's
// top-level use_data_before_expert_parallel_).
void readExpertParallel(Section &top, DeepSpeedConfig &cfg) {
  DeepSpeedValue<bool> dataFirst =
      top.boolean(dskeys::kUseDataBeforeExpertParallel);
  top.section(dskeys::kExpertParallel, [&](Section &e) {
    DeepSpeedValue<bool> on = e.boolean(dskeys::kExpertParallelEnabled);
    DeepSpeedValue<int64_t> size = e.integer(dskeys::kAutoepSize);
    checkPositive(e, dskeys::kAutoepSize, size, "AutoEP size");
    DeepSpeedValue<std::string> placement = e.string(dskeys::kExpertPlacement);
    if (placement.value && *placement.value != "contiguous" &&
        *placement.value != "strided") {
      e.error(dskeys::kExpertPlacement,
              "expected \"contiguous\" or \"strided\", got \"" +
                  *placement.value + "\"");
      placement.value.reset();
    }
    if (placement.value && dataFirst.value &&
        (*placement.value == "strided") != *dataFirst.value) {
      e.error(dskeys::kExpertPlacement,
              "\"" + *placement.value + "\" contradicts " +
                  dskeys::kUseDataBeforeExpertParallel + " " +
                  (*dataFirst.value ? "true" : "false"));
      placement.value.reset();
    }
    if (!placement.value && dataFirst.value) {
      placement.value = *dataFirst.value ? "strided" : "contiguous";
      placement.line = dataFirst.line;
      placement.column = dataFirst.column;
    }
    if (!on.value || !*on.value)
      return;
    cfg.expertPlacement = placement;
    if (!size.value) {
      e.error(dskeys::kExpertParallelEnabled,
              "expert parallelism needs autoep_size, the ranks that split "
              "each MoE layer's experts");
      return;
    }
    cfg.expertParallelSize = size;
  });
}

void readKeys(Section &top, DeepSpeedConfig &cfg) {
  constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
  top.section(dskeys::kZeroOptimization, [&](Section &z) {
    cfg.stage = z.integerIn(dskeys::kStage, 0, 3);
    cfg.reduceBucketSize = z.integerIn(dskeys::kReduceBucketSize, 1, kNoLimit,
                                       /*autoAllowed=*/true);
    cfg.allgatherBucketSize = z.integerIn(dskeys::kAllgatherBucketSize, 1);
    cfg.reduceScatter = z.boolean(dskeys::kReduceScatter);
    cfg.overlapComm = z.boolean(dskeys::kOverlapComm);
    cfg.contiguousGradients = z.boolean(dskeys::kContiguousGradients);
    cfg.prefetchBucketSize =
        z.integerIn(dskeys::kPrefetchBucketSize, 1, kNoLimit, true);
    cfg.maxLiveParameters = z.integerIn(dskeys::kMaxLiveParameters, 1);
    cfg.maxReuseDistance = z.integerIn(dskeys::kMaxReuseDistance, 0);
    cfg.paramPersistenceThreshold =
        z.integerIn(dskeys::kParamPersistenceThreshold, 0, kNoLimit, true);
    cfg.hpzPartitionSize = z.integerIn(dskeys::kHpzPartitionSize, 1);
    // DeepSpeed gathers frozen parameters like the others; this project's
    // own key, so that zero-tune's config reproduces its plan.
    cfg.frozenGather = z.string(dskeys::kFrozenGather);
    if (cfg.frozenGather.value && *cfg.frozenGather.value != "per-use" &&
        *cfg.frozenGather.value != "once") {
      z.error(dskeys::kFrozenGather, "must be \"per-use\" or \"once\", got \"" +
                                         *cfg.frozenGather.value + "\"");
      cfg.frozenGather.value.reset();
    }
    // ZeRO++ qwZ: the stage-3 gathers move block-quantized INT8.
    cfg.quantizedWeights = z.boolean(dskeys::kQuantizedWeights);
    // ZeRO++ qgZ: the stage-3 gradient reduce-scatters move INT4.
    cfg.quantizedGradients = z.boolean(dskeys::kQuantizedGradients);
    // All-gathering the updated partitions is what happens here.
    if (const json::Value *v = z.get("allgather_partitions");
        v && v->getAsBoolean() != std::optional<bool>(true))
      z.error("allgather_partitions",
              "only true is implemented (the updated partitions are "
              "all-gathered after each step), got " +
                  dump(*v));
    readOffload(z, cfg);
    readMics(z, cfg);
  });

  top.section("fp16", [&](Section &f) {
    cfg.fp16 = f.boolean("enabled", true);
    cfg.lossScale = f.number("loss_scale");
    if (cfg.lossScale.value &&
        !(*cfg.lossScale.value >= 0 && std::isfinite(*cfg.lossScale.value))) {
      f.error("loss_scale",
              "must be 0 (dynamic loss scaling) or a positive static scale, "
              "got " +
                  formatDeepSpeedNumber(*cfg.lossScale.value));
      cfg.lossScale.value.reset();
    }
    cfg.initialScalePower = f.integer("initial_scale_power");
    cfg.lossScaleWindow = f.integer("loss_scale_window");
    cfg.hysteresis = f.integer("hysteresis");
    cfg.minLossScale = f.number("min_loss_scale");
    f.acceptIfOff("auto_cast");
    f.acceptIfOff("consecutive_hysteresis");
    f.acceptIfOff("fp16_master_weights_and_grads");
  });
  // DeepSpeed reads "bf16", else its old name "bfloat16".
  StringRef bf16Key = top.has("bf16") ? "bf16" : "bfloat16";
  if (bf16Key == "bf16" && top.has("bfloat16")) {
    top.get("bfloat16");
    top.warning("bfloat16", "ignored: the file has bf16, which DeepSpeed "
                            "reads instead of its old name bfloat16");
  }
  top.section(bf16Key, [&](Section &b) { readBf16(b, cfg); });

  top.section("optimizer", [&](Section &o) { readOptimizer(o, cfg); });

  // Checkpointing whole transformer layers is zero-remat's layer policy;
  // recompute_granularity (Megatron-LM's name; not a DeepSpeed key) "full"
  // is that too, and "selective" the selective policy. DeepSpeed's
  // partitioned checkpoints (partition_activations) and CPU checkpoints
  // (cpu_checkpointing) each without the other, and its runtime knobs, are
  // listed as not implemented unless they are off.
  top.section(dskeys::kActivationCheckpointing, [&](Section &a) {
    cfg.remat = "layer";
    cfg.rematBlocks = a.integerIn("number_checkpoints", 1);
    if (const json::Value *g = a.get(dskeys::kRecomputeGranularity)) {
      std::optional<StringRef> name = g->getAsString();
      if (name == dskeys::kGranularitySelective)
        cfg.remat = "selective";
      else if (name != dskeys::kGranularityFull)
        a.error(dskeys::kRecomputeGranularity,
                "expected \"full\" (every checkpointed layer keeps only its "
                "input) or \"selective\", got " +
                    dump(*g));
    }
    // cpu_checkpointing moves the checkpoints (each checkpointed layer's
    // input) to host memory; DeepSpeed does so for partitioned activations
    // only, over the model-parallel group, which is one rank here: both on
    // are zero-offload-activations of what the recomputation keeps.
    if (const json::Value *part = a.peek(dskeys::kPartitionActivations),
        *cpu = a.peek(dskeys::kCpuCheckpointing);
        part && cpu && part->getAsBoolean() == std::optional<bool>(true) &&
        cpu->getAsBoolean() == std::optional<bool>(true)) {
      a.boolean(dskeys::kPartitionActivations);
      DeepSpeedValue<bool> on = a.boolean(dskeys::kCpuCheckpointing);
      cfg.offloadActivations = {std::string("cpu"), false, on.line, on.column};
    }
    for (StringRef key : {"partition_activations", "cpu_checkpointing",
                          "contiguous_memory_optimization",
                          "synchronize_checkpoint_boundary", "profile"})
      a.acceptIfOff(key);
  });

  top.section("scheduler", [&, at = top.place("scheduler")](Section &s) {
    readScheduler(s, at, cfg);
  });

  cfg.gradientClipping = top.number("gradient_clipping", true);
  if (cfg.gradientClipping.value &&
      (!(*cfg.gradientClipping.value >= 0.0) ||
       !std::isfinite(*cfg.gradientClipping.value))) {
    top.error("gradient_clipping", "must be >= 0 (0 disables clipping), got " +
                                       dump(*top.get("gradient_clipping")));
    cfg.gradientClipping.value.reset();
  }
  cfg.sequenceParallelSize = top.integer(dskeys::kSequenceParallelSize);
  checkPositive(top, dskeys::kSequenceParallelSize, cfg.sequenceParallelSize,
                "Sequence parallel size");
  readExpertParallel(top, cfg);
  cfg.trainBatchSize = top.integer(dskeys::kTrainBatchSize, true);
  checkPositive(top, dskeys::kTrainBatchSize, cfg.trainBatchSize,
                "Train batch size");
  cfg.trainMicroBatchSizePerGpu =
      top.integer(dskeys::kTrainMicroBatchSizePerGpu, true);
  checkPositive(top, dskeys::kTrainMicroBatchSizePerGpu,
                cfg.trainMicroBatchSizePerGpu, "Micro batch size per gpu");
  cfg.gradientAccumulationSteps =
      top.integer(dskeys::kGradientAccumulationSteps, true);
  checkPositive(top, dskeys::kGradientAccumulationSteps,
                cfg.gradientAccumulationSteps, "Gradient accumulation steps");
  if (cfg.gradientAccumulationSteps.value &&
      *cfg.gradientAccumulationSteps.value > kMaxAccumulationSteps) {
    top.error(dskeys::kGradientAccumulationSteps,
              "must be at most " + Twine(kMaxAccumulationSteps) + ", got " +
                  Twine(*cfg.gradientAccumulationSteps.value));
    cfg.gradientAccumulationSteps.value.reset();
  }

  top.section("elasticity", [&](Section &e) { readElasticity(e, cfg); });

  // The output projection and the loss in chunks of this many rows (0: off).
  cfg.lossChunk = top.integerIn(dskeys::kLossChunk, 0);
  // Each MLP in this many tiles of rows (0: off).
  cfg.tiledMlp = top.integerIn(dskeys::kTiledMlp, 0);
  readOptimizerStates(top, cfg);
  checkBf16Masters(cfg);

  cfg.stepsPerPrint = top.integerIn("steps_per_print", 1);
  cfg.wallClockBreakdown = top.boolean("wall_clock_breakdown");
  // Logging and debugging switches that are off, and a permission that
  // changes nothing here (other optimizers are rejected anyway).
  for (StringRef key : {"memory_breakdown", "dump_state", "prescale_gradients",
                        "sparse_gradients"})
    top.acceptIfOff(key);
  for (StringRef key : {"tensorboard", "wandb", "csv_monitor", "comet",
                        "flops_profiler", "comms_logger"})
    top.acceptSectionIfOff(key);
  cfg.allowUntestedOptimizer = top.boolean("zero_allow_untested_optimizer");
  // DeepSpeed's engine asserts that ZeRO (stages 1-3) runs one of its
  // tested optimizers unless the file allows another (a torch.optim class).
  if (cfg.optimizerIsTorch && cfg.stage.value.value_or(0) > 0 &&
      !cfg.allowUntestedOptimizer.value.value_or(false)) {
    Position at = top.place("optimizer");
    cfg.errors.push_back(
        {cfg.optimizer.line ? cfg.optimizer.line : at.line,
         cfg.optimizer.line ? cfg.optimizer.column : at.column,
         "optimizer.type: '" + cfg.optimizerType +
             "' is a torch.optim optimizer, which DeepSpeed runs under ZeRO "
             "stage " +
             std::to_string(*cfg.stage.value) +
             " only with \"zero_allow_untested_optimizer\": true (add it "
             "at the top level)"});
  }
  // ZeRO-Offload runs DeepSpeed's CPU optimizers; a torch.optim one only
  // when the file turns zero_force_ds_cpu_optimizer off.
  DeepSpeedValue<bool> forceDsCpu = top.boolean("zero_force_ds_cpu_optimizer");
  if (cfg.optimizerIsTorch && cfg.offloadOptimizer.value &&
      *cfg.offloadOptimizer.value != "none" && forceDsCpu.value.value_or(true))
    cfg.errors.push_back(
        {cfg.offloadOptimizer.line, cfg.offloadOptimizer.column,
         "offload_optimizer: DeepSpeed runs ZeRO-Offload with its own CPU "
         "optimizers; '" +
             cfg.optimizerType +
             "' (torch.optim) needs \"zero_force_ds_cpu_optimizer\": false "
             "at the top level"});
}

} // namespace

DeepSpeedConfig mlir::zero::parseDeepSpeedConfig(llvm::StringRef path) {
  DeepSpeedConfig cfg;
  cfg.path = path.str();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    cfg.errors.push_back(
        {0, 0, "cannot read the file: " + buffer.getError().message()});
    return cfg;
  }
  Positions positions;
  json::Value root = nullptr;
  if (std::optional<SyntaxError> err =
          parseJson((*buffer)->getBuffer(), positions, root)) {
    cfg.errors.push_back(
        {err->at.line, err->at.column, "syntax error: " + err->message});
    return cfg;
  }
  const json::Object *top = root.getAsObject();
  if (!top) {
    Position at = positions.lookup("");
    cfg.errors.push_back(
        {at.line, at.column, "the top level must be a JSON object"});
    return cfg;
  }
  Section::read(cfg, positions, *top, "", "",
                [&](Section &s) { readKeys(s, cfg); });
  llvm::sort(cfg.unimplemented);
  return cfg;
}
