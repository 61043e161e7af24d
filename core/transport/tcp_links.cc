#include "core/transport/tcp_links.h"

#include <vector>

#include "core/base/env.h"
#include "core/base/log.h"
#include "core/os/net_interface.h"
#include "core/os/socket.h"
#include "core/rendezvous/meeting.h"
#include "core/rendezvous/tcp_store.h"

namespace ringcc {

TcpLinks connect_tcp_links(Store& store, int rank, int size, const std::string& secret, const std::string& job_id,
                           bool all_local, const std::string& advertise_hint, Deadline deadline) {
  TcpLinks links;
  const SocketInterface iface = all_local ? SocketInterface{} : socket_interface_from_env();
  std::string listen = all_local ? "127.0.0.1" : listen_address_from_env();
  if (listen.empty()) listen = iface.address;
  links.transport = std::make_unique<TcpTransport>(rank, size, secret, job_id, listen);
  std::string addr = all_local ? "127.0.0.1" : env_str("RINGCC_ADVERTISE_ADDR", advertise_hint);
  if (addr.empty()) addr = iface.address;
  if (addr.empty()) {
    if (TcpStore* tcp_store = store.rank0_store()) addr = tcp_store->local_address();
  }
  if (addr.empty()) addr = host_name();
  links.advertise_address = addr;
  const int port = links.transport->listen_port();
  if (!iface.variable.empty()) {
    RINGCC_LOG(kDebug, "links listen on ", endpoint_text(listen.empty() ? "*" : listen, port), ", reached at ", addr,
               " (interface ", iface.interface, " from ", iface.variable, "=", iface.spec, ")");
  }
  store.set("ringcc/tcp/" + std::to_string(rank), addr + "\n" + std::to_string(port));
  std::vector<TcpPeerAddress> addresses(static_cast<size_t>(size));
  std::vector<int> peers;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    auto lines = split_lines(store.get("ringcc/tcp/" + std::to_string(r), until(deadline)));
    addresses[static_cast<size_t>(r)] = {lines.at(0), std::stoi(lines.at(1))};
    peers.push_back(r);
  }
  links.transport->connect(peers, addresses, deadline);
  return links;
}

}  // namespace ringcc
