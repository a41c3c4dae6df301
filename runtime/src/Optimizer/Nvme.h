//===- Nvme.h - The swap file of an optimizer offloaded to NVMe -*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// ZeRO-Infinity's optimizer offload (offload_optimizer.device = nvme): each
// rank keeps its fp32 masters and Adam moments in one swap file under the
// program's nvme_path, at the byte offsets the compiler planned (4096-byte
// aligned, each state padded to 4096 bytes; the file is the plan's
// nvme_bytes long). The file is opened with O_DIRECT where the file system
// allows it (buffered I/O otherwise, e.g. ramfs) and read and written
// asynchronously through io_uring (a thread pool of pread/pwrite where
// io_uring cannot be set up). All transfers go through the plan's swap
// buffers in the pinned host arena, so the host memory stays the planned
// host_bytes.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_NVME_H
#define ZERO_RT_NVME_H

#include "zero_rt/constants.h"

#include <cstdint>
#include <memory>
#include <string>

namespace zrt {

/// Offsets, sizes and buffer addresses of swap-file I/O are multiples of
/// this (O_DIRECT's logical block on common file systems).
constexpr int64_t kSwapAlignment = ZRT_NVME_BLOCK_BYTES;
/// The most one transfer moves (io_uring's lengths are 32-bit; the
/// compiler's swap chunks are at most 1 GiB of one state).
constexpr int64_t kMaxTransfer = ZRT_MAX_TRANSFER_BYTES;

/// One asynchronous read or write of the swap file.
struct SwapIo {
  bool write = false;
  char *buffer = nullptr;
  int64_t bytes = 0, offset = 0;
  /// Set by the engine: whether it completed, and its result (bytes moved
  /// or -errno).
  bool done = false;
  int64_t result = 0;
};

class SwapEngine;
struct NvmeFaults;

class SwapFile {
public:
  /// Opens (creating or reusing) rank `rank`'s swap file of `bytes` bytes
  /// under `dir`, after checking that `dir` exists, is a writable
  /// directory and has room; throws std::runtime_error naming the path
  /// otherwise. Another run using the same file is refused (flock).
  /// `kind` names the file (zero-`kind`.rankN.swp: "optimizer" or
  /// "params", so both can share a directory) and `option` the compiler
  /// option that chose `dir`.
  static std::unique_ptr<SwapFile>
  open(const std::string &dir, int rank, int64_t bytes,
       const std::string &kind = "optimizer",
       const std::string &option = "--nvme-path");
  ~SwapFile();

  const std::string &path() const { return filePath; }
  int64_t size() const { return fileBytes; }
  bool direct() const { return directIo; }
  /// "io_uring" or "thread pool".
  const char *engineName() const;
  /// Why O_DIRECT or io_uring were not used ("" when both are).
  const std::string &notice() const { return fallbackNotice; }

  /// Starts `io` (aligned buffer, offset and size inside the file).
  void submit(SwapIo &io);
  /// Waits until `io` completes; aborts naming the file, the offset, the
  /// length, the engine and the error (ENOSPC: the disk is full) if it
  /// failed or ended short. Both engines retry a partial transfer (and
  /// EINTR, EAGAIN) for the rest; only one that moves nothing (the file
  /// ended) is short.
  void wait(SwapIo &io);

  /// Synchronous transfers of `bytes` at `offset` (a multiple of
  /// kSwapAlignment) through `bounce`, an aligned buffer of `bounceBytes`
  /// (a multiple of kSwapAlignment): partial blocks at the end are read
  /// whole, and written whole with the bytes past `bytes` zero.
  void read(int64_t offset, void *dst, int64_t bytes, char *bounce,
            int64_t bounceBytes);
  void write(int64_t offset, const void *src, int64_t bytes, char *bounce,
             int64_t bounceBytes);
  /// Writes zeros over [offset, offset + bytes) rounded up to blocks.
  void zero(int64_t offset, int64_t bytes, char *bounce, int64_t bounceBytes);
  /// Arms (or disarms) the nvmeKillStep test hook for the next write.
  void setKillOnWrite(bool on) { killOnWrite = on; }
  /// The training step now running, for ZRT_TEST_NVME_FAULT's `@S`.
  void setStep(int64_t step);

private:
  SwapFile() = default;
  std::string filePath;
  int fd = -1;
  int64_t fileBytes = 0;
  bool directIo = false;
  std::string fallbackNotice;
  bool killOnWrite = false;
  std::unique_ptr<NvmeFaults> faults;
  std::unique_ptr<SwapEngine> engine;
};

/// The test hook ZRT_TEST_NVME_KILL_AT_STEP=S: in step S the process sends
/// itself SIGKILL as soon as its first swap-file write of the step's Adam
/// has completed, while the rest of the file is still being written, to
/// test that a rank killed during an NVMe write leaves the last checkpoint
/// loadable. Unset or 0: off.
int64_t nvmeKillStep();

/// The most one asynchronous parameter-shard transfer moves: kMaxTransfer,
/// or the test hook ZRT_TEST_NVME_MAX_TRANSFER=B (a multiple of
/// kSwapAlignment up to kMaxTransfer), which splits shards into B-byte
/// transfers as a shard over 1 GiB would be split, without one. Throws
/// std::runtime_error for a malformed B (SwapFile::open asks first).
int64_t swapTransferLimit();

/// The test hook ZRT_TEST_NVME_FAULT, read by each SwapFile::open: I/O
/// faults the file systems here cannot produce, injected where the
/// kernel's answer arrives (the pread/pwrite result, the io_uring
/// completion, the open of O_DIRECT), so that the real error paths run. A
/// comma-separated list of
///   nodirect          open(O_DIRECT) fails with EINVAL (buffered I/O);
///   nouringrw         io_uring sets up but lacks IORING_OP_READ/WRITE, as
///                     before Linux 5.6 (the thread pool is used);
///   OP:N:FAULT[@S]    the N-th read or write (OP) system call or io_uring
///                     submission of the file (retries count), or of step
///                     S's with `@S`, gets FAULT: an errno name (ENOSPC,
///                     EIO, EDQUOT, EFBIG, EINTR, EAGAIN) as its result, or
///                     `short` (it moves half its bytes in whole blocks, or
///                     512 bytes of one block) or `eof` (it moves none).
/// An injected fault prints one `zrt: test hook:` line. Unset or empty:
/// off; anything else is refused by SwapFile::open, naming the entry.

} // namespace zrt

#endif // ZERO_RT_NVME_H
