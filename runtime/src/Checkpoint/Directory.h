//===- Directory.h - A run's save directory ---------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// The directory a run saves its checkpoints into (--save): its step_N
// directories, the `latest` file that names the newest complete one, and
// the lock that keeps a second run out.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_CHECKPOINT_DIRECTORY_H
#define ZERO_RT_CHECKPOINT_DIRECTORY_H

#include <string>

namespace zrt {

/// An exclusive lock on a save directory, held while the process lives: a
/// file `lock` in it holds the owner's host and pid, under flock(2), which
/// the kernel releases when the process ends however it ends. A second run
/// saving there is refused naming the owner; a lock file whose owner is gone
/// is taken over (`takenOver` then names the earlier owner). Released (the
/// file emptied) by the destructor.
class DirectoryLock {
public:
  DirectoryLock() = default;
  DirectoryLock(const DirectoryLock &) = delete;
  DirectoryLock &operator=(const DirectoryLock &) = delete;
  ~DirectoryLock() { release(); }
  /// Takes the lock of `dir` or throws naming its holder.
  void acquire(const std::string &dir);
  void release();
  /// "process P on host H" when a stale lock was taken over, else empty.
  const std::string &takenOver() const { return previousOwner; }

private:
  int fd = -1;
  std::string previousOwner;
};

/// Rank 0's claim on the save directory `dir`, before any work: takes `lock`
/// and, unless `resume` (--resume) continues the run that saves there (it is
/// that directory or one of its step directories), refuses the checkpoints
/// of another run in it, or with `overwrite` removes them and says so on
/// stderr. A new run saving over another run's checkpoints would overwrite
/// some and move `latest` back, so that a later --resume continues the
/// wrong run.
void claimSaveDirectory(DirectoryLock &lock, const std::string &dir,
                        const std::string &resume, bool overwrite);

/// The step directory DIR/latest names, without its line end (throws when it
/// cannot be read).
std::string readLatest(const std::string &dir);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_DIRECTORY_H
