// Compiled (never run) against the real headers of the tensorflow-cpu wheel
// (tensorflow/include) by tests/unit/test_tensorflow_api.py: every constant,
// struct and function signature that ringcc's op library declares itself
// in plugins/tensorflow/tf_c_api.h must be TensorFlow's. A difference stops
// the compilation at the static_assert that names it.
#include "tensorflow/c/c_api.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#include <cstddef>
#include <type_traits>

#include "plugins/tensorflow/tf_c_api.h"

namespace {

// Real<T>::type: T with ringcc's declared types replaced by TensorFlow's
// own (through pointers, const and function types).
template <class T>
struct Real {
  using type = T;
};
template <class T>
struct Real<T*> {
  using type = typename Real<T>::type*;
};
template <class T>
struct Real<const T> {
  using type = const typename Real<T>::type;
};
template <class R, class... A>
struct Real<R (*)(A...)> {
  using type = typename Real<R>::type (*)(typename Real<A>::type...);
};

#define RINGCC_MAP(ours, theirs)                                                       \
  template <>                                                                          \
  struct Real<ours> {                                                                  \
    using type = theirs;                                                               \
  };                                                                                   \
  static_assert(sizeof(ours) == sizeof(theirs), #ours ": size differs from " #theirs); \
  static_assert(alignof(ours) == alignof(theirs), #ours ": alignment differs from " #theirs);

RINGCC_MAP(ringcc::tf::TF_DataType, ::TF_DataType)
RINGCC_MAP(ringcc::tf::TF_Code, ::TF_Code)
RINGCC_MAP(ringcc::tf::TF_StringView, ::TF_StringView)
#undef RINGCC_MAP

static_assert(offsetof(ringcc::tf::TF_StringView, data) == offsetof(::TF_StringView, data), "TF_StringView::data");
static_assert(offsetof(ringcc::tf::TF_StringView, len) == offsetof(::TF_StringView, len), "TF_StringView::len");

#define RINGCC_SAME_VALUE(name, value)                                           \
  static_assert(static_cast<long long>(value) == static_cast<long long>(::name), \
                #name ": ringcc's value differs from the header's");             \
  static_assert(static_cast<long long>(ringcc::tf::name) == static_cast<long long>(value), #name);
RINGCC_TF_DATA_TYPES(RINGCC_SAME_VALUE)
RINGCC_TF_CODES(RINGCC_SAME_VALUE)
#undef RINGCC_SAME_VALUE

// Each pointer type, with TensorFlow's types put back, is the type of a
// pointer to the declared function of that name.
#define RINGCC_SAME_SIGNATURE(symbol, result, params)                                                      \
  static_assert(std::is_same_v<Real<decltype(ringcc::tf::TfApi::symbol)>::type, decltype(&::symbol)>, \
                #symbol ": ringcc's signature differs from TensorFlow's headers");
RINGCC_TF_FUNCTIONS(RINGCC_SAME_SIGNATURE)
#undef RINGCC_SAME_SIGNATURE

}  // namespace
