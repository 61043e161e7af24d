// Tests of the socket layer, SHA-256/HMAC, environment and logging helpers,
// and the TCP rendezvous store. Exits non-zero on any failure.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/sha256.h"
#include "core/os/socket.h"
#include "core/rendezvous/tcp_store.h"

using namespace ringcc;
using std::chrono::milliseconds;

namespace {

std::atomic<int> g_failures{0};

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                 \
    }                                                                               \
  } while (0)

#define CHECK_EQ(a, b)                                                                        \
  do {                                                                                        \
    auto va = (a);                                                                            \
    auto vb = (b);                                                                            \
    if (!(va == vb)) {                                                                        \
      std::fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s\n", __FILE__, __LINE__, #a, #b); \
      ++g_failures;                                                                           \
    }                                                                                         \
  } while (0)

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) ++n;
  return n;
}

// Runs fn and checks that it raises an Error of `kind` whose message holds
// `part`.
void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& part, int line) {
  try {
    fn();
    std::fprintf(stderr, "line %d: expected an error containing '%s', got none\n", line, part.c_str());
    ++g_failures;
  } catch (const Error& e) {
    if (e.kind() != kind || !contains(e.what(), part)) {
      std::fprintf(stderr, "line %d: expected kind %d with '%s', got kind %d: %s\n", line, int(kind), part.c_str(),
                   int(e.kind()), e.what());
      ++g_failures;
    }
  }
}
#define EXPECT_ERROR(stmt, kind, part) expect_error([&] { stmt; }, ErrorKind::kind, part, __LINE__)

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string hex_digest(const Digest& d) { return to_hex(d.data(), d.size()); }

std::string sha_hex(const std::string& s) { return hex_digest(sha256(s.data(), s.size())); }

std::string hmac_hex(const std::string& key, const std::string& data) {
  return hex_digest(hmac_sha256(key, data.data(), data.size()));
}

// A thread that is joined on destruction and counts an exception escaping
// its function as a failure, so a failing check cannot abort the program.
class TestThread {
 public:
  template <typename F>
  explicit TestThread(F fn)
      : thread_([fn = std::move(fn)] {
          try {
            fn();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "unexpected exception in a test thread: %s\n", e.what());
            ++g_failures;
          }
        }) {}
  TestThread(TestThread&&) = default;
  ~TestThread() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

// Redirects stderr to a temporary file while alive; text() reads what was
// written so far.
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/ringcc_test_stderr_XXXXXX";
    fd_ = ::mkstemp(path);
    ::unlink(path);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(fd_, STDERR_FILENO);
  }
  ~StderrCapture() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(fd_);
  }
  std::string text() const {
    std::string out;
    char buf[4096];
    for (off_t off = 0;;) {
      ssize_t n = ::pread(fd_, buf, sizeof(buf), off);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return out;
  }
  // Waits (bounded) until the captured text holds `part` `times` times.
  bool wait_for(const std::string& part, int times = 1, double seconds = 2.0) const {
    auto deadline = deadline_after(seconds);
    for (;;) {
      if (count(text(), part) >= times) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

 private:
  int fd_ = -1;
  int saved_ = -1;
};

// A port on which nothing listens (bound, read, released).
int unused_port() {
  Socket s = Socket::listen("127.0.0.1", 0);
  return s.local_port();
}

// ---------------------------------------------------------------------------

void test_sha256() {
  CHECK_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK_EQ(sha_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the padding boundaries.
  CHECK_EQ(sha_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK_EQ(sha_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK_EQ(sha_hex(std::string(63, 'a')), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  CHECK_EQ(sha_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK_EQ(sha_hex(std::string(65, 'a')), "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0");
  CHECK_EQ(sha_hex(std::string(119, 'a')), "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  CHECK_EQ(sha_hex(std::string(120, 'a')), "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

void test_hmac_rfc4231() {
  CHECK_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
           "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
           "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK_EQ(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
           "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4.push_back(static_cast<char>(i));
  CHECK_EQ(hmac_hex(key4, std::string(50, '\xcd')), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test cases 6 and 7: keys longer than a block are hashed first.
  CHECK_EQ(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
           "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK_EQ(hmac_hex(std::string(131, '\xaa'),
                    "This is a test using a larger than block-size key and a larger than "
                    "block-size data. The key needs to be hashed before being used by the HMAC "
                    "algorithm."),
           "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

void test_digest_helpers() {
  Digest a = sha256("x", 1), b = sha256("x", 1), c = sha256("y", 1);
  CHECK(digest_equal(a, b));
  CHECK(!digest_equal(a, c));
  b[31] ^= 1;
  CHECK(!digest_equal(a, b));

  uint8_t r1[64] = {0}, r2[64] = {0};
  random_bytes(r1, sizeof(r1));
  random_bytes(r2, sizeof(r2));
  CHECK(std::memcmp(r1, r2, sizeof(r1)) != 0);
  const uint8_t bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  CHECK_EQ(to_hex(bytes, 4), "000fa5ff");
}

void test_env() {
  ::unsetenv("RINGCC_TEST_VALUE");
  ::unsetenv("HOROVOD_TEST_VALUE");
  CHECK(!env_is_set("RINGCC_TEST_VALUE"));
  CHECK_EQ(env_int("RINGCC_TEST_VALUE", 7, "HOROVOD_TEST_VALUE"), 7);
  ::setenv("HOROVOD_TEST_VALUE", "12", 1);
  CHECK_EQ(env_int("RINGCC_TEST_VALUE", 7, "HOROVOD_TEST_VALUE"), 12);
  ::setenv("RINGCC_TEST_VALUE", " 34 ", 1);
  CHECK_EQ(env_int("RINGCC_TEST_VALUE", 7, "HOROVOD_TEST_VALUE"), 34);
  CHECK_EQ(env_str("RINGCC_TEST_VALUE", "x"), " 34 ");
  ::setenv("RINGCC_TEST_VALUE", "2.5", 1);
  CHECK_EQ(env_double("RINGCC_TEST_VALUE", 1.0), 2.5);
  EXPECT_ERROR(env_int("RINGCC_TEST_VALUE", 0), kInvalidArgument, "RINGCC_TEST_VALUE must be a number, got '2.5'");
  ::setenv("RINGCC_TEST_VALUE", "fast", 1);
  EXPECT_ERROR(env_double("RINGCC_TEST_VALUE", 0), kInvalidArgument, "RINGCC_TEST_VALUE must be a number, got 'fast'");
  ::setenv("RINGCC_TEST_VALUE", "", 1);  // empty counts as unset
  CHECK_EQ(env_str("RINGCC_TEST_VALUE", "d"), "d");
  // Settings with a range refuse what lies outside it, naming the variable read.
  CHECK_EQ(env_int_in("RINGCC_TEST_VALUE", 5, 0, 10), 5);
  ::setenv("HOROVOD_TEST_VALUE", "-3", 1);
  EXPECT_ERROR(env_int_in("RINGCC_TEST_VALUE", 5, 0, 10, "HOROVOD_TEST_VALUE"), kInvalidArgument,
               "HOROVOD_TEST_VALUE=-3: the value must be from 0 to 10");
  ::setenv("RINGCC_TEST_VALUE", "10", 1);
  CHECK_EQ(env_int_in("RINGCC_TEST_VALUE", 5, 0, 10, "HOROVOD_TEST_VALUE"), 10);
  ::setenv("RINGCC_TEST_VALUE", "11", 1);
  EXPECT_ERROR(env_int_in("RINGCC_TEST_VALUE", 5, 0, 10), kInvalidArgument, "RINGCC_TEST_VALUE=11: the value must be");
  ::setenv("RINGCC_TEST_VALUE", "-0.5", 1);
  EXPECT_ERROR(env_double_at_least("RINGCC_TEST_VALUE", 1.0, 0.0), kInvalidArgument,
               "RINGCC_TEST_VALUE=-0.5: the value must be at least 0");
  ::setenv("RINGCC_TEST_VALUE", "0", 1);
  CHECK_EQ(env_double_at_least("RINGCC_TEST_VALUE", 1.0, 0.0), 0.0);
  ::setenv("RINGCC_FUSION_THRESHOLD", "-1", 1);
  EXPECT_ERROR(fusion_threshold_from_env(), kInvalidArgument,
               "RINGCC_FUSION_THRESHOLD=-1: the value must be at least 0");
  ::unsetenv("RINGCC_FUSION_THRESHOLD");
  ::setenv("HOROVOD_CACHE_CAPACITY", "4294967296", 1);  // would wrap in an int
  EXPECT_ERROR(cache_capacity_from_env(), kInvalidArgument, "HOROVOD_CACHE_CAPACITY=4294967296");
  ::unsetenv("HOROVOD_CACHE_CAPACITY");
  ::unsetenv("RINGCC_TEST_VALUE");
  ::unsetenv("HOROVOD_TEST_VALUE");

  ::unsetenv("RINGCC_TIMEOUT_S");
  ::unsetenv("HOROVOD_GLOO_TIMEOUT_SECONDS");
  CHECK_EQ(timeout_seconds(), 60.0);
  ::setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", "90", 1);
  CHECK_EQ(timeout_seconds(), 90.0);
  ::setenv("RINGCC_TIMEOUT_S", "abc", 1);
  EXPECT_ERROR(timeout_seconds(), kInvalidArgument, "RINGCC_TIMEOUT_S must be a number, got 'abc'");
  ::setenv("RINGCC_TIMEOUT_S", "-1", 1);
  EXPECT_ERROR(timeout_seconds(), kInvalidArgument, "RINGCC_TIMEOUT_S");
  ::unsetenv("RINGCC_TIMEOUT_S");
  ::unsetenv("HOROVOD_GLOO_TIMEOUT_SECONDS");

  ::setenv("RINGCC_HOSTNAME", "node-7", 1);
  CHECK_EQ(host_name(), "node-7");
  ::unsetenv("RINGCC_HOSTNAME");
  CHECK(!host_name().empty());
}

void test_log() {
  ::setenv("RINGCC_LOG_LEVEL", "INFO", 1);
  CHECK(log_enabled(LogLevel::kInfo));
  CHECK(!log_enabled(LogLevel::kDebug));
  {
    StderrCapture capture;
    RINGCC_LOG(kInfo, "hello ", 42);
    RINGCC_LOG(kDebug, "hidden");
    set_log_rank(3);
    RINGCC_LOG(kWarning, "ranked");
    // [ringcc <UTC time> <host> [rank R ]pid P] LEVEL: message
    const std::string host = host_name();
    const std::string pid = std::to_string(::getpid());
    const std::string time = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";
    const std::regex expected("\\[ringcc " + time + " " + host + " pid " + pid +
                              "\\] INFO: hello 42\n"
                              "\\[ringcc " +
                              time + " " + host + " rank 3 pid " + pid + "\\] WARNING: ranked\n");
    CHECK(std::regex_match(capture.text(), expected));
  }
  ::unsetenv("RINGCC_LOG_LEVEL");
  ::setenv("HOROVOD_LOG_LEVEL", "error", 1);
  CHECK(!log_enabled(LogLevel::kWarning));
  CHECK(log_enabled(LogLevel::kError));
  ::unsetenv("HOROVOD_LOG_LEVEL");
  CHECK(log_enabled(LogLevel::kWarning));
  CHECK(!log_enabled(LogLevel::kInfo));
  set_log_rank(-1);
}

void test_socket_io() {
  Socket listener = Socket::listen("127.0.0.1", 0);
  const int port = listener.local_port();
  CHECK(port > 0);
  Socket client = Socket::connect("localhost", port, deadline_after(2));
  std::string peer;
  Socket server = listener.accept(deadline_after(2), &peer);
  CHECK(server.valid());
  CHECK(contains(peer, "127.0.0.1:"));
  CHECK_EQ(client.local_address(), "127.0.0.1");
  client.set_nodelay(true);
  // 0 leaves the buffers to the kernel's tuning; a size is asked for (the
  // kernel doubles it, within its caps).
  auto rcvbuf = [](const Socket& s) {
    int v = 0;
    socklen_t len = sizeof(v);
    CHECK(::getsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &v, &len) == 0);
    return v;
  };
  const int tuned = rcvbuf(server);
  server.set_buffer_sizes(0);
  CHECK_EQ(rcvbuf(server), tuned);
  server.set_buffer_sizes(64 << 10);
  CHECK_EQ(rcvbuf(server), 128 << 10);
  client.set_buffer_sizes(1 << 20);
  // The congestion control reads back as asked for; reno is built into
  // every kernel and allowed to every process. A name the kernel does not
  // know is refused and changes nothing.
  CHECK(!client.congestion_control().empty());
  CHECK(client.set_congestion_control("reno"));
  CHECK_EQ(client.congestion_control(), "reno");
  CHECK(!client.set_congestion_control("no-such-congestion-control"));
  CHECK_EQ(client.congestion_control(), "reno");
  CHECK_EQ(Socket().congestion_control(), "");

  // A payload larger than the socket buffers, sent and received concurrently.
  std::string out(8 << 20, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 131);
  TestThread sender([&] { client.send_all(out.data(), out.size(), deadline_after(5), "peer"); });
  std::string in(out.size(), '\0');
  server.recv_all(&in[0], in.size(), deadline_after(5), "peer");
  sender.join();
  CHECK(in == out);

  // Nothing to read: times out near the deadline, naming the peer.
  auto start = Clock::now();
  char byte;
  EXPECT_ERROR(server.recv_all(&byte, 1, deadline_after(0.2), "rank 3"), kTimeout,
               "timed out after 0.2 s waiting for rank 3");
  CHECK(seconds_since(start) >= 0.19 && seconds_since(start) < 1.0);

  // No accept pending: returns an invalid socket at the deadline.
  CHECK(!listener.accept(deadline_after(0.05)).valid());

  client.close();
  EXPECT_ERROR(server.recv_all(&byte, 1, deadline_after(2), "rank 1"), kPeerFailure, "rank 1 closed the connection");
  // Writing to a closed peer fails (EPIPE or reset), never with SIGPIPE.
  std::string chunk(1 << 20, 'x');
  EXPECT_ERROR(for (int i = 0; i < 16; ++i) server.send_all(chunk.data(), chunk.size(), deadline_after(2), "rank 1"),
               kPeerFailure, "rank 1");

  // Nobody listening: retries until the deadline, then names the address.
  int dead_port = unused_port();
  start = Clock::now();
  EXPECT_ERROR(Socket::connect("127.0.0.1", dead_port, deadline_after(0.3)), kTimeout,
               "timed out connecting to 127.0.0.1:" + std::to_string(dead_port));
  CHECK(seconds_since(start) >= 0.29 && seconds_since(start) < 1.5);

  // A listener that comes up while connect() is retrying is reached.
  int late_port = unused_port();
  TestThread late([&] {
    std::this_thread::sleep_for(milliseconds(150));
    Socket l = Socket::listen("127.0.0.1", late_port);
    Socket a = l.accept(deadline_after(2));
    CHECK(a.valid());
  });
  Socket late_client = Socket::connect("127.0.0.1", late_port, deadline_after(3));
  CHECK(late_client.valid());
  late.join();

  EXPECT_ERROR(Socket::listen("127.0.0.1", port), kInternal, "cannot listen on 127.0.0.1:" + std::to_string(port));
  EXPECT_ERROR(Socket::connect("no-such-host.invalid", 1, deadline_after(1)), kInvalidArgument, "no-such-host.invalid");
}

// ---------------------------------------------------------------------------

const std::string kSecret = "job secret \x01\x02";

void test_store_basics() {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  CHECK(server.port() > 0);
  TcpStore store("127.0.0.1", server.port(), kSecret, deadline_after(5));
  CHECK_EQ(store.local_address(), "127.0.0.1");

  store.set("a", "1");
  CHECK_EQ(store.get("a", milliseconds(1000)), "1");
  store.set("a", std::string("x\0y", 3));  // overwrite; binary values
  CHECK_EQ(store.get("a", milliseconds(1000)), std::string("x\0y", 3));
  store.set("", "");
  CHECK_EQ(store.get("", milliseconds(1000)), "");

  std::string value;
  CHECK(!store.try_get("missing", &value));
  CHECK(store.try_get("a", &value));
  CHECK_EQ(value, std::string("x\0y", 3));

  CHECK_EQ(store.add("counter", 5), 5);
  CHECK_EQ(store.add("counter", -2), 3);
  CHECK_EQ(store.get("counter", milliseconds(1000)), "3");
  EXPECT_ERROR(store.add("a", 1), kInvalidArgument, "not an integer");
  store.set("big", "9223372036854775807");
  EXPECT_ERROR(store.add("big", 1), kInvalidArgument, "overflows");
  CHECK_EQ(store.get("counter", milliseconds(1000)), "3");  // still usable

  std::string large(16 << 20, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i % 251);
  store.set("large", large);
  CHECK(store.get("large", milliseconds(5000)) == large);

  // A second client sees the same data.
  TcpStore other("127.0.0.1", server.port(), kSecret, deadline_after(5));
  CHECK_EQ(other.add("counter", 1), 4);
}

void test_store_blocking_get() {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  TcpStore reader("127.0.0.1", server.port(), kSecret, deadline_after(5));
  TcpStore writer("127.0.0.1", server.port(), kSecret, deadline_after(5));

  // Answered by a set from another client.
  TestThread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    writer.set("late", "value");
  });
  auto start = Clock::now();
  CHECK_EQ(reader.get("late", milliseconds(5000)), "value");
  CHECK(seconds_since(start) >= 0.09 && seconds_since(start) < 2.0);
  setter.join();

  // Answered by an add, and by a set from another thread on the same client
  // (the blocked get must not hold up that thread's request).
  TestThread adder([&] {
    std::this_thread::sleep_for(milliseconds(50));
    reader.add("count", 2);
    reader.set("same-client", "ok");
  });
  CHECK_EQ(reader.get("count", milliseconds(5000)), "2");
  CHECK_EQ(reader.get("same-client", milliseconds(5000)), "ok");
  adder.join();

  // Several waiters on one key are all answered.
  std::vector<TestThread> waiters;
  std::atomic<int> answered{0};
  for (int i = 0; i < 8; ++i) {
    waiters.emplace_back([&] {
      if (reader.get("shared", milliseconds(5000)) == "go") ++answered;
    });
  }
  std::this_thread::sleep_for(milliseconds(100));
  writer.set("shared", "go");
  for (auto& t : waiters) t.join();
  CHECK_EQ(answered.load(), 8);

  // Timeout: raised near the requested time, naming key and address.
  start = Clock::now();
  EXPECT_ERROR(reader.get("never", milliseconds(300)), kTimeout,
               "timed out after 0.3 s waiting for key 'never' in the rendezvous store at "
               "127.0.0.1:" +
                   std::to_string(server.port()));
  CHECK(seconds_since(start) >= 0.29 && seconds_since(start) < 2.0);
  EXPECT_ERROR(reader.get("never", milliseconds(0)), kTimeout, "key 'never'");
  // The connection stays usable after a timeout.
  writer.set("never", "now");
  CHECK_EQ(reader.get("never", milliseconds(1000)), "now");
}

void test_store_many_clients() {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  constexpr int kClients = 200;
  std::atomic<int> ok{0};
  std::vector<TestThread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        TcpStore store("127.0.0.1", server.port(), kSecret, deadline_after(10));
        store.add("arrived", 1);
        store.set("rank/" + std::to_string(i), std::to_string(i * 10));
        std::string next = store.get("rank/" + std::to_string((i + 1) % kClients), milliseconds(10000));
        if (next == std::to_string(((i + 1) % kClients) * 10)) ++ok;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "client %d: %s\n", i, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK_EQ(ok.load(), kClients);
  TcpStore check("127.0.0.1", server.port(), kSecret, deadline_after(5));
  CHECK_EQ(check.get("arrived", milliseconds(1000)), std::to_string(kClients));
}

void test_store_authentication() {
  TcpStoreServer server("127.0.0.1", 0, kSecret);
  const std::string addr = "127.0.0.1:" + std::to_string(server.port());
  TcpStore good("127.0.0.1", server.port(), kSecret, deadline_after(5));
  good.set("k", "v");
  {
    StderrCapture capture;
    EXPECT_ERROR(TcpStore("127.0.0.1", server.port(), "wrong", deadline_after(5)), kPeerFailure,
                 "the rendezvous store at " + addr + " refused our credentials (RINGCC_SECRET differs?");
    CHECK(capture.wait_for("refused a connection from 127.0.0.1:"));
    CHECK(contains(capture.text(), ": authentication failed"));
    EXPECT_ERROR(TcpStore("127.0.0.1", server.port(), "", deadline_after(5)), kPeerFailure, "refused our credentials");
    // A second refusal from the same address within seconds is counted,
    // not logged: strangers may connect as often as they like.
    CHECK(!capture.wait_for(": authentication failed", 2, 0.3));
  }
  CHECK_EQ(good.get("k", milliseconds(1000)), "v");

  // A connection that never answers the challenge does not hold up others.
  Socket silent = Socket::connect("127.0.0.1", server.port(), deadline_after(2));
  good.set("k2", "v2");
  CHECK_EQ(good.get("k2", milliseconds(1000)), "v2");

  // A server without a secret and a client with one disagree clearly.
  TcpStoreServer open_server("127.0.0.1", 0, "");
  EXPECT_ERROR(TcpStore("127.0.0.1", open_server.port(), kSecret, deadline_after(5)), kPeerFailure,
               "RINGCC_SECRET differs?");
  TcpStore open_client("127.0.0.1", open_server.port(), "", deadline_after(5));
  CHECK_EQ(open_client.add("n", 1), 1);
}

// Sends bytes on a raw connection and checks that the server hangs up.
void send_garbage_expect_close(int port, const std::string& bytes) {
  Socket raw = Socket::connect("127.0.0.1", port, deadline_after(2));
  raw.send_all(bytes.data(), bytes.size(), deadline_after(2), "store");
  char buf[256];
  bool closed = false;
  try {
    for (int i = 0; i < 100; ++i) raw.recv_all(buf, 1, deadline_after(2), "store");
  } catch (const Error& e) {
    closed = e.kind() == ErrorKind::kPeerFailure;
  }
  CHECK(closed);
}

void test_store_garbage() {
  StderrCapture quiet;  // the server logs a warning per bad connection
  for (const std::string& secret : {std::string(), kSecret}) {
    TcpStoreServer server("127.0.0.1", 0, secret);
    TcpStore store("127.0.0.1", server.port(), secret, deadline_after(5));
    store.set("k", "v");

    std::string junk(4096, '\0');
    random_bytes(&junk[0], junk.size());
    junk[0] = '\x7f';  // not a valid op
    send_garbage_expect_close(server.port(), junk);

    // A header promising an enormous key or value.
    std::string huge(17, '\0');
    huge[0] = 1;
    for (int i = 1; i < 17; ++i) huge[i] = '\xff';
    if (secret.empty()) {
      send_garbage_expect_close(server.port(), huge);
    } else {
      send_garbage_expect_close(server.port(), std::string(64, 'A') + huge);  // nonce and proof
    }

    // Half a request, then disconnect.
    {
      Socket raw = Socket::connect("127.0.0.1", server.port(), deadline_after(2));
      raw.send_all("\x01\x05", 2, deadline_after(2), "store");
    }
    CHECK_EQ(store.get("k", milliseconds(1000)), "v");
    CHECK_EQ(store.add("alive", 1), 1);
  }
}

// A client that asks for a large value and never reads the reply must not
// hold up the server.
void test_store_slow_reader() {
  TcpStoreServer server("127.0.0.1", 0, "");
  TcpStore store("127.0.0.1", server.port(), "", deadline_after(5));
  store.set("large", std::string(64 << 20, 'x'));

  Socket slow = Socket::connect("127.0.0.1", server.port(), deadline_after(2));
  char greeting[6];
  slow.recv_all(greeting, sizeof(greeting), deadline_after(2), "store");
  std::string request(1, '\x02');  // get
  for (uint64_t v : {uint64_t(5), uint64_t(8)}) {
    for (int i = 0; i < 8; ++i) request.push_back(static_cast<char>(v >> (8 * i)));
  }
  request += "large";
  for (int i = 0; i < 8; ++i) request.push_back(static_cast<char>(uint64_t(1000) >> (8 * i)));
  slow.send_all(request.data(), request.size(), deadline_after(2), "store");
  std::this_thread::sleep_for(milliseconds(50));

  auto start = Clock::now();
  for (int i = 0; i < 100; ++i) store.add("n", 1);
  CHECK_EQ(store.get("n", milliseconds(1000)), "100");
  CHECK(seconds_since(start) < 1.0);
}

void test_store_server_shutdown() {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, kSecret);
  const int port = server->port();
  TcpStore idle("127.0.0.1", port, kSecret, deadline_after(5));
  TcpStore waiting("127.0.0.1", port, kSecret, deadline_after(5));
  idle.set("k", "v");
  Socket raw = Socket::connect("127.0.0.1", port, deadline_after(2));  // mid-handshake

  std::atomic<bool> got_failure{false};
  TestThread blocked([&] {
    try {
      waiting.get("never", milliseconds(10000));
    } catch (const Error& e) {
      got_failure = e.kind() == ErrorKind::kPeerFailure &&
                    contains(e.what(), "the rendezvous store at 127.0.0.1:" + std::to_string(port) +
                                           " (rank 0) closed the connection");
      if (!got_failure) std::fprintf(stderr, "unexpected: %s\n", e.what());
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  auto start = Clock::now();
  server.reset();  // must neither hang nor crash with clients connected
  CHECK(seconds_since(start) < 2.0);
  blocked.join();
  CHECK(got_failure.load());
  CHECK(seconds_since(start) < 3.0);

  EXPECT_ERROR(idle.get("k", milliseconds(1000)), kPeerFailure, "(rank 0) closed the connection");
  // Later requests fail fast with the same message.
  start = Clock::now();
  EXPECT_ERROR(idle.set("k", "v"), kPeerFailure, "(rank 0) closed the connection");
  CHECK(seconds_since(start) < 0.5);
}

void test_store_connect_timeout() {
  int port = unused_port();
  auto start = Clock::now();
  EXPECT_ERROR(TcpStore("127.0.0.1", port, kSecret, deadline_after(0.3)), kTimeout,
               "timed out connecting to 127.0.0.1:" + std::to_string(port));
  CHECK(seconds_since(start) < 1.5);

  // A server that starts while the client is retrying is reached.
  std::unique_ptr<TcpStoreServer> server;
  TestThread starter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port, kSecret);
  });
  TcpStore store("127.0.0.1", port, kSecret, deadline_after(5));
  starter.join();
  store.set("up", "yes");
  CHECK_EQ(store.get("up", milliseconds(1000)), "yes");
}

struct Test {
  const char* name;
  void (*fn)();
};

}  // namespace

int main() {
  ::unsetenv("RINGCC_LOG_LEVEL");
  ::unsetenv("HOROVOD_LOG_LEVEL");
  const Test tests[] = {
      {"sha256", test_sha256},
      {"hmac_rfc4231", test_hmac_rfc4231},
      {"digest_helpers", test_digest_helpers},
      {"env", test_env},
      {"log", test_log},
      {"socket_io", test_socket_io},
      {"store_basics", test_store_basics},
      {"store_blocking_get", test_store_blocking_get},
      {"store_many_clients", test_store_many_clients},
      {"store_authentication", test_store_authentication},
      {"store_garbage", test_store_garbage},
      {"store_slow_reader", test_store_slow_reader},
      {"store_server_shutdown", test_store_server_shutdown},
      {"store_connect_timeout", test_store_connect_timeout},
  };
  for (const Test& t : tests) {
    int before = g_failures;
    auto start = Clock::now();
    try {
      t.fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unexpected exception: %s\n", t.name, e.what());
      ++g_failures;
    }
    std::printf("%-24s %s (%.2f s)\n", t.name, g_failures == before ? "ok" : "FAILED", seconds_since(start));
    std::fflush(stdout);
  }
  if (g_failures != 0) {
    std::printf("%d check(s) failed\n", g_failures.load());
    return 1;
  }
  std::printf("all tests passed\n");
  return 0;
}
