//===- Directory.cpp - A run's save directory -----------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Directory.h"
#include "Checkpoint/Format.h"
#include "Files.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

/// `text` without its trailing white space.
std::string trimEnd(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  return text;
}

std::vector<std::string> stepDirectories(const std::string &dir) {
  std::vector<std::string> steps;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return steps;
  while (dirent *e = ::readdir(d))
    if (isStepName(e->d_name) && isDirectory(dir + "/" + e->d_name))
      steps.push_back(e->d_name);
  ::closedir(d);
  return steps;
}

/// Whether `dir` holds checkpoints (a `latest` file or step_N directories).
bool hasCheckpoints(const std::string &dir) {
  struct stat st;
  return ::stat((dir + "/latest").c_str(), &st) == 0 ||
         !stepDirectories(dir).empty();
}

/// Removes the checkpoints of `dir` (its `latest` and step_N directories
/// with what they hold); returns how many step directories it removed.
int removeCheckpoints(const std::string &dir) {
  std::vector<std::string> steps = stepDirectories(dir);
  for (const std::string &step : steps) {
    std::string path = dir + "/" + step;
    // A step directory holds files only (manifest, rank files, temporaries).
    DIR *d = ::opendir(path.c_str());
    if (!d)
      fail("cannot remove '" + path + "': " + std::strerror(errno));
    std::vector<std::string> files;
    while (dirent *e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        files.push_back(path + "/" + e->d_name);
    ::closedir(d);
    for (const std::string &f : files)
      if (::unlink(f.c_str()) != 0)
        fail("cannot remove '" + f + "': " + std::strerror(errno));
    if (::rmdir(path.c_str()) != 0)
      fail("cannot remove '" + path + "': " + std::strerror(errno));
  }
  std::string latest = dir + "/latest";
  if (::unlink(latest.c_str()) != 0 && errno != ENOENT)
    fail("cannot remove '" + latest + "': " + std::strerror(errno));
  return int(steps.size());
}

/// Whether `--resume resume` continues the run that saves into `save`:
/// `resume` is that directory or one of its step directories.
bool resumesFrom(const std::string &resume, const std::string &save) {
  if (resume.empty())
    return false;
  auto canonical = [](const std::string &path) {
    char *real = ::realpath(path.c_str(), nullptr);
    std::string out = real ? real : "";
    std::free(real);
    return out;
  };
  std::string from = canonical(resume), to = canonical(save);
  if (from.empty() || to.empty())
    return false;
  return from == to || dirOf(from) == to;
}

std::string hostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0)
    return "?";
  return host;
}

/// What the lock file open as `fd` holds from its current position, without
/// its line end.
std::string readOwner(int fd) {
  std::string owner;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    owner.append(buf, size_t(n));
  return trimEnd(owner);
}

} // namespace

void zrt::DirectoryLock::acquire(const std::string &dir) {
  release();
  std::string path = dir + "/lock";
  int f = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (f < 0)
    fail("cannot create the lock file '" + path + "': " + std::strerror(errno));
  // What the last holder wrote: empty when it released the lock.
  std::string owner = readOwner(f);
  if (::flock(f, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(f);
    if (err != EWOULDBLOCK)
      fail("cannot lock '" + path + "': " + std::strerror(err));
    fail("'" + dir + "' is in use by another run (" +
         (owner.empty() ? std::string("owner unknown") : owner) +
         ", lock file '" + path +
         "'): two runs saving into one directory would mix their "
         "checkpoints; wait for it to end or save elsewhere");
  }
  // Read again under the lock: the holder may have changed meanwhile.
  ::lseek(f, 0, SEEK_SET);
  previousOwner = readOwner(f);
  std::string mine =
      "process " + std::to_string(::getpid()) + " on host " + hostName() + "\n";
  if (::ftruncate(f, 0) != 0 || ::lseek(f, 0, SEEK_SET) != 0) {
    int err = errno;
    ::close(f);
    fail("cannot write the lock file '" + path + "': " + std::strerror(err));
  }
  try {
    writeAll(f, mine.data(), mine.size(), path);
  } catch (...) {
    ::close(f);
    throw;
  }
  fd = f;
}

void zrt::DirectoryLock::release() {
  if (fd < 0)
    return;
  // Emptied, not removed: another run may have opened this inode already.
  // Should emptying fail, the next owner reports a taken-over lock.
  int ignored = ::ftruncate(fd, 0);
  (void)ignored;
  ::close(fd);
  fd = -1;
}

std::string zrt::readLatest(const std::string &dir) {
  return trimEnd(readFile(dir + "/latest"));
}

void zrt::claimSaveDirectory(DirectoryLock &lock, const std::string &dir,
                             const std::string &resume, bool overwrite) {
  lock.acquire(dir);
  if (resumesFrom(resume, dir) || !hasCheckpoints(dir))
    return;
  std::string latest;
  try {
    latest = readLatest(dir);
  } catch (const std::exception &) {
  }
  std::string which = latest.empty() ? "" : " (latest: " + latest + ")";
  if (!overwrite)
    fail("'" + dir + "' holds the checkpoints of another run" + which +
         ": --resume " + dir +
         " continues that run, --overwrite replaces its checkpoints, "
         "or --save another directory");
  int removed = removeCheckpoints(dir);
  std::fprintf(stderr,
               "zrt: --overwrite: removed %d checkpoint(s) of an "
               "earlier run from '%s'%s\n",
               removed, dir.c_str(), which.c_str());
}
