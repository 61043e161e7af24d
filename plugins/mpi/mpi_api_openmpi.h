/* Open MPI's ABI (libmpi.so.40, Open MPI 4 and 5) of what the plugins use
 * (lists described in mpi_api.h). Handles are pointers to incomplete
 * structs, and each predefined handle is the address of an object that
 * libmpi exports (MPI_COMM_WORLD is &ompi_mpi_comm_world): the plugin's
 * references to those objects resolve against the libmpi loaded at run time,
 * as its function calls do. */
#ifndef RINGCC_PLUGINS_MPI_MPI_API_OPENMPI_H_
#define RINGCC_PLUGINS_MPI_MPI_API_OPENMPI_H_

#define RCMPI_MPI_TYPES(X)                     \
  X(MPI_Comm, struct ompi_communicator_t*)     \
  X(MPI_Datatype, struct ompi_datatype_t*)     \
  X(MPI_Errhandler, struct ompi_errhandler_t*) \
  X(MPI_Info, struct ompi_info_t*)             \
  X(MPI_Op, struct ompi_op_t*)                 \
  X(MPI_Request, struct ompi_request_t*)       \
  X(MPI_Message, struct ompi_message_t*)       \
  X(MPI_Fint, int)

/* The fields after MPI_ERROR are Open MPI's own; the plugin reads none of
 * them, but MPI writes them, so they are part of the size. */
#define RCMPI_MPI_STATUS_FIELDS(X) \
  X(int, MPI_SOURCE, )             \
  X(int, MPI_TAG, )                \
  X(int, MPI_ERROR, )              \
  X(int, _cancelled, )             \
  X(size_t, _ucount, )

#define RCMPI_MPI_INTEGERS(X)  \
  X(MPI_SUCCESS, 0)            \
  X(MPI_ERR_OTHER, 16)         \
  X(MPI_ERR_NO_MEM, 39)        \
  X(MPI_ANY_SOURCE, -1)        \
  X(MPI_COMM_TYPE_SHARED, 0)   \
  X(MPI_THREAD_SINGLE, 0)      \
  X(MPI_THREAD_FUNNELED, 1)    \
  X(MPI_THREAD_SERIALIZED, 2)  \
  X(MPI_THREAD_MULTIPLE, 3)    \
  X(MPI_MAX_ERROR_STRING, 256) \
  X(MPI_MAX_LIBRARY_VERSION_STRING, 256)

#define RCMPI_MPI_OBJECTS(X)                             \
  X(ompi_predefined_communicator_t, ompi_mpi_comm_world) \
  X(ompi_predefined_communicator_t, ompi_mpi_comm_null)  \
  X(ompi_predefined_datatype_t, ompi_mpi_byte)           \
  X(ompi_predefined_datatype_t, ompi_mpi_float)          \
  X(ompi_predefined_datatype_t, ompi_mpi_double)         \
  X(ompi_predefined_datatype_t, ompi_mpi_int8_t)         \
  X(ompi_predefined_datatype_t, ompi_mpi_uint8_t)        \
  X(ompi_predefined_datatype_t, ompi_mpi_int32_t)        \
  X(ompi_predefined_datatype_t, ompi_mpi_int64_t)        \
  X(ompi_predefined_op_t, ompi_mpi_op_sum)               \
  X(ompi_predefined_op_t, ompi_mpi_op_min)               \
  X(ompi_predefined_op_t, ompi_mpi_op_max)               \
  X(ompi_predefined_op_t, ompi_mpi_op_prod)              \
  X(ompi_predefined_info_t, ompi_mpi_info_null)          \
  X(ompi_predefined_errhandler_t, ompi_mpi_errors_return)

#define RCMPI_MPI_HANDLES(X)                                    \
  X(MPI_COMM_WORLD, MPI_Comm, &ompi_mpi_comm_world)             \
  X(MPI_COMM_NULL, MPI_Comm, &ompi_mpi_comm_null)               \
  X(MPI_BYTE, MPI_Datatype, &ompi_mpi_byte)                     \
  X(MPI_FLOAT, MPI_Datatype, &ompi_mpi_float)                   \
  X(MPI_DOUBLE, MPI_Datatype, &ompi_mpi_double)                 \
  X(MPI_INT8_T, MPI_Datatype, &ompi_mpi_int8_t)                 \
  X(MPI_UINT8_T, MPI_Datatype, &ompi_mpi_uint8_t)               \
  X(MPI_INT32_T, MPI_Datatype, &ompi_mpi_int32_t)               \
  X(MPI_INT64_T, MPI_Datatype, &ompi_mpi_int64_t)               \
  X(MPI_SUM, MPI_Op, &ompi_mpi_op_sum)                          \
  X(MPI_MIN, MPI_Op, &ompi_mpi_op_min)                          \
  X(MPI_MAX, MPI_Op, &ompi_mpi_op_max)                          \
  X(MPI_PROD, MPI_Op, &ompi_mpi_op_prod)                        \
  X(MPI_INFO_NULL, MPI_Info, &ompi_mpi_info_null)               \
  X(MPI_ERRORS_RETURN, MPI_Errhandler, &ompi_mpi_errors_return) \
  X(MPI_IN_PLACE, void*, 1)                                     \
  X(MPI_STATUS_IGNORE, MPI_Status*, 0)

#define RCMPI_MPI_ABI_FUNCTIONS(X) X(MPI_Comm, MPI_Comm_f2c, (MPI_Fint))
#define RCMPI_MPI_CASTS(X)

#endif /* RINGCC_PLUGINS_MPI_MPI_API_OPENMPI_H_ */
