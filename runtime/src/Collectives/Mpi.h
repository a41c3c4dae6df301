//===- Mpi.h - MPI start-up shared by the backends --------------*- C++ -*-===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_RT_MPI_H
#define ZERO_RT_MPI_H

#include <mpi.h>

namespace zrt {

/// Initializes MPI (MPI_THREAD_FUNNELED: kernels may thread, but only the
/// calling thread talks to MPI) unless a launcher or the program already
/// did; returns true when this call initialized it.
bool initializeMpi();

/// This process's rank among the processes of `comm` on its node, and how
/// many there are.
void nodeRank(MPI_Comm comm, int &localRank, int &localSize);

} // namespace zrt

#endif // ZERO_RT_MPI_H
