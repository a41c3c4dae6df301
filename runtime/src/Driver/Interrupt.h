//===- Interrupt.h - SIGINT and SIGTERM -------------------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
// A run ended by SIGINT or SIGTERM (mpirun sends SIGTERM to every rank when
// it is interrupted) says where it stood: rank 0 prints the step and the
// last checkpoint, the note the driver keeps current.
//
// SIGUSR2 asks the run to stop at the end of its step instead, with a
// checkpoint: mpirun passes SIGUSR2 on to every rank (it kills the ranks
// at once on SIGTERM), and zero-run forwards SIGINT and SIGTERM as SIGUSR2.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_INTERRUPT_H
#define ZERO_RT_INTERRUPT_H

#include <string>

namespace zrt {

/// Handles SIGINT and SIGTERM: rank 0 prints "zrt: interrupted (SIGINT) "
/// or "zrt: terminated (SIGTERM) " and its note, other ranks wait a second
/// so that rank 0's line gets out, then the process ends with the signal's
/// status.
void installInterruptHandlers();

/// Sets the note (rank 0 only: a rank without one is not rank 0).
void setInterruptNote(const std::string &text);

/// Whether SIGUSR2 asked this rank to stop at the end of its step (the
/// ranks agree on it at the step's end, so they stop at the same step).
bool stopRequested();

} // namespace zrt

#endif // ZERO_RT_INTERRUPT_H
