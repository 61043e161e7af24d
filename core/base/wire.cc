#include "core/base/wire.h"

#include "core/base/error.h"

namespace ringcc {

namespace {

// The position of the next `n` bytes of `in`, advancing *pos past them.
const char* take(const std::string& in, size_t* pos, size_t n) {
  if (n > in.size() || *pos > in.size() - n) raise(ErrorKind::kInternal, "truncated message");
  const char* p = in.data() + *pos;
  *pos += n;
  return p;
}

}  // namespace

void put_string(std::string* out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

uint8_t get_u8(const std::string& in, size_t* pos) { return static_cast<uint8_t>(*take(in, pos, 1)); }
uint32_t get_u32(const std::string& in, size_t* pos) { return load_u32(take(in, pos, 4)); }
uint64_t get_u64(const std::string& in, size_t* pos) { return load_u64(take(in, pos, 8)); }
int32_t get_i32(const std::string& in, size_t* pos) { return static_cast<int32_t>(get_u32(in, pos)); }
int64_t get_i64(const std::string& in, size_t* pos) { return static_cast<int64_t>(get_u64(in, pos)); }

double get_f64(const std::string& in, size_t* pos) {
  const uint64_t bits = get_u64(in, pos);
  double v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

std::string get_string(const std::string& in, size_t* pos) {
  const uint32_t n = get_u32(in, pos);
  const char* p = take(in, pos, n);
  return std::string(p, n);
}

}  // namespace ringcc
