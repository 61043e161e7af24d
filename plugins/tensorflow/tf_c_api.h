// The part of TensorFlow's stable C API (tensorflow/c/kernels.h, ops.h,
// tf_tensor.h, tf_status.h, tf_datatype.h) that ringcc's op library uses,
// declared here so that the library builds without TensorFlow: its
// functions are looked up with dlsym(3) in the libtensorflow_framework.so.2
// of the TensorFlow the process imported (tf_op_library.cc). Names and
// values are TensorFlow's own. tests/unit/tensorflow_api/check_declarations.cc
// compiles these declarations against the real headers of the
// tensorflow-cpu wheel and static_asserts that every value and signature
// matches (tests/unit/test_tensorflow_api.py).
#pragma once

#include <cstddef>
#include <cstdint>

// Opaque handles: the same incomplete types TensorFlow's headers name
// (TF_Status is TSL's status, `typedef struct TSL_Status TF_Status`).
struct TSL_Status;
typedef struct TSL_Status TF_Status;
struct TF_Tensor;
struct TF_KernelBuilder;
struct TF_OpKernelConstruction;
struct TF_OpKernelContext;
struct TF_AsyncOpKernelDoneCallback;
struct TF_OpDefinitionBuilder;
struct TF_ShapeInferenceContext;
struct TF_ShapeHandle;

namespace ringcc {
namespace tf {

// Every constant used, as (name, value).
#define RINGCC_TF_DATA_TYPES(X) \
  X(TF_FLOAT, 1)                \
  X(TF_DOUBLE, 2)               \
  X(TF_INT32, 3)                \
  X(TF_UINT8, 4)                \
  X(TF_INT16, 5)                \
  X(TF_INT8, 6)                 \
  X(TF_STRING, 7)               \
  X(TF_COMPLEX64, 8)            \
  X(TF_INT64, 9)                \
  X(TF_BOOL, 10)                \
  X(TF_BFLOAT16, 14)            \
  X(TF_UINT16, 17)              \
  X(TF_COMPLEX128, 18)          \
  X(TF_HALF, 19)

#define RINGCC_TF_CODES(X)       \
  X(TF_OK, 0)                    \
  X(TF_CANCELLED, 1)             \
  X(TF_UNKNOWN, 2)               \
  X(TF_INVALID_ARGUMENT, 3)      \
  X(TF_DEADLINE_EXCEEDED, 4)     \
  X(TF_FAILED_PRECONDITION, 9)   \
  X(TF_ABORTED, 10)              \
  X(TF_UNIMPLEMENTED, 12)        \
  X(TF_INTERNAL, 13)

#define RINGCC_TF_ENUMERATOR(name, value) name = value,
enum TF_DataType : int { RINGCC_TF_DATA_TYPES(RINGCC_TF_ENUMERATOR) };
enum TF_Code : int { RINGCC_TF_CODES(RINGCC_TF_ENUMERATOR) };
#undef RINGCC_TF_ENUMERATOR

// TF_Bool: tensorflow/c/c_api_macros.h's macro for the C API's booleans.
using TfBool = unsigned char;

// tensorflow/c/c_api.h's TF_StringView.
struct TF_StringView {
  const char* data;
  size_t len;
};

using ShapeFunction = void (*)(TF_ShapeInferenceContext*, TF_Status*);
using CreateFunction = void* (*)(TF_OpKernelConstruction*);
using ComputeAsyncFunction = void (*)(void*, TF_OpKernelContext*, TF_AsyncOpKernelDoneCallback*);
using DeleteFunction = void (*)(void*);

// Every function used: X(symbol, result, (parameters)).
#define RINGCC_TF_FUNCTIONS(X)                                                                                        \
  X(TF_NewStatus, TF_Status*, ())                                                                                     \
  X(TF_DeleteStatus, void, (TF_Status*))                                                                              \
  X(TF_SetStatus, void, (TF_Status*, TF_Code, const char*))                                                           \
  X(TF_GetCode, TF_Code, (const TF_Status*))                                                                          \
  X(TF_Message, const char*, (const TF_Status*))                                                                      \
  X(TF_DeleteTensor, void, (TF_Tensor*))                                                                              \
  X(TF_TensorType, TF_DataType, (const TF_Tensor*))                                                                   \
  X(TF_NumDims, int, (const TF_Tensor*))                                                                              \
  X(TF_Dim, int64_t, (const TF_Tensor*, int))                                                                         \
  X(TF_TensorData, void*, (const TF_Tensor*))                                                                         \
  X(TF_TensorElementCount, int64_t, (const TF_Tensor*))                                                               \
  X(TF_NewOpDefinitionBuilder, TF_OpDefinitionBuilder*, (const char*))                                                \
  X(TF_RegisterOpDefinition, void, (TF_OpDefinitionBuilder*, TF_Status*))                                             \
  X(TF_OpDefinitionBuilderAddAttr, void, (TF_OpDefinitionBuilder*, const char*))                                      \
  X(TF_OpDefinitionBuilderAddInput, void, (TF_OpDefinitionBuilder*, const char*))                                     \
  X(TF_OpDefinitionBuilderAddOutput, void, (TF_OpDefinitionBuilder*, const char*))                                    \
  X(TF_OpDefinitionBuilderSetIsStateful, void, (TF_OpDefinitionBuilder*, bool))                                       \
  X(TF_OpDefinitionBuilderSetShapeInferenceFunction, void, (TF_OpDefinitionBuilder*, ShapeFunction))                  \
  X(TF_ShapeInferenceContextNumInputs, int64_t, (TF_ShapeInferenceContext*))                                          \
  X(TF_NewShapeHandle, TF_ShapeHandle*, ())                                                                           \
  X(TF_DeleteShapeHandle, void, (TF_ShapeHandle*))                                                                    \
  X(TF_ShapeInferenceContextGetInput, void, (TF_ShapeInferenceContext*, int, TF_ShapeHandle*, TF_Status*))            \
  X(TF_ShapeInferenceContextSetOutput, void, (TF_ShapeInferenceContext*, int, TF_ShapeHandle*, TF_Status*))           \
  X(TF_ShapeInferenceContextSetUnknownShape, void, (TF_ShapeInferenceContext*, TF_Status*))                           \
  X(TF_NewAsyncKernelBuilder, TF_KernelBuilder*,                                                                      \
    (const char*, const char*, CreateFunction, ComputeAsyncFunction, DeleteFunction))                                 \
  X(TF_RegisterKernelBuilder, void, (const char*, TF_KernelBuilder*, TF_Status*))                                     \
  X(TF_RunAsyncOpKernelDoneCallback, void, (TF_AsyncOpKernelDoneCallback*))                                           \
  X(TF_NumInputs, int, (TF_OpKernelContext*))                                                                         \
  X(TF_NumOutputs, int, (TF_OpKernelContext*))                                                                        \
  X(TF_GetInput, void, (TF_OpKernelContext*, int, TF_Tensor**, TF_Status*))                                          \
  X(TF_AllocateOutput, TF_Tensor*, (TF_OpKernelContext*, int, TF_DataType, const int64_t*, int, size_t, TF_Status*)) \
  X(TF_ForwardInputOrAllocateOutput, TF_Tensor*,                                                                      \
    (TF_OpKernelContext*, const int*, int, int, const int64_t*, int, int*, TF_Status*))                               \
  X(TF_OpKernelContext_Failure, void, (TF_OpKernelContext*, TF_Status*))                                              \
  X(TF_OpKernelConstruction_Failure, void, (TF_OpKernelConstruction*, TF_Status*))                                    \
  X(TF_OpKernelConstruction_GetAttrInt64, void, (TF_OpKernelConstruction*, const char*, int64_t*, TF_Status*))        \
  X(TF_OpKernelConstruction_GetAttrFloat, void, (TF_OpKernelConstruction*, const char*, float*, TF_Status*))          \
  X(TF_OpKernelConstruction_GetAttrBool, void, (TF_OpKernelConstruction*, const char*, TfBool*, TF_Status*))          \
  X(TF_OpKernelConstruction_GetAttrSize, void,                                                                        \
    (TF_OpKernelConstruction*, const char*, int32_t*, int32_t*, TF_Status*))                                          \
  X(TF_OpKernelConstruction_GetAttrString, void,                                                                      \
    (TF_OpKernelConstruction*, const char*, char*, size_t, TF_Status*))                                               \
  X(TF_OpKernelConstruction_GetName, TF_StringView, (TF_OpKernelConstruction*))

// The functions, found at run time.
struct TfApi {
#define RINGCC_TF_POINTER(symbol, result, params) result(*symbol) params = nullptr;
  RINGCC_TF_FUNCTIONS(RINGCC_TF_POINTER)
#undef RINGCC_TF_POINTER
};

}  // namespace tf
}  // namespace ringcc
