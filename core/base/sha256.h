// SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), used to authenticate
// every TCP connection with the job's secret.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringcc {

using Digest = std::array<uint8_t, 32>;

Digest sha256(const void* data, size_t size);
Digest hmac_sha256(const std::string& key, const void* data, size_t size);
// Compares in time independent of where the digests differ.
bool digest_equal(const Digest& a, const Digest& b);
// Fills buf with bytes from the OS random source (getrandom/urandom).
void random_bytes(void* buf, size_t size);
// Lower-case hex of the bytes.
std::string to_hex(const void* data, size_t size);

}  // namespace ringcc
