//===- Compile.cpp - Compiles a job's program, cached by schedule ---------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Compile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"

#include <cstdlib>
#include <optional>

using namespace llvm;
using namespace zero::run;

static Error fail(const Twine &msg) {
  return createStringError(inconvertibleErrorCode(), msg.str());
}

std::string zero::run::defaultCacheDir() {
  if (const char *dir = std::getenv("ZERO_RUN_CACHE"); dir && *dir)
    return dir;
  SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    path = xdg;
  } else if (sys::path::home_directory(path)) {
    sys::path::append(path, ".cache");
  } else {
    path = ".";
  }
  sys::path::append(path, "zero-run");
  return std::string(path);
}

/// Runs `argv`, its output into `log`; returns the exit status (-1: it
/// could not start) and the output.
static std::pair<int, std::string> runTool(ArrayRef<std::string> argv,
                                           StringRef log) {
  std::vector<StringRef> args(argv.begin(), argv.end());
  std::optional<StringRef> redirects[] = {std::nullopt, log, log};
  std::string error;
  int rc = sys::ExecuteAndWait(argv.front(), args, std::nullopt, redirects, 0,
                               0, &error);
  std::string output;
  if (auto buffer = MemoryBuffer::getFile(log))
    output = (*buffer)->getBuffer().str();
  if (rc < 0 && output.empty())
    output = error;
  return {rc, output};
}

/// What identifies the compiler and runtime an executable was built with:
/// zero-compile's and the runtime libraries' sizes and modification times.
static std::string toolchainIdentity(StringRef zeroCompile) {
  std::string id;
  auto add = [&](StringRef path) {
    sys::fs::file_status st;
    if (!sys::fs::status(path, st))
      id += formatv("{0} {1} {2}\n", path, st.getSize(),
                    st.getLastModificationTime().time_since_epoch().count())
                .str();
  };
  add(zeroCompile);
  std::error_code ec;
  std::vector<std::string> libs;
  for (sys::fs::directory_iterator it(ZERO_RUNTIME_LIBRARY_DIR, ec), end;
       it != end && !ec; it.increment(ec)) {
    StringRef name = sys::path::filename(it->path());
    if (name.starts_with("libzero_runtime") || name.starts_with("zero_runtime"))
      libs.push_back(it->path());
  }
  llvm::sort(libs);
  for (const std::string &lib : libs)
    add(lib);
  return id;
}

Expected<CompiledProgram>
zero::run::compileCached(const CompileRequest &request) {
  if (std::error_code ec = sys::fs::create_directories(request.cacheDir))
    return fail(formatv("cannot create the cache directory '{0}': {1}",
                        request.cacheDir, ec.message()));
  std::string where =
      formatv("{0} rank(s)", request.worldSize).str() +
      (request.ranksPerNode
           ? formatv(", {0} per node", request.ranksPerNode).str()
           : std::string());
  std::vector<std::string> common = {request.zeroCompile, request.model};
  common.insert(common.end(), request.options.begin(), request.options.end());
  common.insert(common.end(),
                {"--world-size", std::to_string(request.worldSize)});
  if (request.ranksPerNode)
    common.insert(common.end(),
                  {"--ranks-per-node", std::to_string(request.ranksPerNode)});
  std::string target = "cpu";
  for (size_t i = 0; i < request.options.size(); ++i) {
    StringRef o = request.options[i];
    if ((o == "--target" || o == "-target") && i + 1 < request.options.size())
      target = request.options[i + 1];
    else if (o.consume_front("--target=") || o.consume_front("-target="))
      target = o.str();
  }

  // The scheduled program, and what zero-compile says when it refuses it.
  SmallString<256> schedule, log;
  int fd;
  if (std::error_code ec = sys::fs::createUniqueFile(
          request.cacheDir + "/schedule-%%%%%%%%.mlir", fd, schedule))
    return fail(formatv("cannot write in the cache directory '{0}': {1}",
                        request.cacheDir, ec.message()));
  sys::Process::SafelyCloseFileDescriptor(fd);
  if (std::error_code ec = sys::fs::createUniqueFile(
          request.cacheDir + "/compile-%%%%%%%%.log", fd, log))
    return fail(formatv("cannot write in the cache directory '{0}': {1}",
                        request.cacheDir, ec.message()));
  sys::Process::SafelyCloseFileDescriptor(fd);
  auto cleanup = [&] {
    sys::fs::remove(schedule);
    sys::fs::remove(log);
  };
  std::vector<std::string> argv = common;
  argv.insert(argv.end(), {"--emit", "mlir", "-o", std::string(schedule)});
  auto [rc, output] = runTool(argv, log);
  if (rc != 0) {
    cleanup();
    return fail(formatv("zero-compile refused the schedule for {0}:\n{1}",
                        where, StringRef(output).rtrim())
                    .str());
  }
  auto text = MemoryBuffer::getFile(schedule);
  if (!text) {
    cleanup();
    return fail(formatv("cannot read the scheduled program '{0}'", schedule));
  }
  SHA256 sha;
  sha.update("zero-run schedule 1\n");
  sha.update("target " + target + "\n");
  sha.update(toolchainIdentity(request.zeroCompile));
  sha.update((*text)->getBuffer());
  std::array<uint8_t, 32> digest = sha.final();
  CompiledProgram program;
  program.hash = toHex(ArrayRef<uint8_t>(digest).take_front(8), true);

  SmallString<256> entry(request.cacheDir);
  sys::path::append(entry, program.hash);
  SmallString<256> exe(entry);
  sys::path::append(exe, "train");
  program.executable = std::string(exe);
  if (sys::fs::can_execute(exe)) {
    program.cached = true;
    cleanup();
    return program;
  }
  if (std::error_code ec = sys::fs::create_directories(entry)) {
    cleanup();
    return fail(formatv("cannot create '{0}': {1}", entry, ec.message()));
  }
  // Built beside its final name and renamed, so a concurrent zero-run never
  // sees half an executable.
  std::string partial =
      formatv("{0}.partial-{1}", exe, sys::Process::getProcessId()).str();
  argv = common;
  argv.insert(argv.end(), {"-o", partial});
  std::tie(rc, output) = runTool(argv, log);
  if (rc != 0) {
    sys::fs::remove(partial);
    cleanup();
    return fail(formatv("zero-compile failed to build the schedule for "
                        "{0}:\n{1}",
                        where, StringRef(output).rtrim())
                    .str());
  }
  SmallString<256> kept(entry);
  sys::path::append(kept, "schedule.mlir");
  sys::fs::rename(schedule, kept);
  if (std::error_code ec = sys::fs::rename(partial, exe)) {
    sys::fs::remove(partial);
    cleanup();
    return fail(formatv("cannot write '{0}': {1}", exe, ec.message()));
  }
  cleanup();
  return program;
}
