//===- Directory.cpp - A run's save directory -----------------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint/Directory.h"
#include "Checkpoint/Format.h"
#include "Data/Files.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
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

/// The suffixes of the two staging names (step_N.new, step_N.new2).
const char *const kStagingSuffix[2] = {".new", ".new2"};

bool endsWith(const std::string &name, const std::string &suffix) {
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Whether `name` is a staging directory's name (step_N.new or step_N.new2).
bool isStagingName(const std::string &name) {
  for (const std::string suffix : kStagingSuffix)
    if (endsWith(name, suffix) &&
        isStepName(name.substr(0, name.size() - suffix.size()).c_str()))
      return true;
  return false;
}

/// The names in `dir` that `keep` accepts, "." and ".." left out.
std::vector<std::string>
entriesOf(const std::string &dir,
          const std::function<bool(const std::string &)> &keep) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    fail("cannot read the directory '" + dir + "': " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0 &&
        keep(e->d_name))
      names.push_back(e->d_name);
  ::closedir(d);
  return names;
}

/// Removes the checkpoint directory `path` with the files it holds (a step
/// directory holds files only: manifest, rank files, temporaries); one that
/// does not exist is none to remove.
void removeCheckpointDir(const std::string &path) {
  if (!isDirectory(path))
    return;
  for (const std::string &f :
       entriesOf(path, [](const std::string &) { return true; }))
    if (::unlink((path + "/" + f).c_str()) != 0)
      fail("cannot remove '" + path + "/" + f + "': " + std::strerror(errno));
  if (::rmdir(path.c_str()) != 0)
    fail("cannot remove '" + path + "': " + std::strerror(errno));
}

/// fsync of the directory `dir`, which makes the links and renames in it
/// durable.
void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// The file `from` as `to` too: a hard link, or a copy (written atomically)
/// where the file system has none.
void linkOrCopy(const std::string &from, const std::string &to) {
  if (::link(from.c_str(), to.c_str()) == 0)
    return;
  if (errno != EPERM && errno != EXDEV && errno != EOPNOTSUPP &&
      errno != EMLINK)
    fail("cannot link '" + from + "' as '" + to + "': " + std::strerror(errno));
  writeFileAtomic(to, readFile(from));
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

Replaced zrt::claimSaveDirectory(DirectoryLock &lock, const std::string &dir,
                                 const std::string &resume, bool overwrite) {
  lock.acquire(dir);
  Replaced replaced;
  if (resumesFrom(resume, dir) || !hasCheckpoints(dir))
    return replaced;
  try {
    replaced.latest = readLatest(dir);
  } catch (const std::exception &) {
  }
  if (!overwrite)
    fail("'" + dir + "' holds the checkpoints of another run" +
         (replaced.latest.empty() ? "" : " (latest: " + replaced.latest + ")") +
         ": --resume " + dir +
         " continues that run, --overwrite replaces its checkpoints, "
         "or --save another directory");
  replaced.pending = true;
  replaced.staging = isStagingName(replaced.latest) &&
                     endsWith(replaced.latest, kStagingSuffix[0]);
  return replaced;
}

std::string zrt::stagingDirectory(const std::string &dir, int64_t step,
                                  int staging) {
  return checkpointDir(dir, step) + kStagingSuffix[staging];
}

void zrt::clearStagingDirectory(const std::string &staged) {
  removeCheckpointDir(staged);
}

void zrt::finishReplacing(const std::string &dir, const std::string &staged,
                          int64_t step, const Replaced &replaced) {
  std::string stagedName = staged.substr(staged.find_last_of('/') + 1);
  // `latest` names `staged`: the earlier run's directories are no longer
  // what a --resume of DIR loads.
  std::vector<std::string> earlier =
      entriesOf(dir, [&](const std::string &name) {
        return name != stagedName &&
               (isStepName(name.c_str()) || isStagingName(name)) &&
               isDirectory(dir + "/" + name);
      });
  int steps = 0;
  for (const std::string &name : earlier) {
    removeCheckpointDir(dir + "/" + name);
    steps += isStepName(name.c_str());
  }
  std::string named = checkpointDir(dir, step);
  makeDirs(named);
  // The manifest last: a directory without it is no checkpoint.
  std::vector<std::string> files = entriesOf(
      staged, [](const std::string &name) { return name != "manifest.json"; });
  files.push_back("manifest.json");
  for (const std::string &f : files)
    linkOrCopy(staged + "/" + f, named + "/" + f);
  syncDirectory(named);
  std::string name = named.substr(named.find_last_of('/') + 1);
  writeFileAtomic(dir + "/latest", name + "\n");
  removeCheckpointDir(staged);
  syncDirectory(dir);
  std::fprintf(stderr,
               "zrt: --overwrite: replaced %d checkpoint(s) of an earlier "
               "run in '%s'%s with this run's first, %s\n",
               steps, dir.c_str(),
               replaced.latest.empty()
                   ? ""
                   : (" (latest: " + replaced.latest + ")").c_str(),
               name.c_str());
}
