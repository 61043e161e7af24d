// A mutation fuzzer for what ringcc decodes from its peers and from anyone
// who can connect to it: the TCP link handshake (both sides), the
// rendezvous store's handshake and requests, the engine's negotiation
// messages (base/wire) and the collective headers ranks exchange
// (collective/op_header).
//
// Each target starts from valid messages (its seeds), mutates them with a
// deterministic generator (bit flips, random bytes, inserted and deleted
// ranges, boundary integers written over length and count fields, splices,
// truncation) and feeds the result to the real decoder: in process for the
// pure decoders, over 127.0.0.1 to a real server or client for the socket
// protocols. A decoder must reject garbage with ringcc::Error, never crash,
// hang or allocate without bound; the servers must go on serving real
// clients afterwards. Built with RINGCC_SANITIZE=address,undefined every
// memory error and undefined behaviour is fatal; a single allocation above
// --max-alloc-mb (default 256) is a finding too, as is an input that takes
// more than --hang-s seconds.
//
// Before the targets, the inputs that once got through (known_inputs) must
// each be refused.
//
//   ringcc_fuzz [--target all|link_acceptor|link_connector|store_server|
//                 negotiation|op_header] [--seconds S] [--iterations N]
//               [--seed K] [--replay ITERATION]
//
// Prints, per target, the iterations run, the inputs rejected and accepted,
// and the time; exits non-zero on any finding (after printing the target,
// seed and iteration that reproduce it).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define RINGCC_FUZZ_HAVE_SANITIZER_HOOKS 1
#endif
#endif

#include "core/base/error.h"
#include "core/base/sha256.h"
#include "core/base/wire.h"
#include "core/collective/op_header.h"
#include "core/engine/negotiation.h"
#include "core/engine/response_cache.h"
#include "core/os/socket.h"
#include "core/rendezvous/tcp_store.h"
#include "core/transport/tcp_transport.h"

using namespace ringcc;

namespace {

// ---- what is running, for the report of a finding --------------------------

const char* volatile g_target = "none";
std::atomic<uint64_t> g_iteration{0};
std::atomic<int64_t> g_iteration_started_ns{0};
uint64_t g_seed = 1;

void write_stderr(const char* text) { (void)!::write(2, text, std::strlen(text)); }

// Async-signal-safe: names the input that reproduces a finding.
void report_current_input() {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "\nringcc_fuzz: FINDING in target %s, seed %" PRIu64 ", iteration %" PRIu64
                " (reproduce: ringcc_fuzz --target %s --seed %" PRIu64 " --replay %" PRIu64 ")\n",
                g_target, g_seed, g_iteration.load(), g_target, g_seed, g_iteration.load());
  write_stderr(buf);
}

void on_fatal_signal(int sig) {
  report_current_input();
  signal(sig, SIG_DFL);
  raise(sig);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- allocation bound (sanitizer builds: the sanitizer's own limit) ---------

size_t g_max_alloc_bytes = size_t(256) << 20;

}  // namespace

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// One allocation larger than the bound is a finding: a length field taken
// on trust.
static void* checked_alloc(size_t size) {
  if (size > g_max_alloc_bytes) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "\nringcc_fuzz: allocation of %zu bytes (over the bound)\n", size);
    write_stderr(buf);
    report_current_input();
    std::abort();
  }
  void* p = std::malloc(size ? size : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t size) { return checked_alloc(size); }
void* operator new[](size_t size) { return checked_alloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

// A UBSan finding aborts, so that the handler of SIGABRT names the input.
extern "C" const char* __ubsan_default_options() { return "abort_on_error=1:print_stacktrace=1"; }

#if defined(__SANITIZE_ADDRESS__)
// ASan refuses (fatally) any single allocation above this bound.
extern "C" const char* __asan_default_options() {
  return "max_allocation_size_mb=256:allocator_may_return_null=0:detect_leaks=1";
}
#endif

namespace {

// ---- the mutator -------------------------------------------------------------

// splitmix64: small, fast and the same everywhere.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
};

const uint64_t kInteresting[] = {0,
                                 1,
                                 2,
                                 7,
                                 8,
                                 0x7f,
                                 0x80,
                                 0xff,
                                 0x100,
                                 0x7fff,
                                 0x8000,
                                 0xffff,
                                 0x10000,
                                 0x7fffffffull,
                                 0x80000000ull,
                                 0xffffffffull,
                                 0x100000000ull,
                                 (1ull << 20),
                                 (1ull << 20) + 1,
                                 (1ull << 30),
                                 (1ull << 30) + 1,
                                 (1ull << 31),
                                 (1ull << 40),
                                 0x7fffffffffffffffull,
                                 0x8000000000000000ull,
                                 0xffffffffffffffffull,
                                 0xfffffffffffffff0ull};

constexpr size_t kMaxInput = 64 * 1024;

std::string mutate(const std::string& seed, const std::vector<std::string>& corpus, Rng& rng) {
  std::string d = seed;
  const int rounds = 1 + static_cast<int>(rng.below(6));
  for (int r = 0; r < rounds; ++r) {
    const size_t n = d.size();
    switch (rng.below(10)) {
      case 0:  // flip a bit
        if (n) d[rng.below(n)] ^= static_cast<char>(1u << rng.below(8));
        break;
      case 1:  // a random byte
        if (n) d[rng.below(n)] = static_cast<char>(rng.next());
        break;
      case 2: {  // insert random bytes
        std::string ins(1 + rng.below(16), '\0');
        for (char& c : ins) c = static_cast<char>(rng.next());
        d.insert(rng.below(n + 1), ins);
        break;
      }
      case 3:  // delete a range
        if (n) {
          const size_t at = rng.below(n);
          d.erase(at, 1 + rng.below(std::min<size_t>(n - at, 32)));
        }
        break;
      case 4:
      case 5: {  // a boundary integer (4 or 8 bytes, either sign) over a field
        if (n < 4) break;
        uint64_t v = kInteresting[rng.below(sizeof(kInteresting) / sizeof(kInteresting[0]))];
        if (rng.chance(30)) v = ~v + 1;
        const size_t width = (n >= 8 && rng.chance(50)) ? 8 : 4;
        const size_t at = rng.below(n - width + 1);
        for (size_t i = 0; i < width; ++i) d[at + i] = static_cast<char>(v >> (8 * i));
        break;
      }
      case 6:  // truncate
        d.resize(rng.below(n + 1));
        break;
      case 7:  // repeat a chunk
        if (n) {
          const size_t at = rng.below(n);
          const std::string chunk = d.substr(at, 1 + rng.below(std::min<size_t>(n - at, 64)));
          d.insert(rng.below(d.size() + 1), chunk);
        }
        break;
      case 8:  // splice with another seed
        if (!corpus.empty()) {
          const std::string& other = corpus[rng.below(corpus.size())];
          d = d.substr(0, rng.below(n + 1)) + other.substr(rng.below(other.size() + 1));
        }
        break;
      case 9:  // append random bytes
        for (size_t i = 1 + rng.below(32); i > 0; --i) d.push_back(static_cast<char>(rng.next()));
        break;
    }
    if (d.size() > kMaxInput) d.resize(kMaxInput);
  }
  return d;
}

// The generator of one iteration: the same input for the same seed and
// iteration whatever ran before (so --replay reproduces it).
Rng iteration_rng(const char* target, uint64_t iteration) {
  uint64_t h = g_seed * 0x100000001B3ull;
  for (const char* p = target; *p; ++p) h = (h ^ static_cast<uint8_t>(*p)) * 0x100000001B3ull;
  Rng rng(h ^ (iteration * 0x9E3779B97F4A7C15ull));
  rng.next();
  return rng;
}

std::string hex(const std::string& s) { return to_hex(s.data(), s.size()); }

// ---- socket helpers (the fuzzer's own side of a connection) ------------------

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Closed with a reset, so thousands of iterations leave no TIME_WAIT behind.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  return fd;
}

// Reads exactly n bytes within timeout_ms; false on close, error or timeout.
bool read_exact(int fd, char* out, size_t n, int timeout_ms) {
  const int64_t end = now_ns() + int64_t(timeout_ms) * 1000000;
  size_t got = 0;
  while (got < n) {
    const int64_t left_ms = (end - now_ns()) / 1000000;
    if (left_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left_ms)) <= 0) return false;
    const ssize_t r = ::recv(fd, out + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

void send_bytes(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t r = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (r <= 0) return;  // the peer closed on us: that is a verdict too
    sent += static_cast<size_t>(r);
  }
}

// Reads until the peer closes, up to limit_ms or stop_after bytes; returns
// the bytes read and sets *closed when it did close. A server that neither
// answers nor closes after our side has finished sending is a hang.
std::string drain(int fd, int limit_ms, bool* closed, size_t stop_after = SIZE_MAX) {
  std::string out;
  const int64_t end = now_ns() + int64_t(limit_ms) * 1000000;
  char buf[4096];
  *closed = false;
  for (;;) {
    const int64_t left_ms = (end - now_ns()) / 1000000;
    if (left_ms <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left_ms)) <= 0) return out;
    const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) {
      *closed = true;
      return out;
    }
    out.append(buf, static_cast<size_t>(r));
    if (out.size() >= stop_after) return out;
  }
}

void put_le32(std::string* out, int32_t v) { put_i32(out, v); }

// ---- results ----------------------------------------------------------------

struct Tally {
  uint64_t iterations = 0;
  uint64_t rejected = 0;  // raised ringcc::Error / refused / closed
  uint64_t accepted = 0;  // decoded without complaint
};

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\nringcc_fuzz: %s\n", what.c_str());
  report_current_input();
  std::fflush(stderr);
  std::abort();
}

// Runs fn(iteration) for each iteration until the budget ends.
struct Budget {
  double seconds = 10;
  uint64_t iterations = 0;  // 0: no limit but time
  int64_t replay = -1;      // one iteration only
};

Tally run_iterations(const char* name, const Budget& budget, const std::function<bool(uint64_t, Rng&)>& one) {
  g_target = name;
  Tally t;
  const int64_t start = now_ns();
  const int64_t end = start + static_cast<int64_t>(budget.seconds * 1e9);
  for (uint64_t i = 0;; ++i) {
    uint64_t it = i;
    if (budget.replay >= 0) {
      if (i > 0) break;
      it = static_cast<uint64_t>(budget.replay);
    } else {
      if (budget.iterations && i >= budget.iterations) break;
      if (!budget.iterations && now_ns() >= end) break;
    }
    g_iteration = it;
    g_iteration_started_ns = now_ns();
    Rng rng = iteration_rng(name, it);
    if (one(it, rng)) {
      ++t.accepted;
    } else {
      ++t.rejected;
    }
    ++t.iterations;
  }
  g_iteration_started_ns = 0;
  return t;
}

// ---- target: negotiation messages (base/wire, engine/tensor_meta) ------------

TensorMeta some_meta(Rng& rng) {
  TensorMeta m;
  m.kind = static_cast<CollectiveKind>(1 + rng.below(5));
  m.dtype = static_cast<DataType>(rng.below(8));
  m.op = static_cast<ReduceOp>(rng.below(4));
  m.root = static_cast<int32_t>(rng.below(3));
  m.prescale = rng.chance(80) ? 1.0 : 0.5;
  m.postscale = 1.0;
  m.layout = rng.chance(20) ? static_cast<int64_t>(1 + rng.below(1 << 30)) : 0;
  const size_t ndim = rng.below(4);
  for (size_t i = 0; i < ndim; ++i) m.shape.push_back(static_cast<int64_t>(1 + rng.below(64)));
  return m;
}

std::string negotiation_message(Rng& rng, size_t bit_bytes, bool with_failure) {
  MessageBuilder b;
  b.start();
  const size_t n = rng.below(4);
  for (size_t i = 0; i < n; ++i) {
    const std::string name = "grad." + std::to_string(rng.below(6));
    TensorMeta meta = some_meta(rng);
    if (with_failure && i == 0) {
      meta.kind = CollectiveKind::kLocalError;
      b.announce_failed(name, meta, CollectiveKind::kAllreduce, "bad dtype on this rank");
    } else {
      b.announce(name, meta);
    }
  }
  std::string bits(bit_bytes, '\0');
  for (char& c : bits) c = static_cast<char>(rng.below(256) & 0x0f);
  std::vector<std::string> aborts;
  if (rng.chance(20)) aborts.push_back("grad.1");
  std::string out;
  b.finish(static_cast<uint8_t>(rng.below(4)), bits, aborts, &out);
  return out;
}

Tally fuzz_negotiation(const Budget& budget) {
  constexpr int kSize = 3;
  constexpr int kCapacity = 16;
  Rng seed_rng(g_seed);
  std::vector<std::string> corpus;
  for (int i = 0; i < 32; ++i) corpus.push_back(negotiation_message(seed_rng, kCapacity / 8, i % 4 == 0));
  return run_iterations("negotiation", budget, [&](uint64_t, Rng& rng) {
    ResponseCache cache(kCapacity);
    // A few cached names, so cache bits map to entries.
    for (int i = 0; i < 4; ++i)
      cache.add("grad." + std::to_string(i), std::make_shared<const TensorMeta>(some_meta(rng)));
    Negotiation neg(kSize);
    neg.resize_bits(kCapacity);
    std::vector<std::string> messages;
    for (int r = 0; r < kSize; ++r) messages.push_back(corpus[rng.below(corpus.size())]);
    const size_t victim = rng.below(kSize);
    messages[victim] = mutate(messages[victim], corpus, rng);
    CycleNews news;
    try {
      neg.apply(messages, cache, 0.0, &news);
      // What the engine does with a cycle's messages next.
      neg.find_ready_bits(cache);
      std::vector<std::pair<TableEntry*, const std::string*>> ready;
      neg.ready_entries(&ready);
      for (auto& entry : ready) {
        std::string why;
        if (neg.agree(*entry.second, *entry.first, &why)) {
          const TensorMeta& m = neg.first_meta(*entry.first);
          volatile int64_t sink = m.elements() + m.row_elems();
          (void)sink;
        }
        (void)neg.missing_ranks(*entry.first);
      }
      for (auto& kv : neg.table()) {
        for (const auto& m : kv.second->metas) {
          if (!m) continue;
          volatile int64_t sink = m->elements() * 8 + m->row_elems();
          (void)sink;
        }
      }
      return true;
    } catch (const Error&) {
      return false;
    }
  });
}

// ---- target: collective headers (collective/op_header) -----------------------

std::string header_blob(Rng& rng, int n, bool alltoall) {
  std::string blob;
  const auto kind = alltoall ? CollectiveKind::kAlltoall : static_cast<CollectiveKind>(1 + rng.below(6));
  for (int r = 0; r < n; ++r) {
    OpHeader h;
    h.kind = static_cast<int32_t>(kind);
    h.dtype = 0;
    h.op = 0;
    h.root = 0;
    h.count = 16;
    h.row_elems = 4;
    h.out_count = kind == CollectiveKind::kAllgather ? 16 * n : -1;
    // The shape: mostly [4, 4], or the same elements otherwise arranged,
    // one longer than the header holds (a hash in its last slot), none, or
    // the hash of a grouped call's fused tensors.
    std::vector<int64_t> shape = {4, 4};
    if (rng.chance(25)) shape = {4, 2, 2};
    if (rng.chance(12)) shape.insert(shape.begin(), kShapeSlots + 2, 1);
    if (!rng.chance(15)) set_shape(h, shape.data(), static_cast<int>(shape.size()));
    if (kind == CollectiveKind::kAllreduce && rng.chance(10)) {  // tensors of a grouped call, fused
      const int64_t shapes = shape_hash(shape.data(), static_cast<int>(shape.size()), 0);
      set_shape(h, &shapes, kFusedShapes);
    }
    if (rng.chance(10)) {
      h.kind = static_cast<int32_t>(CollectiveKind::kLocalError);
      h.failed_kind = static_cast<int32_t>(kind);
      std::snprintf(h.reason, sizeof(h.reason), "allreduce: unsupported dtype");
    }
    blob.append(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  if (alltoall) {
    for (int i = 0; i < n * n; ++i) put_i64(&blob, 4);
  }
  return blob;
}

Tally fuzz_op_header(const Budget& budget) {
  Rng seed_rng(g_seed + 1);
  std::vector<std::string> corpus;
  for (int i = 0; i < 32; ++i) corpus.push_back(header_blob(seed_rng, 1 + i % 4, i % 3 == 0));
  return run_iterations("op_header", budget, [&](uint64_t, Rng& rng) {
    const std::string& seed = corpus[rng.below(corpus.size())];
    std::string data = mutate(seed, corpus, rng);
    // The exchange hands check_agreement n headers and, for alltoall, n*n
    // counts, whatever the bytes: sized as the seed's group.
    const OpHeader* first = reinterpret_cast<const OpHeader*>(seed.data());
    const bool alltoall = first->kind == static_cast<int32_t>(CollectiveKind::kAlltoall);
    size_t n = 1;
    while ((n + 1) * sizeof(OpHeader) + (alltoall ? (n + 1) * (n + 1) * 8 : 0) <= seed.size()) ++n;
    const size_t need = n * sizeof(OpHeader) + (alltoall ? n * n * 8 : 0);
    data.resize(need, '\0');
    std::vector<OpHeader> headers(n);
    std::vector<int> ranks(n);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(&headers[i], data.data() + i * sizeof(OpHeader), sizeof(OpHeader));
      ranks[i] = static_cast<int>(i);
    }
    std::vector<int64_t> counts;
    if (alltoall) {
      counts.resize(n * n);
      std::memcpy(counts.data(), data.data() + n * sizeof(OpHeader), n * n * 8);
    }
    bool ok = true;
    for (size_t me = 0; me < n; ++me) {
      try {
        check_agreement(headers, ranks, counts, static_cast<int>(me));
      } catch (const Error&) {
        ok = false;
      }
    }
    return ok;
  });
}

// ---- target: the rendezvous store server (handshake and requests) ------------

constexpr char kSecret[] = "fuzzing-secret-0123456789abcdef0123456789abcdef";

std::string store_proof_for(const std::string& context, const std::string& server_nonce,
                            const std::string& client_nonce) {
  const std::string msg = context + server_nonce + client_nonce;
  const Digest d = hmac_sha256(kSecret, msg.data(), msg.size());
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string store_request(uint8_t op, const std::string& key, const std::string& value) {
  std::string m(1, static_cast<char>(op));
  put_u64(&m, key.size());
  put_u64(&m, value.size());
  return m + key + value;
}

std::string i64_bytes(int64_t v) {
  std::string s;
  put_i64(&s, v);
  return s;
}

// The store server's liveness: a real client sets and reads a key.
void check_store_serves(int port, uint64_t round) {
  try {
    TcpStore client("127.0.0.1", port, kSecret, deadline_after(5));
    const std::string key = "fuzz/alive/" + std::to_string(round);
    client.set(key, "yes");
    if (client.get(key, std::chrono::milliseconds(2000)) != "yes")
      finding("the store server answered wrongly after fuzzing");
    if (client.add("fuzz/counter", 1) < 1) finding("the store server's counter went wrong after fuzzing");
  } catch (const Error& e) {
    finding(std::string("the store server stopped serving real clients: ") + e.what());
  }
}

Tally fuzz_store_server(const Budget& budget) {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  const int port = server.port();
  std::vector<std::string> requests = {
      store_request(1, "key", "value"),
      store_request(1, "ringcc/tcp/0", "127.0.0.1\n40000"),
      store_request(2, "key", i64_bytes(0)),
      store_request(2, "missing", i64_bytes(1)),
      store_request(3, "key", ""),
      store_request(3, "missing", ""),
      store_request(4, "counter", i64_bytes(1)),
      store_request(4, "key", i64_bytes(-5)),
      store_request(4, "counter", i64_bytes(INT64_MAX)),
      store_request(1, "", ""),
  };
  std::vector<std::string> corpus = requests;
  for (size_t i = 0; i + 1 < requests.size(); ++i) corpus.push_back(requests[i] + requests[i + 1]);
  Tally t = run_iterations("store_server", budget, [&](uint64_t it, Rng& rng) {
    const int fd = connect_loopback(port);
    if (fd < 0) finding("cannot connect to the store server");
    char greeting[6 + 32];
    if (!read_exact(fd, greeting, sizeof(greeting), 5000)) {
      ::close(fd);
      finding("the store server sent no greeting");
    }
    const std::string server_nonce(greeting + 6, 32);
    std::string client_nonce(32, '\0');
    for (char& c : client_nonce) c = static_cast<char>(rng.next());
    std::string answer = client_nonce + store_proof_for("ringcc-store-client", server_nonce, client_nonce);
    const bool mutate_handshake = rng.chance(30);
    std::string payload;
    if (mutate_handshake) {
      // A stranger: a wrong, garbled or replayed answer, maybe with requests.
      std::vector<std::string> hs_corpus = {answer, std::string(64, '\0')};
      payload = mutate(answer, hs_corpus, rng);
      if (rng.chance(50)) payload += corpus[rng.below(corpus.size())];
    } else {
      payload = answer;
      const std::string& seed = corpus[rng.below(corpus.size())];
      payload += mutate(seed, corpus, rng);
    }
    send_bytes(fd, payload);
    ::shutdown(fd, SHUT_WR);
    bool closed = false;
    const std::string reply = drain(fd, 4000, &closed);
    ::close(fd);
    // The server must close a connection whose client has finished sending
    // (after answering what was complete); a wait past the bound is a hang.
    if (!closed) finding("the store server neither answered nor closed within 4 s");
    const bool authenticated = reply.size() >= 33 && reply[0] == 1;
    if (authenticated && payload.compare(0, answer.size(), answer) != 0) {
      finding("the store server accepted a handshake whose proof was altered: " + hex(payload.substr(0, 64)));
    }
    if (it % 500 == 499) check_store_serves(port, it);
    return authenticated && reply.size() > 33;
  });
  check_store_serves(port, ~uint64_t(0));
  return t;
}

// ---- target: a link's acceptor (a listening rank) -----------------------------

Tally fuzz_link_acceptor(const Budget& budget) {
  const std::string job = "fuzz-job";
  constexpr int kSize = 3;
  auto rank0 = std::make_unique<TcpTransport>(0, kSize, kSecret, job, "127.0.0.1");
  const int port = rank0->listen_port();
  Tally t = run_iterations("link_acceptor", budget, [&](uint64_t, Rng& rng) {
    const int fd = connect_loopback(port);
    if (fd < 0) finding("cannot connect to the listening rank");
    char greeting[4 + 4 + 32];
    if (!read_exact(fd, greeting, sizeof(greeting), 5000)) {
      ::close(fd);
      finding("the listening rank sent no greeting");
    }
    const std::string acceptor_nonce(greeting + 8, 32);
    std::string nonce(32, '\0');
    for (char& c : nonce) c = static_cast<char>(rng.next());
    // A valid claim to be rank 2 (rank 1's place stays free for the real
    // peer at the end), then mutated.
    std::string claim("RCC2", 4);
    put_le32(&claim, 2);
    put_le32(&claim, 0);
    claim += nonce;
    const Digest proof = link_proof(kSecret, kLinkConnectorRole, job, 0, 2, 0, acceptor_nonce, nonce);
    claim.append(reinterpret_cast<const char*>(proof.data()), proof.size());
    std::vector<std::string> corpus = {claim, std::string("RCC2") + std::string(76, '\xff')};
    const std::string sent = mutate(claim, corpus, rng);
    send_bytes(fd, sent);
    ::shutdown(fd, SHUT_WR);
    bool closed = false;
    // An accepted claim's socket stays open (it is rank 2's link now).
    const std::string reply = drain(fd, 7000, &closed, 33);
    ::close(fd);
    const bool accepted = !reply.empty() && reply[0] == 1;
    if (accepted && sent.compare(0, claim.size(), claim) != 0) {
      finding("the listening rank accepted an altered claim: " + hex(sent));
    }
    if (!accepted && !closed) finding("the listening rank neither accepted nor closed within 7 s");
    return accepted;
  });
  // The real rank 1 still connects and data flows.
  try {
    TcpTransport rank1(1, kSize, kSecret, job, "127.0.0.1");
    std::vector<TcpPeerAddress> addresses(kSize);
    addresses[0] = {"127.0.0.1", port};
    addresses[1] = {"127.0.0.1", rank1.listen_port()};
    std::thread connector([&] { rank1.connect({0}, addresses, deadline_after(10)); });
    rank0->connect({1}, addresses, deadline_after(10));
    connector.join();
    uint64_t out = 0x1122334455667788ull, in = 0;
    auto s = rank1.isend(0, &out, sizeof(out));
    auto r = rank0->irecv(1, &in, sizeof(in));
    wait_all({s.get(), r.get()}, deadline_after(10), "fuzz check");
    if (in != out) finding("data between real ranks was altered after fuzzing the handshake");
  } catch (const Error& e) {
    finding(std::string("a real rank could not connect after fuzzing the handshake: ") + e.what());
  }
  return t;
}

// ---- target: a link's connector (a rank reaching a peer) ---------------------

Tally fuzz_link_connector(const Budget& budget) {
  const std::string job = "fuzz-job";
  Socket listener = Socket::listen("127.0.0.1", 0);
  const int port = listener.local_port();
  // One rank 1 throughout: each iteration is one more connect() to rank 0.
  TcpTransport rank1(1, 2, kSecret, job, "127.0.0.1");
  std::vector<TcpPeerAddress> addresses(2);
  addresses[0] = {"127.0.0.1", port};
  addresses[1] = {"127.0.0.1", rank1.listen_port()};
  int finished_pipe[2];  // the connector's thread writes a byte here when it is done
  if (::pipe2(finished_pipe, O_CLOEXEC | O_NONBLOCK) != 0) finding("pipe2 failed");
  Tally tally = run_iterations("link_connector", budget, [&](uint64_t, Rng& rng) {
    // This process plays rank 0 (a stranger, mostly): it answers rank 1's
    // connections (one per socket of the link, each after the one before
    // was accepted) with the right greeting and verdict, but for one of
    // them, mutated.
    const int sockets = TcpTransport::sockets_per_peer_from_env();
    const int mutated = static_cast<int>(rng.next() % static_cast<uint64_t>(sockets));
    const bool mutate_greeting = rng.chance(50);
    std::atomic<bool> result_ok{false};
    std::string error;
    std::thread connector([&] {
      try {
        rank1.connect({0}, addresses, deadline_after(3));
        result_ok = true;
      } catch (const Error& e) {
        error = e.what();
      }
      (void)!::write(finished_pipe[1], "x", 1);
    });
    bool altered = false;
    std::vector<int> fds;
    for (int index = 0; index < sockets; ++index) {
      // Rank 1 connects the next socket only once it accepted this one.
      pollfd ready[2] = {{listener.fd(), POLLIN, 0}, {finished_pipe[0], POLLIN, 0}};
      if (::poll(ready, 2, 10000) <= 0 || !(ready[0].revents & POLLIN)) {
        if (index == 0) finding("rank 1 never connected");
        break;
      }
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
      if (fd < 0) finding("rank 1's connection vanished");
      fds.push_back(fd);
      linger lg{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
      std::string nonce(32, '\0');
      for (char& c : nonce) c = static_cast<char>(rng.next());
      std::string greeting("RCC2", 4);
      put_le32(&greeting, 0);
      greeting += nonce;
      if (index == mutated && mutate_greeting) {
        const std::string g = mutate(greeting, {greeting}, rng);
        altered = altered || g != greeting;
        send_bytes(fd, g);
        ::shutdown(fd, SHUT_WR);
        continue;
      }
      send_bytes(fd, greeting);
      char claim[4 + 4 + 4 + 32 + 32];
      if (read_exact(fd, claim, sizeof(claim), 3000)) {
        const std::string their_nonce(claim + 12, 32);
        const Digest ours = link_proof(kSecret, kLinkAcceptorRole, job, 0, 1, index, nonce, their_nonce);
        std::string verdict(1, '\1');
        verdict.append(reinterpret_cast<const char*>(ours.data()), ours.size());
        std::string v = verdict;
        if (index == mutated) {
          v = mutate(verdict, {verdict}, rng);
          altered = altered || v.compare(0, verdict.size(), verdict) != 0;
        }
        send_bytes(fd, v);
      }
      if (index == mutated) ::shutdown(fd, SHUT_WR);
    }
    connector.join();
    char drained;
    while (::read(finished_pipe[0], &drained, 1) == 1) {
    }
    for (int fd : fds) ::close(fd);
    if (result_ok && altered) finding("rank 1 accepted an acceptor whose greeting or proof was altered");
    return result_ok.load();
  });
  ::close(finished_pipe[0]);
  ::close(finished_pipe[1]);
  return tally;
}

// ---- inputs that once got through ---------------------------------------------

// Each must be refused with ringcc::Error (under UBSan the old code
// overflowed int64 on them; without it, it accepted them).
void check_known_inputs() {
  g_target = "known_inputs";
  auto refused = [](const char* what, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error&) {
      return;
    }
    finding(std::string("accepted a known bad input: ") + what);
  };
  auto meta_with_shape = [](const std::vector<int64_t>& shape) {
    TensorMeta m;
    m.shape = shape;
    std::string bytes;
    m.serialize(&bytes);
    return bytes;
  };
  const std::vector<std::vector<int64_t>> bad_shapes = {
      {int64_t(1) << 62, 4}, {0, int64_t(1) << 62, 4}, {3, -1}, {INT64_MAX}};
  for (const auto& shape : bad_shapes) {
    const std::string bytes = meta_with_shape(shape);
    refused("a shape beyond 64 bits", [&] {
      size_t pos = 0;
      (void)TensorMeta::parse(bytes, &pos);
    });
  }
  std::vector<OpHeader> headers(2);
  for (auto& h : headers) {
    h.kind = static_cast<int32_t>(CollectiveKind::kAllgather);
    h.count = INT64_MAX / 2 + 1;
    h.row_elems = 1;
  }
  refused("allgather counts whose total overflows", [&] { check_agreement(headers, {0, 1}, {}, 0); });
  headers[1].count = -5;
  refused("a negative count", [&] { check_agreement(headers, {0, 1}, {}, 0); });
  for (auto& h : headers) {
    h.kind = static_cast<int32_t>(CollectiveKind::kAlltoall);
    h.count = 4;
  }
  refused("alltoall counts whose total overflows",
          [&] { check_agreement(headers, {0, 1}, {INT64_MAX, INT64_MAX, 1, 1}, 0); });
  refused("missing alltoall counts", [&] { check_agreement(headers, {0, 1}, {}, 0); });
  for (auto& h : headers) {
    h.kind = static_cast<int32_t>(CollectiveKind::kAllreduce);
    const int64_t dims[] = {2, 2};
    set_shape(h, dims, 2);
  }
  headers[1].shape[1] = -2;
  refused("a negative dimension in a header", [&] { check_agreement(headers, {0, 1}, {}, 0); });
  headers[1].shape[1] = 2;
  headers[1].ndim = -7;
  refused("a header's impossible number of dimensions", [&] { check_agreement(headers, {0, 1}, {}, 0); });
  std::printf("%-15s %9d inputs, every one refused\n", "known_inputs", static_cast<int>(bad_shapes.size()) + 6);
}

// ---- the watchdog ------------------------------------------------------------

void watchdog(double hang_s, std::atomic<bool>* done) {
  while (!done->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t started = g_iteration_started_ns.load();
    if (started != 0 && now_ns() - started > static_cast<int64_t>(hang_s * 1e9)) {
      std::fprintf(stderr, "\nringcc_fuzz: an input ran for more than %.0f s (a hang)\n", hang_s);
      report_current_input();
      std::_Exit(3);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "all";
  Budget budget;
  double hang_s = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--target") {
      target = value();
    } else if (a == "--seconds") {
      budget.seconds = std::atof(value().c_str());
    } else if (a == "--iterations") {
      budget.iterations = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--seed") {
      g_seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--replay") {
      budget.replay = std::strtoll(value().c_str(), nullptr, 10);
    } else if (a == "--hang-s") {
      hang_s = std::atof(value().c_str());
    } else if (a == "--max-alloc-mb") {
      g_max_alloc_bytes = size_t(std::strtoull(value().c_str(), nullptr, 10)) << 20;
    } else {
      std::fprintf(stderr, "unknown argument %s (see tests/fuzz/fuzz_decoders.cc)\n", a.c_str());
      return 2;
    }
  }
  // Refused connections are logged as warnings; thousands of them are noise here.
  setenv("RINGCC_LOG_LEVEL", "error", 0);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGSEGV, on_fatal_signal);
  signal(SIGBUS, on_fatal_signal);
  signal(SIGFPE, on_fatal_signal);
  signal(SIGABRT, on_fatal_signal);
#ifdef RINGCC_FUZZ_HAVE_SANITIZER_HOOKS
  __sanitizer_set_death_callback(report_current_input);
#endif

  const std::vector<std::pair<std::string, std::function<Tally(const Budget&)>>> targets = {
      {"negotiation", fuzz_negotiation},       {"op_header", fuzz_op_header},
      {"store_server", fuzz_store_server},     {"link_acceptor", fuzz_link_acceptor},
      {"link_connector", fuzz_link_connector},
  };
  std::vector<std::pair<std::string, std::function<Tally(const Budget&)>>> chosen;
  for (const auto& t : targets) {
    if (target == "all" || target == t.first) chosen.push_back(t);
  }
  if (chosen.empty()) {
    std::fprintf(stderr, "unknown target %s\n", target.c_str());
    return 2;
  }
  // With --seconds and several targets, each gets its share.
  Budget each = budget;
  if (!budget.iterations && budget.replay < 0) each.seconds = budget.seconds / static_cast<double>(chosen.size());

  check_known_inputs();

  std::atomic<bool> done{false};
  std::thread dog(watchdog, hang_s, &done);
  uint64_t total = 0;
  for (const auto& t : chosen) {
    const int64_t start = now_ns();
    const Tally tally = t.second(each);
    const double secs = static_cast<double>(now_ns() - start) / 1e9;
    std::printf("%-15s %9" PRIu64 " iterations %9" PRIu64 " rejected %9" PRIu64 " accepted %7.1f s %9.0f/s\n",
                t.first.c_str(), tally.iterations, tally.rejected, tally.accepted, secs,
                secs > 0 ? static_cast<double>(tally.iterations) / secs : 0.0);
    std::fflush(stdout);
    total += tally.iterations;
  }
  done = true;
  dog.join();
  std::printf("ringcc_fuzz: %" PRIu64 " iterations, seed %" PRIu64 ", no findings\n", total, g_seed);
  return 0;
}
