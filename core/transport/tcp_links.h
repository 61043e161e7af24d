// The TCP links of a job: every rank listens, publishes where it is reached
// through the rendezvous store, and connects to the others (the higher
// rank of each pair connects, the lower accepts).
//
// Every rank on this host: links listen on, and are reached at, 127.0.0.1.
// Across hosts, an interface chosen by name or address (RINGCC_SOCKET_IFNAME
// and the like) gives both, unless RINGCC_LISTEN_ADDR / RINGCC_ADVERTISE_ADDR
// say; else the address the rendezvous store was reached from, else the
// host name.
#pragma once

#include <memory>
#include <string>

#include "core/base/deadline.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp_transport.h"

namespace ringcc {

struct TcpLinks {
  std::unique_ptr<TcpTransport> transport;
  std::string advertise_address;  // where the peers reach this rank
};

// advertise_hint: where the job's launcher says peers reach this rank ("" if it does not).
TcpLinks connect_tcp_links(Store& store, int rank, int size, const std::string& secret, const std::string& job_id,
                           bool all_local, const std::string& advertise_hint, Deadline deadline);

}  // namespace ringcc
