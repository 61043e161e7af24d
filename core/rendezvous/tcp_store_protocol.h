// The rendezvous store's wire protocol (tcp_store.h describes it), shared
// by the server (tcp_store_server.cc) and the client (tcp_store.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/sha256.h"
#include "core/base/wire.h"

namespace ringcc {
namespace store_protocol {

constexpr char kMagic[4] = {'R', 'C', 'S', 'T'};
constexpr uint8_t kVersion = 2;
constexpr size_t kGreetingSize = 6;  // magic, version, auth flag
constexpr size_t kNonceSize = 32;
constexpr char kClientProofContext[] = "ringcc-store-client";
constexpr char kServerProofContext[] = "ringcc-store-server";
constexpr size_t kRequestHeaderSize = 17;  // op, key size, value size
constexpr size_t kReplyHeaderSize = 9;     // status, payload size
constexpr uint64_t kMaxKeySize = uint64_t(1) << 20;
constexpr uint64_t kMaxValueSize = uint64_t(1) << 30;
constexpr uint64_t kMaxRequestSize = kRequestHeaderSize + kMaxKeySize + kMaxValueSize;
// Longest blocking get the server accepts (a year), so deadlines never overflow.
constexpr int64_t kMaxWaitMs = int64_t(365) * 24 * 3600 * 1000;

constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
// How long past a get's own timeout a client waits for the server to report
// that timeout before deciding the server is stuck.
constexpr auto kGetReplyGrace = std::chrono::seconds(5);
// How long a store that was reached before may refuse connections before the
// client decides that it has exited.
constexpr auto kRefusedMeansGone = std::chrono::milliseconds(500);

enum Op : uint8_t { kSet = 1, kGet = 2, kTryGet = 3, kAdd = 4 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kTimedOut = 2, kFailed = 3 };

inline std::string encode_i64(int64_t v) {
  std::string s;
  put_i64(&s, v);
  return s;
}

// s holds 8 bytes (the requests and replies that carry a number are checked).
inline int64_t decode_i64(const std::string& s) { return static_cast<int64_t>(load_u64(s.data())); }

// The proofs of the store's handshake: each side's HMAC covers both fresh
// nonces and names its own role, so neither can be replayed or reflected.
inline Digest store_proof(const std::string& secret, const char* context, const std::string& server_nonce,
                          const std::string& client_nonce) {
  std::string message = std::string(context) + server_nonce + client_nonce;
  return hmac_sha256(secret, message.data(), message.size());
}

}  // namespace store_protocol
}  // namespace ringcc
