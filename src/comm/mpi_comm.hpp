#pragma once
// The MPI implementation of Comm. MpiSession initializes MPI for the process (only when
// started by mpirun) and finalizes it at exit.
#include <memory>

#include "comm/comm.hpp"

namespace mt {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // The world communicator of this session.
  std::unique_ptr<Comm> world() const;
  // Ends every rank of the job at once, with this status (a failed rank must not leave others waiting).
  [[noreturn]] static void abort_job(int status);
};

// True when this process was started by mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE).
bool started_by_mpirun();

}  // namespace mt
