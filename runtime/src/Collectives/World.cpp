//===- World.cpp - The data-parallel world of both backends ---------------===//
//
// Part of the zero-mlir project.
//
// Both backends start their processes with MPI and keep one duplicate of
// MPI_COMM_WORLD; their own state (MPI reduction ops, the NCCL communicator)
// is set up and torn down around it by startBackend/stopBackend.
//
//===----------------------------------------------------------------------===//

#include "Collectives/Collectives.h"
#include "Collectives/Groups.h"
#include "Collectives/Mpi.h"
#include "Support/Support.h"

#include <mutex>

using namespace zrt;

namespace {

struct World {
  std::mutex mutex;
  zrt_comm *comm = nullptr;
  bool ownsMpi = false;
};

World &world() {
  static World w;
  return w;
}

} // namespace

extern "C" zrt_comm *zrt_comm_world(void) {
  World &w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (w.comm)
    return w.comm;
  w.ownsMpi = initializeMpi();
  auto *comm = new zrt_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm->comm);
  MPI_Comm_rank(comm->comm, &comm->rank);
  MPI_Comm_size(comm->comm, &comm->size);
  startBackend(comm);
  w.comm = comm;
  return comm;
}

extern "C" int32_t zrt_comm_rank(const zrt_comm *comm) { return comm->rank; }
extern "C" int32_t zrt_comm_size(const zrt_comm *comm) { return comm->size; }

extern "C" void zrt_comm_barrier(zrt_comm *comm) { MPI_Barrier(comm->comm); }

extern "C" void zrt_finalize(void) {
  World &w = world();
  if (!w.comm)
    return;
  zrt_wait_all();
  std::lock_guard<std::mutex> lock(w.mutex);
  freeGroups();
  stopBackend(w.comm);
  MPI_Comm_free(&w.comm->comm);
  delete w.comm;
  w.comm = nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (w.ownsMpi && !finalized)
    MPI_Finalize();
  w.ownsMpi = false;
}

void zrt::checkPerRank(const zrt_comm *comm, const std::vector<int> &counts,
                       const std::vector<int> &displs, const char *call) {
  if (int(counts.size()) != comm->size || int(displs.size()) != comm->size)
    fatal("%s: %zu counts for %d ranks", call, counts.size(), comm->size);
}

void zrt::checkRoot(const zrt_comm *comm, int32_t root, const char *call) {
  if (root < 0 || root >= comm->size)
    fatal("%s: root %d outside a world of %d", call, int(root), comm->size);
}
