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

#include <cstdint>
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

/// The checkpoints of an earlier run that a new run saving into the same
/// directory replaces (--overwrite). Nothing of them is touched until this
/// run's first checkpoint is complete: it is written beside them, under a
/// name that is no step directory (stagingDirectory), and `latest` then names
/// it (the one atomic switch from their set to this run's); only then are
/// they removed (finishReplacing). At every moment `latest` names a
/// complete checkpoint, theirs or this run's, and a run that fails before
/// its first checkpoint leaves every file of theirs as it was.
struct Replaced {
  /// Whether there is an earlier run to replace.
  bool pending = false;
  /// The step directory their `latest` named (empty: none could be read).
  std::string latest;
  /// Which of two staging names this run uses: not the one their `latest`
  /// names (left by a replacing run that ended between the switch and the
  /// removal).
  int staging = 0;
};

/// Rank 0's claim on the save directory `dir`, before any work: takes `lock`
/// and, unless `resume` (--resume) continues the run that saves there (it is
/// that directory or one of its step directories), refuses the checkpoints
/// of another run in it, or with `overwrite` returns them as pending, to be
/// replaced by this run's first checkpoint (they stay untouched until
/// then). A new run saving over another run's checkpoints would overwrite
/// some and move `latest` back, so that a later --resume continues the
/// wrong run.
Replaced claimSaveDirectory(DirectoryLock &lock, const std::string &dir,
                            const std::string &resume, bool overwrite);

/// The directory that the first checkpoint (of step `step`) of a run
/// replacing an earlier run's is written into: DIR/step_N.new (`staging`
/// 0) or DIR/step_N.new2 (1).
std::string stagingDirectory(const std::string &dir, int64_t step, int staging);
/// Rank 0, before any rank writes into the staging directory `staged`:
/// removes what a replacing run that crashed left there.
void clearStagingDirectory(const std::string &staged);

/// Rank 0, once the staging directory `staged` holds a complete checkpoint
/// of step `step` and DIR/latest names it: removes the earlier run's step
/// directories (and what crashed replacing runs left), gives the checkpoint
/// its name DIR/step_N (its files hard-linked, or copied where the file
/// system has no hard links), points `latest` at that and removes
/// `staged`; says on stderr what it replaced.
void finishReplacing(const std::string &dir, const std::string &staged,
                     int64_t step, const Replaced &replaced);

/// The step directory DIR/latest names, without its line end (throws when it
/// cannot be read).
std::string readLatest(const std::string &dir);

} // namespace zrt

#endif // ZERO_RT_CHECKPOINT_DIRECTORY_H
