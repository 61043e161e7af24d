/* The C ABI of libringcc_mpi_*, the plugins that hold every MPI call of ringcc.
 *
 * One plugin is compiled per MPI ABI (libringcc_mpi_openmpi.so,
 * libringcc_mpi_mpich.so, libringcc_mpi_abi.so) against that ABI's headers
 * only: no plugin is linked to an MPI library. At run time the core finds a
 * libmpi, loads it, tells which ABI it speaks and loads the matching plugin,
 * whose MPI symbols then resolve against that libmpi (core/os/mpi_library.cc).
 * So `import ringcc` works where MPI is absent, and an MPI installed after
 * ringcc is used without rebuilding it. Communicators and requests cross the ABI as opaque
 * pointers (MPI_Comm and MPI_Request are ints in MPICH, pointers in Open
 * MPI). Every function returns 0 on success or an MPI error code, whose text
 * rcmpi_error_string() gives. Sizes are 64-bit; a count that does not fit
 * MPI's int is refused with RCMPI_ERR_TOO_LARGE (the core splits messages
 * and uses its own algorithms for such collectives).
 *
 * Data types and reductions use ringcc's codes (core/collective/dtype.h and
 * core/collective/reduce_op.h); types MPI has no equivalent for (float16, bfloat16)
 * are refused with RCMPI_ERR_UNSUPPORTED.
 *
 * This header is the contract between the two sides: it lives with the core,
 * which includes it, and plugins/mpi/ringcc_mpi.c implements it.
 */
#ifndef RINGCC_CORE_OS_MPI_PLUGIN_API_H_
#define RINGCC_CORE_OS_MPI_PLUGIN_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RCMPI_ABI_VERSION 2

#define RCMPI_ERR_UNSUPPORTED (-1)
#define RCMPI_ERR_TOO_LARGE (-2)
#define RCMPI_ERR_BAD_ARGUMENT (-3)

/* Thread levels, as MPI numbers them in the standard's order. */
#define RCMPI_THREAD_SINGLE 0
#define RCMPI_THREAD_FUNNELED 1
#define RCMPI_THREAD_SERIALIZED 2
#define RCMPI_THREAD_MULTIPLE 3

typedef struct rcmpi_comm rcmpi_comm; /* wraps an MPI_Comm */
typedef struct rcmpi_req rcmpi_req;   /* wraps an MPI_Request */
typedef struct rcmpi_msg rcmpi_msg;   /* wraps an MPI_Message (a matched probe) */

int rcmpi_abi_version(void);
/* The MPI ABI this plugin was compiled for: "openmpi", "mpich" or "mpiabi"
 * (MPI 5's standard ABI). */
const char* rcmpi_mpi_abi(void);
/* MPI's own name and version (MPI_Get_library_version, first line). */
const char* rcmpi_library_version(void);
void rcmpi_error_string(int code, char* buf, int len);

/* Initialises MPI unless it already is, asking for `required` (an RCMPI_THREAD_*
 * level). *provided: the level in effect; *initialized_here: 1 when this call
 * initialised MPI. Fails when MPI was already finalised. */
int rcmpi_init(int required, int* provided, int* initialized_here);
int rcmpi_initialized(int* flag);
int rcmpi_finalized(int* flag);
int rcmpi_finalize(void);

/* A duplicate of MPI_COMM_WORLD, or of the communicator whose Fortran handle
 * (MPI_Comm_c2f; mpi4py's comm.py2f(); MPI_Comm_toint under the standard
 * ABI, which has no Fortran handles of fixed size) is `fortran_handle`. Collective over
 * the communicator: every rank calls it. Waits at most timeout_ms (MPI_Comm_idup
 * polled with MPI_Test); on timeout returns RCMPI_ERR_TIMEOUT. */
#define RCMPI_ERR_TIMEOUT (-4)
int rcmpi_comm_dup_world(rcmpi_comm** out, int timeout_ms);
int rcmpi_comm_dup_handle(int64_t fortran_handle, rcmpi_comm** out, int timeout_ms);
int rcmpi_comm_dup(rcmpi_comm* comm, rcmpi_comm** out, int timeout_ms);
int rcmpi_comm_free(rcmpi_comm* comm);
int rcmpi_comm_rank(rcmpi_comm* comm, int* rank);
int rcmpi_comm_size(rcmpi_comm* comm, int* size);
/* Ranks of `comm` on this rank's node (MPI_COMM_TYPE_SHARED), and this rank's
 * place among them. */
int rcmpi_comm_node(rcmpi_comm* comm, int* local_rank, int* local_size);

/* Non-blocking point-to-point on bytes. A receive may be larger than the
 * message; rcmpi_test reports the bytes that arrived. */
int rcmpi_isend(rcmpi_comm* comm, const void* buf, int64_t bytes, int peer, int tag, rcmpi_req** req);
int rcmpi_irecv(rcmpi_comm* comm, void* buf, int64_t bytes, int peer, int tag, rcmpi_req** req);
int rcmpi_ibcast(rcmpi_comm* comm, void* buf, int64_t bytes, int root, rcmpi_req** req);
/* Tests once. When complete, *done = 1, *bytes = the bytes received (receives)
 * and the request is freed. */
int rcmpi_test(rcmpi_req* req, int* done, int64_t* bytes);
/* Matched probe for the next message from peer with tag: when there is one,
 * *found = 1, *bytes = its size and *msg the message, to be received with
 * rcmpi_imrecv (bytes exactly). Keeps the order of messages from one peer. */
int rcmpi_improbe(rcmpi_comm* comm, int peer, int tag, int* found, int64_t* bytes, rcmpi_msg** msg);
int rcmpi_imrecv(rcmpi_msg* msg, void* buf, int64_t bytes, rcmpi_req** req);
/* Cancels (receives) or abandons (sends) a request and frees it. */
int rcmpi_cancel(rcmpi_req* req);
/* Polls for a message with `tag` from anyone; when one is there, receives it
 * into buf (up to cap bytes) and sets *source (else *source = -1). */
int rcmpi_take_tagged(rcmpi_comm* comm, int tag, void* buf, int cap, int* source, int* bytes);

/* MPI's own (blocking) collectives. count in elements of dtype; in may equal
 * out (MPI_IN_PLACE is used then). */
int rcmpi_supports(int dtype, int op); /* 1 when allreduce can reduce it */
int rcmpi_allreduce(rcmpi_comm* comm, const void* in, void* out, int64_t count, int dtype, int op);
int rcmpi_reduce_scatter(rcmpi_comm* comm, const void* in, void* out, const int64_t* counts, int dtype, int op);
/* Byte-wise: counts[i] and displs[i] in bytes, per rank. */
int rcmpi_allgatherv(rcmpi_comm* comm, const void* in, int64_t in_bytes, void* out, const int64_t* counts,
                     const int64_t* displs);
int rcmpi_bcast(rcmpi_comm* comm, void* buf, int64_t bytes, int root);
int rcmpi_alltoallv(rcmpi_comm* comm, const void* in, const int64_t* send_counts, const int64_t* send_displs, void* out,
                    const int64_t* recv_counts, const int64_t* recv_displs);
int rcmpi_barrier(rcmpi_comm* comm);

/* MPI_Abort: ends every process of the job. */
int rcmpi_abort(rcmpi_comm* comm, int code);

#ifdef __cplusplus
}
#endif

#endif /* RINGCC_CORE_OS_MPI_PLUGIN_API_H_ */
