#include "core/base/sha256.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/error.h"

namespace ringcc {
namespace {

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

constexpr size_t kBlockSize = 64;

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// Incremental SHA-256 (FIPS 180-4).
class Sha256 {
 public:
  void update(const void* data, size_t size) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    total_bytes_ += size;
    if (buffered_ > 0) {
      size_t take = std::min(size, kBlockSize - buffered_);
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      size -= take;
      if (buffered_ < kBlockSize) return;
      compress(buffer_);
      buffered_ = 0;
    }
    for (; size >= kBlockSize; p += kBlockSize, size -= kBlockSize) compress(p);
    std::memcpy(buffer_, p, size);
    buffered_ = size;
  }

  Digest finish() {
    // Padding: 0x80, zeros up to 56 mod 64, then the bit length big-endian.
    const uint64_t bit_length = total_bytes_ * 8;
    uint8_t pad[kBlockSize + 8] = {0x80};
    size_t pad_size = (buffered_ < 56 ? 56 : 120) - buffered_;
    for (int i = 0; i < 8; ++i) pad[pad_size + i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
    update(pad, pad_size + 8);

    Digest out;
    for (int i = 0; i < 8; ++i) {
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(state_[i] >> (24 - 8 * b));
    }
    return out;
  }

 private:
  void compress(const uint8_t* block) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t(block[4 * i]) << 24) | (uint32_t(block[4 * i + 1]) << 16) | (uint32_t(block[4 * i + 2]) << 8) |
             uint32_t(block[4 * i + 3]);
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buffer_[kBlockSize] = {0};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Reads size random bytes from /dev/urandom, for kernels without getrandom.
void urandom_bytes(uint8_t* p, size_t size) {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) raise(ErrorKind::kInternal, "cannot open /dev/urandom: ", std::strerror(errno));
  while (size > 0) {
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      raise(ErrorKind::kInternal, "reading /dev/urandom failed: ", std::strerror(err));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

Digest sha256(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

Digest hmac_sha256(const std::string& key, const void* data, size_t size) {
  // RFC 2104: K' = H(K) if K is longer than a block, zero-padded to a block;
  // HMAC = H((K' ^ opad) || H((K' ^ ipad) || data)).
  uint8_t block_key[kBlockSize] = {0};
  if (key.size() > kBlockSize) {
    Digest hashed = sha256(key.data(), key.size());
    std::memcpy(block_key, hashed.data(), hashed.size());
  } else {
    std::memcpy(block_key, key.data(), key.size());
  }
  uint8_t inner_pad[kBlockSize], outer_pad[kBlockSize];
  for (size_t i = 0; i < kBlockSize; ++i) {
    inner_pad[i] = block_key[i] ^ 0x36;
    outer_pad[i] = block_key[i] ^ 0x5c;
  }
  Sha256 inner;
  inner.update(inner_pad, kBlockSize);
  inner.update(data, size);
  Digest inner_digest = inner.finish();

  Sha256 outer;
  outer.update(outer_pad, kBlockSize);
  outer.update(inner_digest.data(), inner_digest.size());
  return outer.finish();
}

bool digest_equal(const Digest& a, const Digest& b) {
  // Accumulate every difference so the time does not depend on where the
  // first one is; volatile keeps the compiler from short-circuiting.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

void random_bytes(void* buf, size_t size) {
  uint8_t* p = static_cast<uint8_t*>(buf);
#ifdef SYS_getrandom
  while (size > 0) {
    long n = ::syscall(SYS_getrandom, p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ENOSYS || errno == EPERM)) break;  // old kernel or seccomp
    raise(ErrorKind::kInternal, "getrandom() failed: ", std::strerror(errno));
  }
#endif
  if (size > 0) urandom_bytes(p, size);
}

std::string to_hex(const void* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  const uint8_t* p = static_cast<const uint8_t*>(data);
  std::string out(size * 2, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xf];
  }
  return out;
}

}  // namespace ringcc
