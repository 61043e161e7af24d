/* libringcc_mpi_*: ringcc's MPI calls behind a small C ABI (core/os/mpi_plugin_api.h).
 * Compiled once per MPI ABI, never linked to a libmpi: the core loads the
 * libmpi it finds first, and this plugin's MPI symbols resolve against it.
 * The build names the ABI (RCMPI_ABI_OPENMPI, RCMPI_ABI_MPICH or
 * RCMPI_ABI_STANDARD) and the plugin compiles against ringcc's own
 * declarations of it (mpi_api.h); without one it compiles against the mpi.h
 * on the include path, as a plugin built by hand for an MPI of another ABI
 * does (MPI_ABI defined there: MPI 5's standard ABI). */
#include "core/os/mpi_plugin_api.h"

#include <limits.h>
#if defined(RCMPI_ABI_OPENMPI) || defined(RCMPI_ABI_MPICH) || defined(RCMPI_ABI_STANDARD)
#include "mpi_api.h"
#else
#include <mpi.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rcmpi_comm {
  MPI_Comm comm;
};

struct rcmpi_msg {
  MPI_Message msg;
};

struct rcmpi_req {
  MPI_Request req;
  int is_recv;
};

/* ringcc's DataType codes (core/collective/dtype.h). */
enum { DT_F16 = 0, DT_BF16 = 1, DT_F32 = 2, DT_F64 = 3, DT_I8 = 4, DT_U8 = 5, DT_I32 = 6, DT_I64 = 7 };
/* ringcc's ReduceOp codes (core/collective/reduce_op.h); Average arrives as Sum. */
enum { OP_SUM = 0, OP_AVG = 1, OP_MIN = 2, OP_MAX = 3, OP_PROD = 4 };

static int map_dtype(int dtype, MPI_Datatype* out, int* size) {
  switch (dtype) {
    case DT_F32: *out = MPI_FLOAT; *size = 4; return 0;
    case DT_F64: *out = MPI_DOUBLE; *size = 8; return 0;
    case DT_I8: *out = MPI_INT8_T; *size = 1; return 0;
    case DT_U8: *out = MPI_UINT8_T; *size = 1; return 0;
    case DT_I32: *out = MPI_INT32_T; *size = 4; return 0;
    case DT_I64: *out = MPI_INT64_T; *size = 8; return 0;
    default: return RCMPI_ERR_UNSUPPORTED; /* float16, bfloat16: no MPI type */
  }
}

static int map_op(int op, MPI_Op* out) {
  switch (op) {
    case OP_SUM:
    case OP_AVG: *out = MPI_SUM; return 0;
    case OP_MIN: *out = MPI_MIN; return 0;
    case OP_MAX: *out = MPI_MAX; return 0;
    case OP_PROD: *out = MPI_PROD; return 0;
    default: return RCMPI_ERR_UNSUPPORTED;
  }
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static void nap(int* round) {
  /* 20 us at first, doubling up to 1 ms: a bounded wait that does not spin. */
  long us = 20L << (*round < 6 ? *round : 6);
  if (us > 1000) us = 1000;
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
  ++*round;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int wait_bounded(MPI_Request* req, int timeout_ms) {
  const double end = now_ms() + timeout_ms;
  int round = 0;
  for (;;) {
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (flag) return 0;
    if (now_ms() > end) return RCMPI_ERR_TIMEOUT;
    nap(&round);
  }
}

int rcmpi_abi_version(void) { return RCMPI_ABI_VERSION; }

const char* rcmpi_mpi_abi(void) {
#if defined(MPI_ABI_VERSION)
  return "mpiabi";
#elif defined(OPEN_MPI)
  return "openmpi";
#elif defined(MPICH)
  return "mpich";
#else
#error "mpi.h is neither Open MPI's, MPICH's nor the standard ABI's"
#endif
}

const char* rcmpi_library_version(void) {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown MPI";
  text[len < (int)sizeof(text) ? len : (int)sizeof(text) - 1] = 0;
  char* nl = strchr(text, '\n');
  if (nl) *nl = 0;
  char* comma = strchr(text, ',');
  if (comma) *comma = 0;
  return text;
}

void rcmpi_error_string(int code, char* buf, int len) {
  if (len <= 0) return;
  switch (code) {
    case RCMPI_ERR_UNSUPPORTED: snprintf(buf, (size_t)len, "no MPI equivalent for this type or reduction"); return;
    case RCMPI_ERR_TOO_LARGE: snprintf(buf, (size_t)len, "a count does not fit MPI's int"); return;
    case RCMPI_ERR_BAD_ARGUMENT: snprintf(buf, (size_t)len, "bad argument"); return;
    case RCMPI_ERR_TIMEOUT: snprintf(buf, (size_t)len, "timed out"); return;
    default: break;
  }
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, text, &n) != MPI_SUCCESS) {
    snprintf(buf, (size_t)len, "MPI error %d", code);
    return;
  }
  text[n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1] = 0;
  snprintf(buf, (size_t)len, "%s", text);
}

static int to_mpi_level(int level) {
  switch (level) {
    case RCMPI_THREAD_SINGLE: return MPI_THREAD_SINGLE;
    case RCMPI_THREAD_FUNNELED: return MPI_THREAD_FUNNELED;
    case RCMPI_THREAD_SERIALIZED: return MPI_THREAD_SERIALIZED;
    default: return MPI_THREAD_MULTIPLE;
  }
}

static int from_mpi_level(int level) {
  if (level == MPI_THREAD_MULTIPLE) return RCMPI_THREAD_MULTIPLE;
  if (level == MPI_THREAD_SERIALIZED) return RCMPI_THREAD_SERIALIZED;
  if (level == MPI_THREAD_FUNNELED) return RCMPI_THREAD_FUNNELED;
  return RCMPI_THREAD_SINGLE;
}

int rcmpi_init(int required, int* provided, int* initialized_here) {
  int inited = 0, finalized = 0, rc;
  *initialized_here = 0;
  if ((rc = MPI_Finalized(&finalized)) != MPI_SUCCESS) return rc;
  if (finalized) return MPI_ERR_OTHER;
  if ((rc = MPI_Initialized(&inited)) != MPI_SUCCESS) return rc;
  int level = MPI_THREAD_SINGLE;
  if (!inited) {
    rc = MPI_Init_thread(NULL, NULL, to_mpi_level(required), &level);
    if (rc != MPI_SUCCESS) return rc;
    *initialized_here = 1;
    /* Errors come back as codes, not as an abort of the job. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else if ((rc = MPI_Query_thread(&level)) != MPI_SUCCESS) {
    return rc;
  }
  *provided = from_mpi_level(level);
  return 0;
}

int rcmpi_initialized(int* flag) { return MPI_Initialized(flag); }
int rcmpi_finalized(int* flag) { return MPI_Finalized(flag); }
int rcmpi_finalize(void) { return MPI_Finalize(); }

static int dup_of(MPI_Comm src, rcmpi_comm** out, int timeout_ms) {
  rcmpi_comm* c = (rcmpi_comm*)calloc(1, sizeof(*c));
  if (!c) return MPI_ERR_NO_MEM;
  MPI_Request req;
  int rc = MPI_Comm_idup(src, &c->comm, &req);
  if (rc == MPI_SUCCESS) rc = wait_bounded(&req, timeout_ms);
  if (rc != 0) {
    free(c);
    return rc;
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  *out = c;
  return 0;
}

int rcmpi_comm_dup_world(rcmpi_comm** out, int timeout_ms) { return dup_of(MPI_COMM_WORLD, out, timeout_ms); }

int rcmpi_comm_dup_handle(int64_t fortran_handle, rcmpi_comm** out, int timeout_ms) {
  if (fortran_handle < INT_MIN || fortran_handle > INT_MAX) return RCMPI_ERR_BAD_ARGUMENT;
#if defined(MPI_ABI_VERSION)
  MPI_Comm comm = MPI_Comm_fromint((int)fortran_handle);
#else
  MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)fortran_handle);
#endif
  if (comm == MPI_COMM_NULL) return RCMPI_ERR_BAD_ARGUMENT;
  return dup_of(comm, out, timeout_ms);
}

int rcmpi_comm_dup(rcmpi_comm* comm, rcmpi_comm** out, int timeout_ms) { return dup_of(comm->comm, out, timeout_ms); }

int rcmpi_comm_free(rcmpi_comm* comm) {
  if (!comm) return 0;
  int rc = MPI_Comm_free(&comm->comm);
  free(comm);
  return rc;
}

int rcmpi_comm_rank(rcmpi_comm* comm, int* rank) { return MPI_Comm_rank(comm->comm, rank); }
int rcmpi_comm_size(rcmpi_comm* comm, int* size) { return MPI_Comm_size(comm->comm, size); }

int rcmpi_comm_node(rcmpi_comm* comm, int* local_rank, int* local_size) {
  MPI_Comm node;
  int rank = 0;
  MPI_Comm_rank(comm->comm, &rank);
  int rc = MPI_Comm_split_type(comm->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Comm_rank(node, local_rank);
  MPI_Comm_size(node, local_size);
  return MPI_Comm_free(&node);
}

static int post(rcmpi_comm* comm, void* buf, int64_t bytes, int peer, int tag, int is_recv, rcmpi_req** out) {
  if (!fits_int(bytes)) return RCMPI_ERR_TOO_LARGE;
  rcmpi_req* r = (rcmpi_req*)malloc(sizeof(*r));
  if (!r) return MPI_ERR_NO_MEM;
  r->is_recv = is_recv;
  int rc = is_recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, comm->comm, &r->req)
                   : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, comm->comm, &r->req);
  if (rc != MPI_SUCCESS) {
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int rcmpi_isend(rcmpi_comm* comm, const void* buf, int64_t bytes, int peer, int tag, rcmpi_req** req) {
  return post(comm, (void*)buf, bytes, peer, tag, 0, req);
}

int rcmpi_irecv(rcmpi_comm* comm, void* buf, int64_t bytes, int peer, int tag, rcmpi_req** req) {
  return post(comm, buf, bytes, peer, tag, 1, req);
}

int rcmpi_ibcast(rcmpi_comm* comm, void* buf, int64_t bytes, int root, rcmpi_req** req) {
  if (!fits_int(bytes)) return RCMPI_ERR_TOO_LARGE;
  rcmpi_req* r = (rcmpi_req*)malloc(sizeof(*r));
  if (!r) return MPI_ERR_NO_MEM;
  r->is_recv = 0;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, comm->comm, &r->req);
  if (rc != MPI_SUCCESS) {
    free(r);
    return rc;
  }
  *req = r;
  return 0;
}

int rcmpi_test(rcmpi_req* req, int* done, int64_t* bytes) {
  MPI_Status status;
  int flag = 0;
  int rc = MPI_Test(&req->req, &flag, &status);
  if (rc != MPI_SUCCESS) return rc;
  *done = flag;
  if (flag) {
    if (bytes) {
      int n = 0;
      if (req->is_recv) MPI_Get_count(&status, MPI_BYTE, &n);
      *bytes = n;
    }
    free(req);
  }
  return 0;
}

int rcmpi_improbe(rcmpi_comm* comm, int peer, int tag, int* found, int64_t* bytes, rcmpi_msg** msg) {
  MPI_Message m;
  MPI_Status status;
  int flag = 0;
  *found = 0;
  int rc = MPI_Improbe(peer, tag, comm->comm, &flag, &m, &status);
  if (rc != MPI_SUCCESS || !flag) return rc;
  int n = 0;
  MPI_Get_count(&status, MPI_BYTE, &n);
  rcmpi_msg* out = (rcmpi_msg*)malloc(sizeof(*out));
  if (!out) return MPI_ERR_NO_MEM;
  out->msg = m;
  *msg = out;
  *bytes = n;
  *found = 1;
  return 0;
}

int rcmpi_imrecv(rcmpi_msg* msg, void* buf, int64_t bytes, rcmpi_req** req) {
  if (!fits_int(bytes)) return RCMPI_ERR_TOO_LARGE;
  rcmpi_req* r = (rcmpi_req*)malloc(sizeof(*r));
  if (!r) return MPI_ERR_NO_MEM;
  r->is_recv = 1;
  int rc = MPI_Imrecv(buf, (int)bytes, MPI_BYTE, &msg->msg, &r->req);
  free(msg);
  if (rc != MPI_SUCCESS) {
    free(r);
    return rc;
  }
  *req = r;
  return 0;
}

int rcmpi_cancel(rcmpi_req* req) {
  if (!req) return 0;
  if (req->is_recv) {
    MPI_Cancel(&req->req);
  }
  int rc = MPI_Request_free(&req->req);
  free(req);
  return rc;
}

int rcmpi_take_tagged(rcmpi_comm* comm, int tag, void* buf, int cap, int* source, int* bytes) {
  int flag = 0;
  MPI_Status status;
  *source = -1;
  int rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, comm->comm, &flag, &status);
  if (rc != MPI_SUCCESS || !flag) return rc;
  int n = 0;
  MPI_Get_count(&status, MPI_BYTE, &n);
  if (n > cap) n = cap;
  rc = MPI_Recv(buf, cap, MPI_BYTE, status.MPI_SOURCE, tag, comm->comm, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return rc;
  *source = status.MPI_SOURCE;
  *bytes = n;
  return 0;
}

/* Reductions MPI may run for ringcc. Not 8-bit integers: ringcc's sums and
 * products wrap around modulo 256, while Open MPI 5's vectorised MPI_SUM on
 * MPI_INT8_T/MPI_UINT8_T saturates (127 + 1 = 127). */
static int reducible(int dtype, int op, MPI_Datatype* t, MPI_Op* o) {
  int size, rc;
  if (dtype == DT_I8 || dtype == DT_U8) return RCMPI_ERR_UNSUPPORTED;
  if ((rc = map_dtype(dtype, t, &size)) || (rc = map_op(op, o))) return rc;
  return 0;
}

int rcmpi_supports(int dtype, int op) {
  MPI_Datatype t;
  MPI_Op o;
  return reducible(dtype, op, &t, &o) == 0;
}

int rcmpi_allreduce(rcmpi_comm* comm, const void* in, void* out, int64_t count, int dtype, int op) {
  MPI_Datatype t;
  MPI_Op o;
  int rc;
  if ((rc = reducible(dtype, op, &t, &o))) return rc;
  if (!fits_int(count)) return RCMPI_ERR_TOO_LARGE;
  return MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, t, o, comm->comm);
}

int rcmpi_reduce_scatter(rcmpi_comm* comm, const void* in, void* out, const int64_t* counts,
                         int dtype, int op) {
  MPI_Datatype t;
  MPI_Op o;
  int rc, n;
  if ((rc = reducible(dtype, op, &t, &o))) return rc;
  MPI_Comm_size(comm->comm, &n);
  int* c = (int*)malloc(sizeof(int) * (size_t)n);
  if (!c) return MPI_ERR_NO_MEM;
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    total += counts[i];
    if (!fits_int(counts[i]) || !fits_int(total)) {
      free(c);
      return RCMPI_ERR_TOO_LARGE;
    }
    c[i] = (int)counts[i];
  }
  rc = MPI_Reduce_scatter(in, out, c, t, o, comm->comm);
  free(c);
  return rc;
}

static int to_ints(int n, const int64_t* a, const int64_t* b, int** ia, int** ib) {
  *ia = (int*)malloc(sizeof(int) * (size_t)n);
  *ib = (int*)malloc(sizeof(int) * (size_t)n);
  if (!*ia || !*ib) {
    free(*ia);
    free(*ib);
    return MPI_ERR_NO_MEM;
  }
  for (int i = 0; i < n; ++i) {
    if (!fits_int(a[i]) || !fits_int(b[i]) || !fits_int(a[i] + b[i])) {
      free(*ia);
      free(*ib);
      return RCMPI_ERR_TOO_LARGE;
    }
    (*ia)[i] = (int)a[i];
    (*ib)[i] = (int)b[i];
  }
  return 0;
}

int rcmpi_allgatherv(rcmpi_comm* comm, const void* in, int64_t in_bytes, void* out,
                     const int64_t* counts, const int64_t* displs) {
  int n, rc;
  int *c, *d;
  if (!fits_int(in_bytes)) return RCMPI_ERR_TOO_LARGE;
  MPI_Comm_size(comm->comm, &n);
  if ((rc = to_ints(n, counts, displs, &c, &d))) return rc;
  rc = MPI_Allgatherv(in, (int)in_bytes, MPI_BYTE, out, c, d, MPI_BYTE, comm->comm);
  free(c);
  free(d);
  return rc;
}

int rcmpi_bcast(rcmpi_comm* comm, void* buf, int64_t bytes, int root) {
  if (!fits_int(bytes)) return RCMPI_ERR_TOO_LARGE;
  return MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm->comm);
}

int rcmpi_alltoallv(rcmpi_comm* comm, const void* in, const int64_t* send_counts,
                    const int64_t* send_displs, void* out, const int64_t* recv_counts,
                    const int64_t* recv_displs) {
  int n, rc;
  int *sc, *sd, *rcn, *rd;
  MPI_Comm_size(comm->comm, &n);
  if ((rc = to_ints(n, send_counts, send_displs, &sc, &sd))) return rc;
  if ((rc = to_ints(n, recv_counts, recv_displs, &rcn, &rd))) {
    free(sc);
    free(sd);
    return rc;
  }
  rc = MPI_Alltoallv(in, sc, sd, MPI_BYTE, out, rcn, rd, MPI_BYTE, comm->comm);
  free(sc);
  free(sd);
  free(rcn);
  free(rd);
  return rc;
}

int rcmpi_barrier(rcmpi_comm* comm) { return MPI_Barrier(comm->comm); }

int rcmpi_abort(rcmpi_comm* comm, int code) { return MPI_Abort(comm ? comm->comm : MPI_COMM_WORLD, code); }
