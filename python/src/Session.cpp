//===- Session.cpp - zero_mlir._core: a step library's session in Python --===//
//
// Part of the zero-mlir project.
//
// The extension behind zero_mlir.Engine. It does not link the runtime: it
// loads the library `zero-compile --emit shared` wrote and calls its
// zrt_session_* functions (zero_rt/session.h) through pointers resolved by
// name, so one build of the package drives any step, CPU or CUDA.
//
//===----------------------------------------------------------------------===//

#include "zero_rt/session.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;

// The dtype strings below are NumPy's for this host's byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "zero_mlir's dtype strings assume a little-endian host");

namespace {

/// zero_rt/session.h passes bf16 arrays as their bits.
constexpr const char *kBf16Dtype = "<u2";

[[noreturn]] void raise(PyObject *type, const std::string &message) {
  PyErr_SetString(type, message.c_str());
  throw nb::python_error();
}

/// The session calls of a step library: member, and the symbol's name after
/// `zrt_session_`.
#define ZERO_SESSION_CALLS(X)                                                  \
  X(apiVersion, api_version)                                                   \
  X(open, open)                                                                \
  X(error, error)                                                              \
  X(numInputs, num_inputs)                                                     \
  X(input, input)                                                              \
  X(step, step)                                                                \
  X(evaluate, evaluate)                                                        \
  X(parametersBegin, parameters_begin)                                         \
  X(parametersNext, parameters_next)                                           \
  X(save, save)                                                                \
  X(load, load)                                                                \
  X(exportHf, export_hf)                                                       \
  X(offload, offload)                                                          \
  X(reload, reload)                                                            \
  X(offloadedBytes, offloaded_bytes)                                           \
  X(streamPeakBytes, stream_peak_bytes)                                        \
  X(manifest, manifest)                                                        \
  X(report, report)                                                            \
  X(broadcast, broadcast)                                                      \
  X(rank, rank)                                                                \
  X(worldSize, world_size)                                                     \
  X(steps, steps)                                                              \
  X(peakBytes, peak_bytes)                                                     \
  X(close, close)

/// A step library, loaded and checked.
struct Library {
#define ZERO_SESSION_MEMBER(member, symbol)                                    \
  decltype(&zrt_session_##symbol) member = nullptr;
  ZERO_SESSION_CALLS(ZERO_SESSION_MEMBER)
#undef ZERO_SESSION_MEMBER
  const zrt_program *program = nullptr;

  /// Loads `path`. RTLD_GLOBAL: Open MPI's components, which it dlopen's
  /// itself, resolve libmpi's symbols from the global scope. A library that
  /// passes the checks is never unloaded: a session registers MPI's
  /// finalization at the process's exit, in its code.
  explicit Library(const std::string &path) {
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle)
      raise(PyExc_OSError,
            "cannot load the step library '" + path + "': " + dlerror());
    std::vector<std::string> missing;
    auto resolve = [&](const char *name) {
      void *symbol = dlsym(handle, name);
      if (!symbol)
        missing.push_back(name);
      return symbol;
    };
    size_t calls = 0;
#define ZERO_SESSION_RESOLVE(member, symbol)                                   \
  member =                                                                     \
      reinterpret_cast<decltype(member)>(resolve("zrt_session_" #symbol));     \
  ++calls;
    ZERO_SESSION_CALLS(ZERO_SESSION_RESOLVE)
#undef ZERO_SESSION_RESOLVE
    // None of the calls: a runtime without zero_rt/session.h, or not a step.
    if (missing.size() == calls)
      missing.assign(1, "zrt_session_*");
    program = static_cast<const zrt_program *>(resolve("zero_program"));
    // A library of another version may lack calls: say which it speaks.
    int32_t version = apiVersion ? apiVersion() : ZRT_SESSION_API_VERSION;
    if (version != ZRT_SESSION_API_VERSION) {
      dlclose(handle);
      raise(PyExc_RuntimeError,
            "'" + path + "' speaks version " + std::to_string(version) +
                " of the session API and this zero_mlir version " +
                std::to_string(ZRT_SESSION_API_VERSION) +
                ": rebuild the one that is older");
    }
    if (!missing.empty()) {
      std::string names;
      for (const std::string &name : missing)
        names += (names.empty() ? "" : ", ") + name;
      dlclose(handle);
      raise(PyExc_RuntimeError,
            "'" + path + "' is not a step library of `zero-compile --emit " +
                "shared`: it does not define " + names);
    }
  }
};

/// NumPy's dtype string of an array's element type, or null when the
/// session has none for it.
const char *numpyDtype(nb::dlpack::dtype t) {
  if (t.lanes != 1)
    return nullptr;
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
  case nb::dlpack::dtype_code::Int:
    switch (t.bits) {
    case 8:
      return "|i1";
    case 16:
      return "<i2";
    case 32:
      return "<i4";
    case 64:
      return "<i8";
    }
    return nullptr;
  case nb::dlpack::dtype_code::UInt:
    switch (t.bits) {
    case 8:
      return "|u1";
    case 16:
      return "<u2";
    case 32:
      return "<u4";
    case 64:
      return "<u8";
    }
    return nullptr;
  case nb::dlpack::dtype_code::Float:
    switch (t.bits) {
    case 16:
      return "<f2";
    case 32:
      return "<f4";
    case 64:
      return "<f8";
    }
    return nullptr;
  case nb::dlpack::dtype_code::Bfloat:
    return t.bits == 16 ? kBf16Dtype : nullptr;
  case nb::dlpack::dtype_code::Bool:
    return t.bits == 8 ? "|b1" : nullptr;
  default:
    return nullptr;
  }
}

using HostArray = nb::ndarray<nb::c_contig, nb::device::cpu>;
/// An input the session only reads: read-only arrays (np.frombuffer, a
/// memory-mapped np.load) are taken as they are.
using InputArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// One rank's session of a step library.
class Session {
public:
  Session(const std::string &path, const std::vector<std::string> &args)
      : lib(path) {
    std::vector<const char *> argv;
    for (const std::string &arg : args)
      argv.push_back(arg.c_str());
    zrt_status status;
    std::string message;
    {
      nb::gil_scoped_release release;
      status = lib.open(lib.program, static_cast<int32_t>(argv.size()),
                        argv.data(), &session);
      if (status != ZRT_OK) {
        message = session ? lib.error(session) : "out of memory";
        // session.h: close it either way.
        if (session)
          lib.close(session);
        session = nullptr;
      }
    }
    if (status != ZRT_OK)
      raiseStatus(status, message);
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session() {
    // An engine the host forgot to close; the calls are collective, so a
    // host should close it explicitly (Engine is a context manager).
    if (session) {
      nb::gil_scoped_release release;
      lib.close(session);
    }
  }

  void close() {
    if (!session)
      return;
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    lib.close(session);
    session = nullptr;
  }

  nb::list inputs(bool local) {
    zrt_session *s = live(/*allowBroken=*/true);
    nb::list result;
    for (int32_t i = 0, e = lib.numInputs(s); i < e; ++i) {
      zrt_input_info info{};
      check(lib.input(s, i, local, &info), s);
      nb::list shape;
      for (int32_t d = 0; d < info.ndim; ++d)
        shape.append(info.shape[d]);
      nb::dict entry;
      entry["name"] = info.name;
      entry["dtype"] = info.dtype;
      entry["shape"] = nb::tuple(shape);
      result.append(entry);
    }
    return result;
  }

  /// zrt_session_step or zrt_session_evaluate on (name, array) pairs: the
  /// step's JSON record.
  std::string run(const std::vector<std::pair<std::string, nb::object>> &named,
                  bool local, bool evaluate) {
    zrt_session *s = live();
    // Held until the call returns: the arrays' memory and their shapes.
    std::vector<InputArray> arrays(named.size());
    std::vector<std::vector<int64_t>> shapes(named.size());
    std::vector<zrt_array> args(named.size());
    for (size_t i = 0; i < named.size(); ++i) {
      const auto &[name, value] = named[i];
      if (!nb::try_cast(value, arrays[i]))
        raise(PyExc_TypeError,
              "input '" + name +
                  "': expected a CPU array (NumPy, or a tensor with "
                  "__dlpack__), got " +
                  nb::type_name(value.type()).c_str());
      const char *dtype = numpyDtype(arrays[i].dtype());
      if (!dtype)
        raise(PyExc_ValueError, "input '" + name +
                                    "': an element type the session does not "
                                    "take (not an integer, float or bf16)");
      for (size_t d = 0; d < arrays[i].ndim(); ++d)
        shapes[i].push_back(static_cast<int64_t>(arrays[i].shape(d)));
      args[i] = {name.c_str(), arrays[i].data(), dtype,
                 static_cast<int32_t>(arrays[i].ndim()), shapes[i].data()};
    }
    const char *record = nullptr;
    withoutGil(s, [&] {
      auto call = evaluate ? lib.evaluate : lib.step;
      return call(s, args.data(), static_cast<int32_t>(args.size()), local,
                  &record);
    });
    return record ? record : "";
  }

  void parametersBegin(int64_t bucketBytes, int32_t rank) {
    zrt_session *s = live();
    withoutGil(s, [&] { return lib.parametersBegin(s, bucketBytes, rank); });
  }

  /// The next (name, array or None), or None past the last tensor. The
  /// array is a copy: the session's buffer lasts until its next call.
  nb::object parametersNext() {
    zrt_session *s = live();
    zrt_tensor tensor{};
    withoutGil(s, [&] { return lib.parametersNext(s, &tensor); });
    if (!tensor.name)
      return nb::none();
    nb::object data = nb::none();
    if (tensor.data) {
      std::vector<size_t> shape(tensor.shape, tensor.shape + tensor.ndim);
      size_t numel = 1;
      for (size_t n : shape)
        numel *= n;
      auto copy = std::make_unique<float[]>(numel);
      std::memcpy(copy.get(), tensor.data, numel * sizeof(float));
      nb::capsule owner(copy.get(), [](void *p) noexcept {
        delete[] static_cast<float *>(p);
      });
      float *raw = copy.release();
      data = nb::cast(nb::ndarray<nb::numpy, float>(raw, shape.size(),
                                                    shape.data(), owner));
    }
    return nb::make_tuple(tensor.name, data);
  }

  void save(const std::string &dir) { pathCall(lib.save, dir); }
  void load(const std::string &dir) { pathCall(lib.load, dir); }
  void exportHf(const std::string &dir) { pathCall(lib.exportHf, dir); }

  void offload() {
    zrt_session *s = live();
    withoutGil(s, [&] { return lib.offload(s); });
  }
  void reload() {
    zrt_session *s = live();
    withoutGil(s, [&] { return lib.reload(s); });
  }

  std::string manifest() { return lib.manifest(live(true)); }

  std::string report() {
    zrt_session *s = live(true);
    const char *json = nullptr;
    check(lib.report(s, &json), s);
    return json ? json : "";
  }

  /// Rank `root`'s array on every rank, as a new NumPy array. `value` is
  /// read on the root only; what the root cannot send is refused on every
  /// rank, the root raising why.
  nb::object broadcast(nb::handle value, int64_t root) {
    zrt_session *s = live();
    int32_t world = lib.worldSize(s);
    if (root < 0 || root >= world)
      raise(PyExc_ValueError, "rank " + std::to_string(root) +
                                  " outside the world of " +
                                  std::to_string(world) + " rank(s)");
    // Only read: a read-only array (np.frombuffer's) is sent as well.
    nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> array;
    std::vector<int64_t> shape;
    zrt_array arg{};
    const zrt_array *sent = nullptr;
    PyObject *refusedAs = nullptr;
    std::string refusal;
    if (lib.rank(s) == root) {
      const char *dtype = nullptr;
      if (value.is_none()) {
        refusedAs = PyExc_ValueError;
        refusal = "broadcast: the root passes None";
      } else if (!nb::try_cast(value, array)) {
        refusedAs = PyExc_TypeError;
        refusal = std::string("broadcast: expected a CPU array (NumPy, or a "
                              "tensor with __dlpack__), got ") +
                  nb::type_name(value.type()).c_str();
      } else if (!(dtype = numpyDtype(array.dtype()))) {
        refusedAs = PyExc_ValueError;
        refusal = "broadcast: an element type the session does not send "
                  "(not a bool, integer, float or bf16)";
      } else {
        for (size_t d = 0; d < array.ndim(); ++d)
          shape.push_back(static_cast<int64_t>(array.shape(d)));
        arg = {nullptr, array.data(), dtype, static_cast<int32_t>(array.ndim()),
               shape.data()};
        sent = &arg;
      }
    }
    zrt_array out{};
    zrt_status status;
    std::string message;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = lib.broadcast(s, static_cast<int32_t>(root), sent, &out);
      if (status != ZRT_OK)
        message = lib.error(s);
    }
    // The root says why it sent nothing; the others learnt it from the
    // session.
    if (refusedAs)
      raise(refusedAs, refusal);
    if (status != ZRT_OK)
      raiseStatus(status, message);
    nb::list dims;
    for (int32_t d = 0; d < out.ndim; ++d)
      dims.append(out.shape[d]);
    nb::object numpy = nb::module_::import_("numpy");
    nb::object result =
        numpy.attr("empty")(nb::tuple(dims), numpy.attr("dtype")(out.dtype));
    // The session's copy lasts until its next call: copy it out.
    auto bytes = nb::cast<size_t>(result.attr("nbytes"));
    HostArray target;
    if (bytes > 0 && nb::try_cast(result, target))
      std::memcpy(target.data(), out.data, bytes);
    else if (bytes > 0)
      raise(PyExc_RuntimeError, std::string("broadcast: cannot fill a NumPy "
                                            "array of dtype ") +
                                    out.dtype);
    return result;
  }

  int64_t steps() { return lib.steps(live(true)); }
  int32_t rank() { return lib.rank(live(true)); }
  int32_t worldSize() { return lib.worldSize(live(true)); }
  int64_t offloadedBytes() { return lib.offloadedBytes(live(true)); }
  int64_t streamPeakBytes() { return lib.streamPeakBytes(live(true)); }
  int64_t peakBytes() { return lib.peakBytes(live(true)); }

private:
  Library lib;
  zrt_session *session = nullptr;
  /// After ZRT_BROKEN only close is left (session.h).
  std::string brokenBy;
  /// The GIL is released during the calls: one call at a time.
  std::mutex mutex;

  zrt_session *live(bool allowBroken = false) {
    if (!session)
      raise(PyExc_RuntimeError, "the engine is closed");
    if (!brokenBy.empty() && !allowBroken)
      raise(PyExc_RuntimeError, "the session was lost by an earlier error (" +
                                    brokenBy + "); only close() is left");
    return session;
  }

  [[noreturn]] void raiseStatus(zrt_status status, const std::string &message) {
    if (status == ZRT_BROKEN)
      brokenBy = message.empty() ? "broken" : message;
    raise(status == ZRT_INVALID_INPUT ? PyExc_ValueError : PyExc_RuntimeError,
          message);
  }

  void check(zrt_status status, zrt_session *s) {
    if (status != ZRT_OK)
      raiseStatus(status, lib.error(s));
  }

  /// Runs a (collective, possibly long) call without the GIL, so that the
  /// host's other threads go on, and raises its error with the GIL back.
  template <typename Call>
  void withoutGil(zrt_session *s, Call &&call) {
    zrt_status status;
    std::string message;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex);
      status = call();
      if (status != ZRT_OK)
        message = lib.error(s);
    }
    if (status != ZRT_OK)
      raiseStatus(status, message);
  }

  void pathCall(zrt_status (*call)(zrt_session *, const char *),
                const std::string &dir) {
    zrt_session *s = live();
    withoutGil(s, [&] { return call(s, dir.c_str()); });
  }
};

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "zero_mlir's binding of zero_rt/session.h (use zero_mlir.Engine)";
  m.attr("API_VERSION") = ZRT_SESSION_API_VERSION;
  m.attr("BF16_DTYPE") = kBf16Dtype;
  nb::class_<Session>(m, "Session")
      .def(nb::init<const std::string &, const std::vector<std::string> &>(),
           nb::arg("library"), nb::arg("argv"))
      .def("close", &Session::close)
      .def("inputs", &Session::inputs, nb::arg("local"))
      .def(
          "step",
          [](Session &s,
             const std::vector<std::pair<std::string, nb::object>> &arrays,
             bool local) { return s.run(arrays, local, /*evaluate=*/false); },
          nb::arg("arrays"), nb::arg("local"))
      .def(
          "evaluate",
          [](Session &s,
             const std::vector<std::pair<std::string, nb::object>> &arrays,
             bool local) { return s.run(arrays, local, /*evaluate=*/true); },
          nb::arg("arrays"), nb::arg("local"))
      .def("parameters_begin", &Session::parametersBegin,
           nb::arg("bucket_bytes"), nb::arg("rank"))
      .def("parameters_next", &Session::parametersNext)
      .def("save", &Session::save, nb::arg("dir"))
      .def("load", &Session::load, nb::arg("dir"))
      .def("export_hf", &Session::exportHf, nb::arg("dir"))
      .def("offload", &Session::offload)
      .def("reload", &Session::reload)
      .def("manifest", &Session::manifest)
      .def("report", &Session::report)
      .def("broadcast", &Session::broadcast, nb::arg("array").none(),
           nb::arg("root"))
      .def("steps", &Session::steps)
      .def("rank", &Session::rank)
      .def("world_size", &Session::worldSize)
      .def("offloaded_bytes", &Session::offloadedBytes)
      .def("stream_peak_bytes", &Session::streamPeakBytes)
      .def("peak_bytes", &Session::peakBytes);
}
