/* MPI 5's standard ABI (libmpi_abi.so) of what the plugins use (lists
 * described in mpi_api.h). Handles are pointers to incomplete structs, and
 * predefined handles the small fixed values the standard assigns them. It
 * has no Fortran handle of fixed size: a communicator crosses languages as
 * an int (MPI_Comm_fromint). */
#ifndef RINGCC_PLUGINS_MPI_MPI_API_STANDARD_H_
#define RINGCC_PLUGINS_MPI_MPI_API_STANDARD_H_

#define RCMPI_MPI_TYPES(X)                      \
  X(MPI_Comm, struct MPI_ABI_Comm*)             \
  X(MPI_Datatype, struct MPI_ABI_Datatype*)     \
  X(MPI_Errhandler, struct MPI_ABI_Errhandler*) \
  X(MPI_Info, struct MPI_ABI_Info*)             \
  X(MPI_Op, struct MPI_ABI_Op*)                 \
  X(MPI_Request, struct MPI_ABI_Request*)       \
  X(MPI_Message, struct MPI_ABI_Message*)

/* MPI_internal: the implementation's own, written by MPI, read by nobody. */
#define RCMPI_MPI_STATUS_FIELDS(X) \
  X(int, MPI_SOURCE, )             \
  X(int, MPI_TAG, )                \
  X(int, MPI_ERROR, )              \
  X(int, MPI_internal, [5])

#define RCMPI_MPI_INTEGERS(X)    \
  X(MPI_SUCCESS, 0)              \
  X(MPI_ERR_OTHER, 16)           \
  X(MPI_ERR_NO_MEM, 39)          \
  X(MPI_ANY_SOURCE, -1)          \
  X(MPI_COMM_TYPE_SHARED, 221)   \
  X(MPI_THREAD_SINGLE, 0)        \
  X(MPI_THREAD_FUNNELED, 1024)   \
  X(MPI_THREAD_SERIALIZED, 2048) \
  X(MPI_THREAD_MULTIPLE, 4096)   \
  X(MPI_MAX_ERROR_STRING, 512)   \
  X(MPI_MAX_LIBRARY_VERSION_STRING, 8192)

#define RCMPI_MPI_OBJECTS(X)

#define RCMPI_MPI_HANDLES(X)                  \
  X(MPI_COMM_WORLD, MPI_Comm, 0x101)          \
  X(MPI_COMM_NULL, MPI_Comm, 0x100)           \
  X(MPI_BYTE, MPI_Datatype, 0x247)            \
  X(MPI_FLOAT, MPI_Datatype, 0x210)           \
  X(MPI_DOUBLE, MPI_Datatype, 0x214)          \
  X(MPI_INT8_T, MPI_Datatype, 0x240)          \
  X(MPI_UINT8_T, MPI_Datatype, 0x241)         \
  X(MPI_INT32_T, MPI_Datatype, 0x250)         \
  X(MPI_INT64_T, MPI_Datatype, 0x258)         \
  X(MPI_SUM, MPI_Op, 0x21)                    \
  X(MPI_MIN, MPI_Op, 0x22)                    \
  X(MPI_MAX, MPI_Op, 0x23)                    \
  X(MPI_PROD, MPI_Op, 0x24)                   \
  X(MPI_INFO_NULL, MPI_Info, 0x130)           \
  X(MPI_ERRORS_RETURN, MPI_Errhandler, 0x143) \
  X(MPI_IN_PLACE, void*, 1)                   \
  X(MPI_STATUS_IGNORE, MPI_Status*, 0)

#define RCMPI_MPI_ABI_FUNCTIONS(X) X(MPI_Comm, MPI_Comm_fromint, (int))
#define RCMPI_MPI_CASTS(X)

#endif /* RINGCC_PLUGINS_MPI_MPI_API_STANDARD_H_ */
