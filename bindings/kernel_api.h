/* The C interface through which kernels of a framework, built as a library
 * of their own and loaded by that framework (ringcc's TensorFlow ops,
 * plugins/tensorflow/), hand named collectives to the background engine of
 * ringcc._core, the engine ringcc.init() started in this process. The
 * library gets the table from Python: ringcc._core._kernel_api() returns
 * its address. Plain C, so that the two libraries share no C++ object. */
#ifndef RINGCC_BINDINGS_KERNEL_API_H_
#define RINGCC_BINDINGS_KERNEL_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RINGCC_KERNEL_API_VERSION 4

/* The layout of a failed call that is one of several collectives of a
 * grouped call this rank fails together (RingccKernelApi::fail). */
#define RINGCC_LAYOUT_GROUP_FAILED (-1)

/* One named collective of host memory. Values of kind, dtype and op are
 * those of ringcc::CollectiveKind, DataType and ReduceOp. */
typedef struct RingccKernelCall {
  const char* name; /* non-empty: ranks match the collective by it */
  int32_t kind;
  int32_t dtype;
  int32_t op;
  int32_t root; /* broadcast: global rank */
  double prescale;
  double postscale;
  const void* in;
  void* out;         /* null: allocate(allocate_ctx, elements) once the ranks' sizes are known */
  int64_t count;     /* elements this rank contributes */
  int64_t row_elems; /* elements per row of the first dimension */
  int64_t out_count; /* elements out holds (-1 with allocate) */
  const int64_t* shape;
  int32_t ndim;
  const int64_t* send_counts; /* alltoall: elements to each rank, in rank order */
  int32_t n_send_counts;
  /* Called on the engine's thread; returns null to fail the collective. */
  void* (*allocate)(void* allocate_ctx, int64_t elements);
  void* allocate_ctx;
  /* Start the engine's next cycle now rather than at the cycle time (a
   * caller that waits for this collective alone). */
  int32_t nudge;
  /* Non-zero: `in` packs many tensors, and this digests their shapes; ranks
   * whose digests differ fail with MismatchError. */
  int64_t layout;
  /* An allreduce of many tensors as one (n_segments > 0; `in` unused): its
   * input is these buffers one after another, count elements in all, and
   * `out` receives their results in that order. Shared memory reads them
   * where they lie; elsewhere they are packed as a fused batch is. */
  const void* const* segment_in;
  const int64_t* segment_count;
  int32_t n_segments;
} RingccKernelCall;

/* Called once per enqueued call, when it completed: error_kind -1 on
 * success, else a ringcc::ErrorKind with its message (ringcc's class name
 * first). result_count: elements written; recv_counts: elements received
 * from each rank (allgather, alltoall). Runs on the engine's thread (or on
 * the enqueuing thread when the call failed at once); must not block. */
typedef void (*RingccKernelDone)(void* done_ctx, int32_t error_kind, const char* message, int64_t result_count,
                                 const int64_t* recv_counts, int32_t n_recv);

typedef struct RingccKernelApi {
  uint32_t version;     /* RINGCC_KERNEL_API_VERSION */
  uint32_t struct_size; /* sizeof(RingccKernelApi) */
  /* Hands the call to the engine; done runs exactly once. A call this rank
   * cannot start (not initialized, a bad argument) fails at once on this
   * rank (done with the error) and, under its name, on every other rank
   * (MismatchError naming this rank). */
  void (*enqueue)(const RingccKernelCall* call, RingccKernelDone done, void* done_ctx);
  /* This rank could not start the collective `name` of `kind`: every other
   * rank's call of that name fails with MismatchError naming this rank and
   * `why`. `layout`: the call's (RingccKernelCall::layout), or
   * RINGCC_LAYOUT_GROUP_FAILED. */
  void (*fail)(const char* name, int32_t kind, const char* why, int64_t layout);
  /* The job: -1 before ringcc.init(). */
  int32_t (*rank)(void);
  int32_t (*size)(void);
} RingccKernelApi;

#ifdef __cplusplus
}
#endif

#endif /* RINGCC_BINDINGS_KERNEL_API_H_ */
