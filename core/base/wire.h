// The encoding of what ranks send each other outside the collectives'
// data (the rendezvous store's protocol, the engine's negotiation
// messages): fixed-size integers and doubles in little-endian byte order,
// whatever the host's, and strings as a 32-bit length and their bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ringcc {

inline void put_u32(std::string* out, uint32_t v) {
  const char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 24)};
  out->append(b, sizeof(b));
}

inline void put_u64(std::string* out, uint64_t v) {
  put_u32(out, static_cast<uint32_t>(v));
  put_u32(out, static_cast<uint32_t>(v >> 32));
}

inline void put_u8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
inline void put_i32(std::string* out, int32_t v) { put_u32(out, static_cast<uint32_t>(v)); }
inline void put_i64(std::string* out, int64_t v) { put_u64(out, static_cast<uint64_t>(v)); }
inline void put_f64(std::string* out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  put_u64(out, bits);
}
void put_string(std::string* out, std::string_view s);

// The integers at p (which must hold their bytes).
inline uint32_t load_u32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}
inline uint64_t load_u64(const char* p) { return load_u32(p) | uint64_t(load_u32(p + 4)) << 32; }

// Readers of a message: each takes the value at *pos and advances it, or
// raises Error(kInternal, "truncated message") when the message ends first.
uint8_t get_u8(const std::string& in, size_t* pos);
uint32_t get_u32(const std::string& in, size_t* pos);
uint64_t get_u64(const std::string& in, size_t* pos);
int32_t get_i32(const std::string& in, size_t* pos);
int64_t get_i64(const std::string& in, size_t* pos);
double get_f64(const std::string& in, size_t* pos);
std::string get_string(const std::string& in, size_t* pos);

}  // namespace ringcc
