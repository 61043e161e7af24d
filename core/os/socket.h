// Thin RAII wrappers over BSD sockets with deadline-bounded I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/base/deadline.h"

struct sockaddr;

namespace ringcc {

// An owned file descriptor of a socket; closes on destruction. Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  int release();

  // Listens on host:port (port 0 picks a free port). host: a name, an IPv4
  // or IPv6 address (brackets allowed: "[fd00::1]"); "" listens on every
  // address, IPv6 and IPv4 (IPv4 only without IPv6), "0.0.0.0" on every IPv4
  // one, "::" on every IPv6 and IPv4 one. Raises Error(kInternal) on failure.
  static Socket listen(const std::string& host, int port, int backlog = 128);
  // Connects to host:port, retrying refused connections until deadline
  // (the server may not be up yet); every address of the host (IPv6, IPv4)
  // is tried in turn. Raises Error(kTimeout) naming the address when the
  // deadline passes.
  static Socket connect(const std::string& host, int port, Deadline deadline);
  // Like connect(), but a listener that keeps refusing for refused_limit is
  // taken to be gone: raises Error(kPeerFailure) then instead of waiting for
  // the deadline. For servers that were reached before (a refusal means the
  // process behind the port has exited).
  static Socket connect(const std::string& host, int port, Deadline deadline, std::chrono::milliseconds refused_limit);
  // Accepts one connection, waiting at most until deadline; returns an
  // invalid Socket on timeout.
  Socket accept(Deadline deadline, std::string* peer_addr = nullptr) const;

  // Port this socket is bound to, and the local address it uses (IPv4
  // dotted, or IPv6 text; an IPv4 address mapped into IPv6 as IPv4).
  int local_port() const;
  std::string local_address() const;

  void set_nodelay(bool on);
  void set_nonblocking(bool on);
  // Asks for large kernel buffers (SO_SNDBUF / SO_RCVBUF); best effort.
  void set_buffer_sizes(int bytes);
  // The socket's TCP congestion control ("" when it cannot be read), and a
  // request for another by name (TCP_CONGESTION): false when the kernel
  // refuses it (not built in, or not in
  // net.ipv4.tcp_allowed_congestion_control for an unprivileged process).
  std::string congestion_control() const;
  bool set_congestion_control(const std::string& name);

  // Blocking I/O bounded by deadline. Raise Error(kPeerFailure) when the
  // peer closed the connection or reset it, Error(kTimeout) at deadline.
  // `who` names the peer in messages ("rank 3", "the rendezvous store").
  void send_all(const void* data, size_t size, Deadline deadline, const std::string& who) const;
  void recv_all(void* data, size_t size, Deadline deadline, const std::string& who) const;

 private:
  int fd_ = -1;
};

// "[fd00::1]" -> "fd00::1"; anything else unchanged.
std::string unbracket_host(const std::string& host);
// "host:port", or "[v6 address]:port".
std::string endpoint_text(const std::string& host, int port);

// Raises this process's soft limit on open files to its hard limit; true
// if it rose. For a process that holds sockets to every peer.
bool raise_open_files_limit();
// The numeric host of a socket address (IPv4-mapped IPv6 as IPv4), and
// "host:port" / "[v6]:port" with its port.
std::string sockaddr_host(const sockaddr* addr);
std::string sockaddr_endpoint(const sockaddr* addr);
// The host of an endpoint_text ("10.0.0.1:5000" -> "10.0.0.1",
// "[fd00::1]:5000" -> "fd00::1").
std::string endpoint_host(const std::string& endpoint);

// This host's name (gethostname), or RINGCC_HOSTNAME when set.
std::string host_name();

}  // namespace ringcc
