#include "core/os/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/os/socket.h"

namespace ringcc {
namespace {

// The variables read, most specific first.
constexpr const char* kInterfaceVariables[] = {"RINGCC_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "GLOO_SOCKET_IFNAME",
                                               "NCCL_SOCKET_IFNAME"};

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> split_items(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// A numeric address, with its family and bytes (scope and brackets dropped).
struct Numeric {
  bool ipv6 = false;
  unsigned char bytes[16] = {};
};

bool parse_numeric(const std::string& text, Numeric* out) {
  std::string bare = unbracket_host(text);
  const size_t percent = bare.find('%');
  if (percent != std::string::npos) bare = bare.substr(0, percent);
  if (::inet_pton(AF_INET, bare.c_str(), out->bytes) == 1) {
    out->ipv6 = false;
    return true;
  }
  if (::inet_pton(AF_INET6, bare.c_str(), out->bytes) == 1) {
    out->ipv6 = true;
    return true;
  }
  return false;
}

bool same_address(const Numeric& a, const Numeric& b) {
  return a.ipv6 == b.ipv6 && std::memcmp(a.bytes, b.bytes, a.ipv6 ? 16 : 4) == 0;
}

bool in_subnet(const Numeric& addr, const Numeric& net, int prefix_bits) {
  if (addr.ipv6 != net.ipv6) return false;
  for (int bit = 0; bit < prefix_bits; ++bit) {
    const int byte = bit / 8, mask = 0x80 >> (bit % 8);
    if ((addr.bytes[byte] & mask) != (net.bytes[byte] & mask)) return false;
  }
  return true;
}

bool family_allows(AddressFamily family, const LocalAddress& a) {
  return family == AddressFamily::kAny || (family == AddressFamily::kIpv6) == a.ipv6;
}

// How good an address of a chosen interface is: IPv4, then global IPv6, then link-local.
int preference(const LocalAddress& a) { return a.link_local ? 2 : (a.ipv6 ? 1 : 0); }

// The best address of `interface` among `addresses`, or nullptr.
const LocalAddress* best_of(const std::string& interface, const std::vector<LocalAddress>& addresses,
                            AddressFamily family) {
  const LocalAddress* best = nullptr;
  for (const LocalAddress& a : addresses) {
    if (a.interface != interface || !family_allows(family, a)) continue;
    if (best == nullptr || preference(a) < preference(*best)) best = &a;
  }
  return best;
}

std::string family_text(AddressFamily family) {
  return family == AddressFamily::kIpv4   ? " with an IPv4 address"
         : family == AddressFamily::kIpv6 ? " with an IPv6 address"
                                          : "";
}

std::string describe(const std::vector<LocalAddress>& addresses) {
  std::string text;
  for (const LocalAddress& a : addresses) text += (text.empty() ? "" : ", ") + a.interface + " " + a.address;
  return text.empty() ? "none" : text;
}

}  // namespace

std::vector<LocalAddress> local_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) raise(ErrorKind::kInternal, "getifaddrs() failed: ", std::strerror(errno));
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    LocalAddress a;
    a.interface = i->ifa_name;
    a.ipv6 = family == AF_INET6;
    a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    a.address = sockaddr_host(i->ifa_addr);
    if (a.ipv6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      a.link_local = IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
    } else {
      a.link_local = starts_with(a.address, "169.254.");
    }
    out.push_back(a);
  }
  ::freeifaddrs(list);
  return out;
}

AddressFamily socket_family_from_env() {
  std::string variable = "RINGCC_SOCKET_FAMILY";
  std::string value = env_str("RINGCC_SOCKET_FAMILY", "");
  if (value.empty()) {
    variable = "NCCL_SOCKET_FAMILY";
    value = env_str("NCCL_SOCKET_FAMILY", "");
  }
  if (value.empty()) return AddressFamily::kAny;
  if (value == "ipv4" || value == "AF_INET") return AddressFamily::kIpv4;
  if (value == "ipv6" || value == "AF_INET6") return AddressFamily::kIpv6;
  raise(ErrorKind::kInvalidArgument, variable, " must be ipv4 or ipv6 (AF_INET or AF_INET6), got '", value, "'");
}

SocketInterface choose_socket_interface(const std::string& spec, const std::string& variable,
                                        const std::vector<LocalAddress>& addresses, AddressFamily family) {
  SocketInterface chosen;
  chosen.variable = variable;
  chosen.spec = spec;
  const std::vector<std::string> items = split_items(spec);
  RINGCC_CHECK(!items.empty(), ErrorKind::kInvalidArgument, variable, " is set but names no interface");
  auto take = [&](const LocalAddress& a) {
    chosen.interface = a.interface;
    chosen.address = a.address;
    return chosen;
  };

  if (items.front()[0] == '^') {
    for (const LocalAddress& a : addresses) {
      if (a.loopback || !family_allows(family, a)) continue;
      bool excluded = false;
      for (const std::string& item : items) {
        const std::string prefix = item[0] == '^' ? item.substr(1) : item;
        excluded |= !prefix.empty() && starts_with(a.interface, prefix);
      }
      if (!excluded) return take(*best_of(a.interface, addresses, family));
    }
  } else {
    for (const std::string& item : items) {
      const size_t slash = item.find('/');
      Numeric numeric;
      if (slash != std::string::npos && parse_numeric(item.substr(0, slash), &numeric)) {
        char* end = nullptr;
        const long bits = std::strtol(item.c_str() + slash + 1, &end, 10);
        RINGCC_CHECK(end != nullptr && *end == '\0' && bits >= 0 && bits <= (numeric.ipv6 ? 128 : 32),
                     ErrorKind::kInvalidArgument, variable, "=", spec, ": '", item, "' is not a subnet");
        for (const LocalAddress& a : addresses) {
          Numeric mine;
          if (family_allows(family, a) && parse_numeric(a.address, &mine) &&
              in_subnet(mine, numeric, static_cast<int>(bits))) {
            return take(a);
          }
        }
        continue;
      }
      if (parse_numeric(item, &numeric)) {
        for (const LocalAddress& a : addresses) {
          Numeric mine;
          if (parse_numeric(a.address, &mine) && same_address(mine, numeric)) return take(a);
        }
        continue;
      }
      const bool exact_only = item[0] == '=';
      const std::string name = exact_only ? item.substr(1) : item;
      if (const LocalAddress* a = best_of(name, addresses, family)) return take(*a);
      if (exact_only) continue;
      for (const LocalAddress& a : addresses) {
        if (!a.loopback && family_allows(family, a) && starts_with(a.interface, name)) {
          return take(*best_of(a.interface, addresses, family));
        }
      }
    }
  }
  raise(ErrorKind::kInvalidArgument, variable, "=", spec, " matches no interface of ", host_name(), " that is up",
        family_text(family), " (here: ", describe(addresses), ")");
}

std::string socket_interface_setting() {
  for (const char* name : kInterfaceVariables) {
    const std::string value = trim(env_str(name, ""));
    if (!value.empty()) return std::string(name) + "=" + value;
  }
  return "";
}

SocketInterface socket_interface_from_env() {
  for (const char* variable : kInterfaceVariables) {
    const std::string spec = trim(env_str(variable, ""));
    if (!spec.empty()) return choose_socket_interface(spec, variable, local_addresses(), socket_family_from_env());
  }
  return SocketInterface{};
}

std::string listen_address_from_env() {
  const std::string address = env_str("RINGCC_LISTEN_ADDR", "");
  if (address.empty()) return address;
  try {
    Socket::listen(address, 0, 1);
  } catch (const Error& e) {
    raise(ErrorKind::kInvalidArgument, e.what(), " (RINGCC_LISTEN_ADDR=", address,
          ": it must be an address of this host, or 0.0.0.0 / :: for all of them)");
  }
  return address;
}

}  // namespace ringcc
