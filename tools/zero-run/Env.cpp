//===- Env.cpp - The environment a job's ranks get ------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Env.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

extern char **environ;

using namespace llvm;
using namespace zero::run;

void Environment::set(EnvVar var) {
  for (EnvVar &v : list)
    if (v.name == var.name) {
      v = std::move(var);
      return;
    }
  list.push_back(std::move(var));
}

const EnvVar *Environment::find(StringRef name) const {
  for (const EnvVar &v : list)
    if (v.name == name)
      return &v;
  return nullptr;
}

static bool isName(StringRef name) {
  return !name.empty() && !isDigit(name.front()) &&
         all_of(name, [](char c) { return isAlnum(c) || c == '_'; });
}

Expected<EnvVar> zero::run::parseAssignment(StringRef text, StringRef origin) {
  auto [name, value] = text.split('=');
  if (!text.contains('=') || !isName(name))
    return createStringError(
        inconvertibleErrorCode(),
        formatv("{0}: '{1}' is not NAME=VALUE (a name of letters, digits "
                "and underscores that does not start with a digit)",
                origin, text)
            .str());
  return EnvVar{name.str(), value.str(), origin.str()};
}

Error zero::run::readEnvFile(StringRef path, Environment &env) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return createStringError(
        buffer.getError(), "%s: cannot read the env file: %s",
        path.str().c_str(), buffer.getError().message().c_str());
  SmallVector<StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (auto [index, raw] : enumerate(lines)) {
    StringRef line = raw.rtrim("\r");
    if (line.trim().empty() || line.ltrim().starts_with("#"))
      continue;
    auto var = parseAssignment(line, formatv("{0}:{1}", path, index + 1).str());
    if (!var)
      return var.takeError();
    env.set(std::move(*var));
  }
  return Error::success();
}

std::vector<std::string> zero::run::envFiles() {
  const char *named = std::getenv("DS_ENV_FILE");
  std::string name = named && *named ? named : ".deepspeed_env";
  std::vector<std::string> files;
  if (sys::path::is_absolute(name)) {
    files.push_back(name);
  } else {
    SmallString<256> home;
    if (sys::path::home_directory(home)) {
      sys::path::append(home, name);
      files.push_back(std::string(home));
    }
    SmallString<256> here(".");
    sys::path::append(here, name);
    files.push_back(std::string(here));
  }
  std::vector<std::string> existing;
  for (const std::string &f : files)
    if (sys::fs::is_regular_file(f) && !is_contained(existing, f))
      existing.push_back(f);
  return existing;
}

void zero::run::addExportedEnvironment(Environment &env) {
  static const char *const prefixes[] = {"ZRT_", "OMP_", "NCCL_", "UCX_"};
  // By name, so that mpirun's command line does not depend on the order of
  // this process's environment.
  std::vector<std::pair<std::string, std::string>> found;
  for (char **e = environ; e && *e; ++e) {
    StringRef entry(*e);
    auto [name, value] = entry.split('=');
    if (any_of(prefixes, [&](const char *p) { return name.starts_with(p); }))
      found.push_back({name.str(), value.str()});
  }
  llvm::sort(found);
  for (auto &[name, value] : found)
    env.set({name, value, "environment"});
}
