//===- Mpi.cpp - MPI start-up shared by the backends ----------------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Mpi.h"

bool zrt::initializeMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return false;
  int provided;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  return true;
}

void zrt::nodeRank(MPI_Comm comm, int &localRank, int &localSize) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localSize);
  MPI_Comm_free(&node);
}
