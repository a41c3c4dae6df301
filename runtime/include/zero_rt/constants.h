/*===- constants.h - zero-mlir runtime: numbers the compiler plans with --===*
 *
 * Part of the zero-mlir project.
 *
 * The alignments and limits that the compiler's memory plan and the
 * runtime's allocator and swap-file I/O must agree on. The compiler includes
 * this header (as it does scratch.h and abi.def) instead of repeating them.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZERO_RT_CONSTANTS_H
#define ZERO_RT_CONSTANTS_H

/* Bytes every arena is aligned to, and so every byte offset and size the
 * memory plan gives in one (the step, persistent and host arenas). */
#define ZRT_ARENA_ALIGNMENT 64

/* O_DIRECT's logical block on common file systems: offsets and sizes in a
 * swap file, the swap buffers and the host arena that holds them are
 * multiples of it. */
#define ZRT_NVME_BLOCK_BYTES 4096

/* The most one swap-file read or write moves (io_uring's lengths are
 * 32-bit): 1 GiB, which bounds the compiler's swap chunks. */
#define ZRT_MAX_TRANSFER_BYTES (1LL << 30)

#endif /* ZERO_RT_CONSTANTS_H */
