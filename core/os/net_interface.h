// Choosing the network interface that ranks use to reach each other across
// hosts, by name or by address, as Horovod, gloo and NCCL users set it.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

// One address of one interface of this host (getifaddrs).
struct LocalAddress {
  std::string interface;
  std::string address;  // numeric; IPv6 link-local ones with "%interface"
  bool ipv6 = false;
  bool loopback = false;
  bool link_local = false;  // IPv6 fe80::/10 (IPv4 169.254/16 too)
};

// Every IPv4 and IPv6 address of the interfaces that are up, in the order
// the system lists them.
std::vector<LocalAddress> local_addresses();

// Which address families a choice may take: RINGCC_SOCKET_FAMILY ("ipv4" or
// "ipv6"), else NCCL_SOCKET_FAMILY ("AF_INET" or "AF_INET6"); unset: both,
// IPv4 first.
enum class AddressFamily { kAny, kIpv4, kIpv6 };
AddressFamily socket_family_from_env();

struct SocketInterface {
  std::string variable;   // the variable that chose it; empty when none is set
  std::string spec;       // its value
  std::string interface;  // the interface chosen
  std::string address;    // its address: where the links listen and are reached
};

// The interface named by RINGCC_SOCKET_IFNAME, else HOROVOD_GLOO_IFACE,
// GLOO_SOCKET_IFNAME or NCCL_SOCKET_IFNAME (the first that is set). The
// value is a list separated by commas, tried in order; each item is
//   - an interface name: that interface, else the first whose name starts
//     with it (NCCL's rule; "=eth0" takes eth0 only),
//   - an address (IPv4, or IPv6 with or without brackets): the interface
//     that holds it,
//   - a subnet, "10.1.0.0/16" or "fd00:1::/64": the first address in it;
// or the whole list starts with "^": every interface whose name starts with
// none of the items ("^docker,lo"). Loopback interfaces are taken only when
// named exactly. Within the interface, an IPv4 address is preferred, then a
// global IPv6 one, then a link-local one (socket_family_from_env narrows
// this). Returns an empty SocketInterface when no variable is set; raises
// Error(kInvalidArgument) naming the variable and listing this host's
// interfaces when nothing matches.
SocketInterface socket_interface_from_env();
// "NAME=value" of the variable socket_interface_from_env() reads ("" when
// none is set), for messages.
std::string socket_interface_setting();

// RINGCC_LISTEN_ADDR: the address a rank's store and links listen on
// ("" when unset: the interface's, else every address). Raises
// Error(kInvalidArgument) naming the variable when this host cannot listen
// there (not one of its addresses), rather than let a store or a link fail
// later with a message that blames its port.
std::string listen_address_from_env();

// The choice for one value, among `addresses` (socket_interface_from_env's
// rules); for tests and messages.
SocketInterface choose_socket_interface(const std::string& spec, const std::string& variable,
                                        const std::vector<LocalAddress>& addresses, AddressFamily family);

}  // namespace ringcc
