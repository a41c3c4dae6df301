//===- Session.cpp - The compiled step as a library -----------------------===//
//
// Part of the zero-mlir project.
//
// zero_rt/session.h over the driver: a session is a Driver opened without a
// loop, whose host hands it each step's arrays. Exceptions end at this
// boundary as statuses and messages.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/session.h"

#include "Collectives/Collectives.h"
#include "Collectives/Groups.h"
#include "Data/Files.h"
#include "Data/WeightFiles.h"
#include "Device/Device.h"
#include "Device/Memory.h"
#include "Driver/Driver.h"
#include "Driver/Interrupt.h"
#include "Driver/State.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace zrt;

//===----------------------------------------------------------------------===//
// The driver's library calls
//===----------------------------------------------------------------------===//

bool Driver::open(int argc, char **argv) {
  library = true;
  for (int i = 1; i < argc; ++i)
    stepsGiven |= std::strcmp(argv[i], "--steps") == 0 ||
                  std::strncmp(argv[i], "--steps=", 8) == 0;
  int exitCode = 1;
  // What a session refuses is known on every rank alike (the same options).
  ctx.comm = zrt_comm_world();
  ctx.rank = zrt_comm_rank(ctx.comm);
  ctx.world = zrt_comm_size(ctx.comm);
  Options parsed;
  try {
    parsed = parseOptions(argc, argv);
  } catch (const std::exception &e) {
    lastMessage = e.what();
    return false;
  }
  for (auto [given, name] :
       {std::make_pair(!parsed.data.empty() || !parsed.inputs.empty(),
                       "--data/--inputs"),
        std::make_pair(!parsed.evalData.empty() || !parsed.evalInputs.empty(),
                       "--eval-data/--eval-inputs"),
        std::make_pair(!parsed.save.empty(), "--save"),
        std::make_pair(!parsed.exportPath.empty() || !parsed.exportHf.empty() ||
                           !parsed.exportAdapters.empty(),
                       "--export/--export-hf/--export-adapters"),
        std::make_pair(!parsed.trace.empty(), "--trace"),
        std::make_pair(parsed.help || parsed.printManifest,
                       "--help/--print-manifest")})
    if (given) {
      lastMessage = std::string(name) +
                    " is the executable's: a session's host passes arrays "
                    "to step and calls save, load and export_hf";
      return false;
    }
  if (!setUp(argc, argv, exitCode))
    return false;
  watchdog.start(ctx, opts.collectiveTimeoutS);
  return true;
}

void Driver::close() {
  if (library)
    watchdog.stop();
  library = false;
  releaseTopology();
}

void Driver::releaseTopology() {
  if (!setTheTopology)
    return;
  // Nothing of the session is in flight between its calls.
  zrt_wait_all();
  freeGroups();
  setTheTopology = false;
}

std::vector<int64_t> Driver::inputShape(int32_t index, bool local) const {
  BatchRows rows = batchRows();
  return hostShapeOf(manifest, manifest.inputs[size_t(index)], rows.perStep,
                     ctx.world / manifest.sequenceParallel, local);
}

namespace {

/// Every rank learns whether some rank refused its arrays; ranks whose own
/// arrays were fine throw too, naming the rank that refused.
void agreeOnInput(const zrt_ctx &ctx, const std::string &refusal, bool local) {
  if (!local) {
    // The same arrays on every rank: each found the same verdict.
    if (!refusal.empty())
      throw InvalidInput(refusal);
    return;
  }
  int mine = refusal.empty() ? ctx.world : ctx.rank, first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!refusal.empty())
    throw InvalidInput(refusal);
  if (first < ctx.world)
    throw InvalidInput("rank " + std::to_string(first) +
                       " refused its arrays (its error says why)");
}

} // namespace

std::unique_ptr<DataSource>
Driver::openArrays(const std::vector<HostArray> &arrays, bool local) {
  std::unique_ptr<DataSource> source;
  std::string refusal;
  try {
    source = openHostArrays(manifest, arrays, batchRows().perStep,
                            ctx.world / manifest.sequenceParallel, local);
  } catch (const InvalidInput &e) {
    refusal = e.what();
  }
  agreeOnInput(ctx, refusal, local);
  return source;
}

std::string Driver::stepArrays(const std::vector<HostArray> &arrays,
                               bool local) {
  data = openArrays(arrays, local);
  std::optional<StepRecord> record = trainOne(progress.step + 1, false);
  // The source reads the host's arrays, which end with the call.
  data.reset();
  if (!record)
    throw std::runtime_error(lastMessage);
  stepLog->print(*record);
  return stepLog->json(*record);
}

std::string Driver::evaluateArrays(const std::vector<HostArray> &arrays,
                                   bool local) {
  evalData = openArrays(arrays, local);
  evalBatches = 1;
  Evaluation e = evaluate();
  evalData.reset();
  nlohmann::json line = {{"step", progress.step}, {"loss", e.loss}};
  if (e.tokens >= 0)
    line["tokens"] = e.tokens;
  return line.dump();
}

bool Driver::saveTo(const std::string &dir) {
  if (dir != opts.save) {
    if (!everywhere([&] {
          checkWritableDir(dir, "save");
          if (ctx.rank == 0)
            replaced =
                claimSaveDirectory(saveLock, dir, opts.resume, opts.overwrite);
        }))
      return false;
    int replacing[2] = {replaced.pending, replaced.staging};
    MPI_Bcast(replacing, 2, MPI_INT, 0, MPI_COMM_WORLD);
    replaced.pending = replacing[0];
    replaced.staging = replacing[1];
    opts.save = dir;
  }
  return save(progress);
}

bool Driver::loadFrom(const std::string &dir) {
  if (!everywhere([&] {
        if (!isDirectory(dir))
          fail("load: '" + dir + "' is not a directory");
      }))
    return false;
  if (!everywhere([&] { progress = readCheckpoint(ctx, dir); }))
    throw std::runtime_error(
        lastMessage.empty() ? "load: another rank failed to read '" + dir + "'"
                            : lastMessage);
  const Manifest &m = manifest;
  if (m.stage >= 1 && m.stage <= 2)
    for (int32_t p = 0; p < int32_t(m.partitions.size()); ++p)
      zrt_ctx_all_gather_params(&ctx, p, 0, m.partitions[size_t(p)].numel, -1);
  lastCheckpoint = dir;
  return true;
}

bool Driver::exportHfTo(const std::string &dir) {
  if (!everywhere([&] {
        if (ctx.rank != 0)
          return;
        hfModelOf(manifest.hfModel, "export_hf");
        checkWritableDir(dir, "export_hf");
      }))
    return false;
  std::string kept = opts.exportHf;
  opts.exportHf = dir;
  bool ok = exportWeights();
  opts.exportHf = kept;
  return ok;
}

void Driver::parametersBegin(int64_t bucketBytes, int32_t root) {
  const Manifest &m = manifest;
  if (bucketBytes < 1)
    throw InvalidInput("bucket_bytes " + std::to_string(bucketBytes) +
                       " is not positive");
  if (root < -1 || root >= ctx.world)
    throw InvalidInput("rank " + std::to_string(root) +
                       " outside the world "
                       "of " +
                       std::to_string(ctx.world) + " rank(s)");
  for (const ParamInfo &p : m.params)
    if (m.partitions[size_t(p.partition)].expert && m.expertParallel > 1)
      throw Unsupported("parameter '" + p.name +
                        "' is split over expert-parallel ranks, which "
                        "streaming does not gather (export_hf does)");
  // --export-hf merges each LoRA layer: its base and adapters travel
  // together, in the base's place.
  bool merging = m.peft && m.hfModel;
  std::vector<int32_t> groupOf(m.params.size(), -1);
  std::vector<std::vector<int32_t>> groups;
  auto indexOf = [&](const std::string &name) {
    for (size_t k = 0; k < m.params.size(); ++k)
      if (m.params[k].name == name)
        return int32_t(k);
    throw std::runtime_error("LoRA layer's tensor '" + name +
                             "' is not a parameter");
  };
  if (merging)
    for (const manifest::Lora &l : m.peft->layers) {
      std::vector<int32_t> group = {indexOf(l.base), indexOf(l.a),
                                    indexOf(l.b)};
      for (int32_t k : group)
        groupOf[size_t(k)] = int32_t(groups.size());
      groups.push_back(group);
    }
  streamGroups.clear();
  std::vector<bool> placed(groups.size(), false);
  for (size_t k = 0; k < m.params.size(); ++k) {
    int32_t g = groupOf[k];
    if (g < 0) {
      streamGroups.push_back({int32_t(k)});
    } else if (!placed[size_t(g)]) {
      placed[size_t(g)] = true;
      streamGroups.push_back(groups[size_t(g)]);
    }
  }
  streamNext = 0;
  streamBucketBytes = bucketBytes;
  streamRoot = root;
  streamReady.clear();
  streamAt = 0;
}

const Tensor *Driver::parametersNext() {
  const Manifest &m = manifest;
  if (streamAt == streamReady.size()) {
    streamReady.clear();
    streamAt = 0;
    if (streamNext == streamGroups.size())
      return nullptr;
    // One bucket: whole groups up to the bytes (at least one).
    std::vector<int32_t> list;
    int64_t bytes = 0;
    while (streamNext < streamGroups.size()) {
      int64_t group = 0;
      for (int32_t k : streamGroups[streamNext])
        group += m.params[size_t(k)].numel * 4;
      if (!list.empty() && bytes + group > streamBucketBytes)
        break;
      bytes += group;
      list.insert(list.end(), streamGroups[streamNext].begin(),
                  streamGroups[streamNext].end());
      ++streamNext;
    }
    streamReady = gatherParameterList(ctx, list, streamRoot);
    if (m.peft && m.hfModel) {
      // The layers whose tensors this bucket holds, merged as export does
      // (names lose the PEFT prefix), on every rank alike.
      manifest::Peft some = *m.peft;
      some.layers.clear();
      for (const manifest::Lora &l : m.peft->layers)
        for (const Tensor &t : streamReady)
          if (t.name == l.base)
            some.layers.push_back(l);
      bool receives = streamRoot < 0 || ctx.rank == streamRoot;
      if (receives) {
        streamReady = mergeAdapters(some, std::move(streamReady));
      } else {
        // Names and shapes only: merge zero-filled stand-ins.
        for (Tensor &t : streamReady) {
          int64_t n = 1;
          for (int64_t d : t.shape)
            n *= d;
          t.data.assign(size_t(n), 0.0f);
        }
        streamReady = mergeAdapters(some, std::move(streamReady));
        for (Tensor &t : streamReady)
          std::vector<float>().swap(t.data);
      }
    }
  }
  // What the stream holds: the bucket's tensors not yet handed out and the
  // one handed out last.
  streamCurrent = std::move(streamReady[streamAt++]);
  int64_t held = int64_t(streamCurrent.data.size()) * 4;
  for (size_t k = streamAt; k < streamReady.size(); ++k)
    held += int64_t(streamReady[k].data.size()) * 4;
  streamPeak = std::max(streamPeak, held);
  return &streamCurrent;
}

void Driver::offload() {
  const Manifest &m = manifest;
  if (offloaded)
    throw InvalidInput("the session is offloaded already");
  std::vector<char> copy(size_t(m.persistentBytes + m.arenaBytes));
  device::download(copy.data(), ctx.persistent, m.persistentBytes);
  device::download(copy.data() + m.persistentBytes, ctx.step, m.arenaBytes);
  zrt_arena_destroy(ctx.persistentArena);
  zrt_arena_destroy(ctx.stepArena);
  ctx.persistentArena = ctx.stepArena = nullptr;
  ctx.persistent = ctx.step = nullptr;
  held = std::move(copy);
  offloaded = true;
}

bool Driver::reload() {
  const Manifest &m = manifest;
  if (!offloaded)
    throw InvalidInput("the session is not offloaded");
  // Counted whole, as createContext does. Memory that is not there on some
  // rank leaves the session offloaded on every rank, its state kept, to be
  // reloaded once the host has freed memory.
  if (!everywhere([&] {
        ctx.persistentArena =
            createArena(m.persistentBytes, "persistent arena");
        ctx.stepArena = createArena(m.arenaBytes, "step arena");
      })) {
    zrt_arena_destroy(ctx.persistentArena);
    zrt_arena_destroy(ctx.stepArena);
    ctx.persistentArena = ctx.stepArena = nullptr;
    return false;
  }
  ctx.persistent = static_cast<char *>(
      zrt_arena_at(ctx.persistentArena, 0, m.persistentBytes));
  ctx.step = static_cast<char *>(zrt_arena_at(ctx.stepArena, 0, m.arenaBytes));
  device::upload(ctx.persistent, held.data(), m.persistentBytes);
  device::upload(ctx.step, held.data() + m.persistentBytes, m.arenaBytes);
  std::vector<char>().swap(held);
  offloaded = false;
  return true;
}

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

/// The report that `zero-compile --emit shared` links in beside
/// zero_program, hidden so that each library reads its own; null in an
/// executable.
extern "C" const char zero_report[] __attribute__((weak));

struct zrt_session {
  explicit zrt_session(const zrt_program *program) : driver(program) {}
  Driver driver;
  std::string message, record;
  std::vector<std::string> inputDtypes;
  /// The last broadcast's array, held until the next call.
  std::vector<char> received;
  std::string receivedDtype;
  std::vector<int64_t> receivedShape;
  bool opened = false, broken = false;
};

namespace {

/// Runs `fn`, turning what it throws into a status and the message.
template <typename Fn>
zrt_status guarded(zrt_session *s, const Fn &fn, bool whileOffloaded = false) {
  if (!s)
    return ZRT_FAILED;
  s->message.clear();
  std::vector<char>().swap(s->received);
  if (s->driver.isOffloaded() && !whileOffloaded) {
    s->message = "the session is offloaded: reload() it first";
    return ZRT_FAILED;
  }
  if (!s->opened || s->broken) {
    s->message = s->broken ? "the session is broken by an earlier error; "
                             "close it"
                           : "the session did not open";
    return ZRT_BROKEN;
  }
  try {
    if (fn())
      return ZRT_OK;
    s->message = s->driver.lastError().empty()
                     ? "failed on another rank (its error says why)"
                     : s->driver.lastError();
    return ZRT_FAILED;
  } catch (const InvalidInput &e) {
    s->message = e.what();
    return ZRT_INVALID_INPUT;
  } catch (const Unsupported &e) {
    s->message = e.what();
    return ZRT_FAILED;
  } catch (const std::exception &e) {
    s->message = e.what();
  } catch (...) {
    s->message = "unexpected exception";
  }
  s->broken = true;
  return ZRT_BROKEN;
}

std::vector<HostArray> hostArrays(const zrt_array *arrays, int32_t count) {
  std::vector<HostArray> out;
  if (count < 0 || (count > 0 && !arrays))
    throw InvalidInput("no arrays");
  for (int32_t i = 0; i < count; ++i) {
    const zrt_array &a = arrays[i];
    if (!a.name || !a.dtype || a.ndim < 0 || (a.ndim > 0 && !a.shape))
      throw InvalidInput("array " + std::to_string(i) +
                         " has no name, dtype or shape");
    out.push_back({a.name, a.dtype, static_cast<const char *>(a.data),
                   std::vector<int64_t>(a.shape, a.shape + a.ndim)});
  }
  return out;
}

bool ownsMpiAtExit = false;

/// The bytes of an element of NumPy type string `dtype` ("<f4": 4), or 0
/// for one that zrt_session_broadcast does not send.
int64_t elementBytes(const char *dtype) {
  if (!dtype || std::strlen(dtype) < 3 || std::strlen(dtype) > 4 ||
      !std::strchr("<>|=", dtype[0]) || !std::strchr("biufc", dtype[1]))
    return 0;
  int64_t n = 0;
  for (const char *c = dtype + 2; *c; ++c) {
    if (*c < '0' || *c > '9')
      return 0;
    n = n * 10 + (*c - '0');
  }
  switch (dtype[1]) {
  case 'b':
    return n == 1 ? n : 0;
  case 'f':
    return n == 2 || n == 4 || n == 8 ? n : 0;
  case 'c':
    return n == 8 || n == 16 ? n : 0;
  default:
    return n == 1 || n == 2 || n == 4 || n == 8 ? n : 0;
  }
}

/// What a broadcast's root sends first: whether it has an array, and its
/// size and dtype.
struct BroadcastHeader {
  /// -1: the root refused its array.
  int64_t ndim = -1;
  int64_t bytes = 0;
  char dtype[8] = {};
};

/// The header of `a` on the root; the reason it cannot be sent in `why`.
BroadcastHeader headerOf(const zrt_array *a, std::string &why) {
  BroadcastHeader h;
  // NumPy's most dimensions.
  constexpr int32_t kMaxDims = 64;
  if (!a) {
    why = "the root has no array to send";
    return h;
  }
  int64_t element = elementBytes(a->dtype);
  if (!element) {
    why = std::string("dtype '") + (a->dtype ? a->dtype : "") +
          "' is not a NumPy type string of a bool, integer, float or "
          "complex";
    return h;
  }
  if (a->ndim < 0 || a->ndim > kMaxDims || (a->ndim > 0 && !a->shape)) {
    why = "an array of " + std::to_string(a->ndim) + " dimension(s)";
    return h;
  }
  int64_t bytes = element;
  for (int32_t d = 0; d < a->ndim; ++d)
    if (a->shape[d] < 0 || __builtin_mul_overflow(bytes, a->shape[d], &bytes)) {
      why = "dimension " + std::to_string(d) + " of the array is " +
            std::to_string(a->shape[d]);
      return h;
    }
  if (bytes > 0 && !a->data) {
    why = "the array has no data";
    return h;
  }
  h.ndim = a->ndim;
  h.bytes = bytes;
  std::strncpy(h.dtype, a->dtype, sizeof h.dtype - 1);
  return h;
}

/// zrt_session_broadcast's collectives: the header, the shape, the bytes.
void broadcastArray(zrt_session *s, int32_t root, const zrt_array *array) {
  int32_t rank = s->driver.rank(), world = s->driver.worldSize();
  if (root < 0 || root >= world)
    throw InvalidInput("rank " + std::to_string(root) +
                       " outside the world of " + std::to_string(world) +
                       " rank(s)");
  BroadcastHeader h;
  std::string why;
  if (rank == root)
    h = headerOf(array, why);
  MPI_Bcast(&h, sizeof h, MPI_BYTE, root, MPI_COMM_WORLD);
  if (h.ndim < 0)
    throw InvalidInput(rank == root
                           ? "broadcast: " + why
                           : "broadcast: rank " + std::to_string(root) +
                                 " cannot send its array (its error says "
                                 "why)");
  s->receivedShape.assign(size_t(h.ndim), 0);
  if (rank == root)
    std::copy(array->shape, array->shape + h.ndim, s->receivedShape.begin());
  MPI_Bcast(s->receivedShape.data(), int(h.ndim), MPI_INT64_T, root,
            MPI_COMM_WORLD);
  s->receivedDtype = h.dtype;
  s->received.resize(size_t(h.bytes));
  if (rank == root && h.bytes > 0)
    std::memcpy(s->received.data(), array->data, size_t(h.bytes));
  // MPI counts are ints.
  constexpr int64_t kChunk = int64_t(1) << 30;
  for (int64_t at = 0; at < h.bytes; at += kChunk)
    MPI_Bcast(s->received.data() + at, int(std::min(kChunk, h.bytes - at)),
              MPI_BYTE, root, MPI_COMM_WORLD);
}

} // namespace

extern "C" int32_t zrt_session_api_version(void) {
  return ZRT_SESSION_API_VERSION;
}

extern "C" zrt_status zrt_session_open(const zrt_program *program, int32_t argc,
                                       const char *const *argv,
                                       zrt_session **out) {
  if (!out)
    return ZRT_FAILED;
  *out = nullptr;
  if (!program)
    return ZRT_FAILED;
  zrt_session *s = new (std::nothrow) zrt_session(program);
  if (!s)
    return ZRT_FAILED;
  *out = s;
  int initialized = 0;
  MPI_Initialized(&initialized);
  std::vector<std::string> args = {"zero-session"};
  for (int32_t i = 0; i < argc; ++i)
    args.push_back(argv && argv[i] ? argv[i] : "");
  std::vector<char *> ptrs;
  for (std::string &a : args)
    ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  try {
    s->opened = s->driver.open(int(args.size()), ptrs.data());
  } catch (const std::exception &e) {
    s->message = e.what();
    return ZRT_BROKEN;
  }
  if (!initialized && !ownsMpiAtExit) {
    // MPI cannot start twice in a process: the first session's MPI ends
    // with the process, so that the host can open another session. The
    // handler runs before the destructors of the runtime's statics, which
    // exist by now.
    ownsMpiAtExit = true;
    std::atexit([] { zrt_finalize(); });
  }
  if (!s->opened) {
    s->message = s->driver.lastError().empty()
                     ? "failed on another rank (its error says why)"
                     : s->driver.lastError();
    return ZRT_FAILED;
  }
  return ZRT_OK;
}

extern "C" const char *zrt_session_error(const zrt_session *s) {
  return s ? s->message.c_str() : "no session";
}

extern "C" int32_t zrt_session_num_inputs(const zrt_session *s) {
  return s && s->opened ? s->driver.numInputs() : 0;
}

extern "C" zrt_status zrt_session_input(const zrt_session *cs, int32_t index,
                                        int32_t local, zrt_input_info *out) {
  auto *s = const_cast<zrt_session *>(cs);
  return guarded(s, [&] {
    if (!out || index < 0 || index >= s->driver.numInputs())
      throw InvalidInput("input index " + std::to_string(index) +
                         " outside [0, " +
                         std::to_string(s->driver.numInputs()) + ")");
    const InputInfo &in = s->driver.input(index);
    std::vector<int64_t> shape = s->driver.inputShape(index, local != 0);
    if (shape.size() > 8)
      throw std::runtime_error("input '" + in.name + "' has over 8 dims");
    if (s->inputDtypes.size() != size_t(s->driver.numInputs()))
      for (int32_t i = 0; i < s->driver.numInputs(); ++i)
        s->inputDtypes.push_back(hostDtypeOf(s->driver.input(i)));
    out->name = in.name.c_str();
    out->dtype = s->inputDtypes[size_t(index)].c_str();
    out->ndim = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      out->shape[d] = shape[d];
    return true;
  });
}

extern "C" zrt_status zrt_session_step(zrt_session *s, const zrt_array *arrays,
                                       int32_t count, int32_t local,
                                       const char **record) {
  return guarded(s, [&] {
    s->record = s->driver.stepArrays(hostArrays(arrays, count), local != 0);
    if (record)
      *record = s->record.c_str();
    return true;
  });
}

extern "C" zrt_status zrt_session_evaluate(zrt_session *s,
                                           const zrt_array *arrays,
                                           int32_t count, int32_t local,
                                           const char **record) {
  return guarded(s, [&] {
    s->record = s->driver.evaluateArrays(hostArrays(arrays, count), local != 0);
    if (record)
      *record = s->record.c_str();
    return true;
  });
}

extern "C" zrt_status zrt_session_save(zrt_session *s, const char *dir) {
  return guarded(s, [&] { return s->driver.saveTo(dir ? dir : ""); });
}

extern "C" zrt_status zrt_session_load(zrt_session *s, const char *dir) {
  return guarded(s, [&] { return s->driver.loadFrom(dir ? dir : ""); });
}

extern "C" zrt_status zrt_session_export_hf(zrt_session *s, const char *dir) {
  return guarded(s, [&] { return s->driver.exportHfTo(dir ? dir : ""); });
}

extern "C" zrt_status zrt_session_parameters_begin(zrt_session *s,
                                                   int64_t bucket_bytes,
                                                   int32_t rank) {
  return guarded(s, [&] {
    s->driver.parametersBegin(bucket_bytes, rank);
    return true;
  });
}

extern "C" zrt_status zrt_session_parameters_next(zrt_session *s,
                                                  zrt_tensor *out) {
  return guarded(s, [&] {
    if (!out)
      throw InvalidInput("no tensor to fill");
    *out = zrt_tensor{};
    const Tensor *t = s->driver.parametersNext();
    if (!t)
      return true;
    if (t->shape.size() > 8)
      throw std::runtime_error("parameter '" + t->name + "' has over 8 dims");
    out->name = t->name.c_str();
    out->data = t->data.empty() ? nullptr : t->data.data();
    out->ndim = int32_t(t->shape.size());
    for (size_t d = 0; d < t->shape.size(); ++d)
      out->shape[d] = t->shape[d];
    return true;
  });
}

extern "C" zrt_status zrt_session_offload(zrt_session *s) {
  return guarded(s, [&] {
    s->driver.offload();
    return true;
  });
}

extern "C" zrt_status zrt_session_reload(zrt_session *s) {
  return guarded(
      s, [&] { return s->driver.reload(); },
      /*whileOffloaded=*/true);
}

extern "C" int64_t zrt_session_offloaded_bytes(const zrt_session *s) {
  return s && s->opened ? s->driver.offloadedBytes() : 0;
}

extern "C" int64_t zrt_session_stream_peak_bytes(const zrt_session *s) {
  return s && s->opened ? s->driver.streamPeakBytes() : 0;
}

extern "C" const char *zrt_session_manifest(const zrt_session *s) {
  return s ? s->driver.manifestText() : "";
}

extern "C" zrt_status zrt_session_report(const zrt_session *cs,
                                         const char **json) {
  auto *s = const_cast<zrt_session *>(cs);
  if (json)
    *json = "";
  if (!s)
    return ZRT_FAILED;
  s->message.clear();
  if (!zero_report) {
    s->message = "the program carries no report (`zero-compile --emit "
                 "shared` links one into a library)";
    return ZRT_FAILED;
  }
  if (json)
    *json = zero_report;
  return ZRT_OK;
}

extern "C" zrt_status zrt_session_broadcast(zrt_session *s, int32_t root,
                                            const zrt_array *array,
                                            zrt_array *out) {
  return guarded(
      s,
      [&] {
        if (!out)
          throw InvalidInput("no array to fill");
        *out = zrt_array{};
        broadcastArray(s, root, array);
        out->data = s->received.data();
        out->dtype = s->receivedDtype.c_str();
        out->ndim = int32_t(s->receivedShape.size());
        out->shape = s->receivedShape.data();
        return true;
      },
      /*whileOffloaded=*/true);
}

extern "C" int32_t zrt_session_rank(const zrt_session *s) {
  return s && s->opened ? s->driver.rank() : 0;
}

extern "C" int32_t zrt_session_world_size(const zrt_session *s) {
  return s && s->opened ? s->driver.worldSize() : 0;
}

extern "C" int64_t zrt_session_steps(const zrt_session *s) {
  return s && s->opened ? s->driver.stepsTaken() : 0;
}

extern "C" int64_t zrt_session_peak_bytes(const zrt_session *s) {
  return s && s->opened ? s->driver.peakBytes() : 0;
}

extern "C" void zrt_session_close(zrt_session *s) {
  if (!s)
    return;
  // A broken session may have left a collective behind on some rank: its
  // rank sets are not freed (the process cannot open another session).
  if (s->opened && !s->broken)
    s->driver.close();
  else if (!s->opened)
    s->driver.releaseTopology();
  delete s;
}
