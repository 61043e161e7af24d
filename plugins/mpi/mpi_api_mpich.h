/* The MPICH ABI (libmpi.so.12: MPICH 3.1 and later, Intel MPI, MVAPICH,
 * Cray MPICH) of what the plugins use (lists described in mpi_api.h).
 * Handles are ints, and predefined handles fixed values that encode their
 * kind in the top bits. */
#ifndef RINGCC_PLUGINS_MPI_MPI_API_MPICH_H_
#define RINGCC_PLUGINS_MPI_MPI_API_MPICH_H_

#define RCMPI_MPI_TYPES(X) \
  X(MPI_Comm, int)         \
  X(MPI_Datatype, int)     \
  X(MPI_Errhandler, int)   \
  X(MPI_Info, int)         \
  X(MPI_Op, int)           \
  X(MPI_Request, int)      \
  X(MPI_Message, int)      \
  X(MPI_Fint, int)

/* The first two fields are MPICH's own (the received count and the
 * cancelled flag); MPI writes them, the plugin reads none. */
#define RCMPI_MPI_STATUS_FIELDS(X) \
  X(int, count_lo, )               \
  X(int, count_hi_and_cancelled, ) \
  X(int, MPI_SOURCE, )             \
  X(int, MPI_TAG, )                \
  X(int, MPI_ERROR, )

#define RCMPI_MPI_INTEGERS(X)  \
  X(MPI_SUCCESS, 0)            \
  X(MPI_ERR_OTHER, 15)         \
  X(MPI_ERR_NO_MEM, 34)        \
  X(MPI_ANY_SOURCE, -2)        \
  X(MPI_COMM_TYPE_SHARED, 1)   \
  X(MPI_THREAD_SINGLE, 0)      \
  X(MPI_THREAD_FUNNELED, 1)    \
  X(MPI_THREAD_SERIALIZED, 2)  \
  X(MPI_THREAD_MULTIPLE, 3)    \
  X(MPI_MAX_ERROR_STRING, 512) \
  X(MPI_MAX_LIBRARY_VERSION_STRING, 8192)

#define RCMPI_MPI_OBJECTS(X)

#define RCMPI_MPI_HANDLES(X)                       \
  X(MPI_COMM_WORLD, MPI_Comm, 0x44000000)          \
  X(MPI_COMM_NULL, MPI_Comm, 0x04000000)           \
  X(MPI_BYTE, MPI_Datatype, 0x4c00010d)            \
  X(MPI_FLOAT, MPI_Datatype, 0x4c00040a)           \
  X(MPI_DOUBLE, MPI_Datatype, 0x4c00080b)          \
  X(MPI_INT8_T, MPI_Datatype, 0x4c000137)          \
  X(MPI_UINT8_T, MPI_Datatype, 0x4c00013b)         \
  X(MPI_INT32_T, MPI_Datatype, 0x4c000439)         \
  X(MPI_INT64_T, MPI_Datatype, 0x4c00083a)         \
  X(MPI_SUM, MPI_Op, 0x58000003)                   \
  X(MPI_MIN, MPI_Op, 0x58000002)                   \
  X(MPI_MAX, MPI_Op, 0x58000001)                   \
  X(MPI_PROD, MPI_Op, 0x58000004)                  \
  X(MPI_INFO_NULL, MPI_Info, 0x1c000000)           \
  X(MPI_ERRORS_RETURN, MPI_Errhandler, 0x54000001) \
  X(MPI_IN_PLACE, void*, -1)                       \
  X(MPI_STATUS_IGNORE, MPI_Status*, 1)

/* A Fortran handle is the C handle: mpi.h makes MPI_Comm_f2c a cast. */
#define RCMPI_MPI_ABI_FUNCTIONS(X)
#define RCMPI_MPI_CASTS(X) X(MPI_Comm, MPI_Comm_f2c, MPI_Fint)

#endif /* RINGCC_PLUGINS_MPI_MPI_API_MPICH_H_ */
