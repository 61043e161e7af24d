#include "core/rendezvous/topology.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/base/error.h"
#include "core/os/shm_segment.h"
#include "core/os/socket.h"
#include "core/os/wait_policy.h"

namespace ringcc {

Topology topology_of(const std::vector<std::string>& hosts, int rank) {
  Topology t;
  t.rank = rank;
  t.size = static_cast<int>(hosts.size());
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  std::vector<int> local_rank_of(hosts.size());
  std::map<std::string, int> per_host;
  t.local_ranks.clear();
  for (size_t r = 0; r < hosts.size(); ++r) {
    local_rank_of[r] = per_host[hosts[r]]++;
    if (hosts[r] == mine) t.local_ranks.push_back(static_cast<int>(r));
  }
  t.local_size = static_cast<int>(t.local_ranks.size());
  t.local_rank = local_rank_of[static_cast<size_t>(rank)];
  t.local_rank_of = local_rank_of;
  t.hosts = static_cast<int>(per_host.size());
  for (const auto& entry : per_host) t.homogeneous = t.homogeneous && entry.second == t.local_size;
  t.cross_ranks.clear();
  t.cross_rank = 0;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (local_rank_of[r] != t.local_rank) continue;
    if (static_cast<int>(r) < rank) ++t.cross_rank;
    t.cross_ranks.push_back(static_cast<int>(r));
  }
  t.cross_size = static_cast<int>(t.cross_ranks.size());
  return t;
}

namespace {

constexpr size_t kMaskWords = CPU_SETSIZE / 64;

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  for (char c : id) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != '-') return "";
  }
  return id;
}

std::vector<uint64_t> my_cpu_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<uint64_t> mask;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return mask;
  mask.assign(kMaskWords, 0);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) mask[static_cast<size_t>(c / 64)] |= uint64_t{1} << (c % 64);
  }
  while (!mask.empty() && mask.back() == 0) mask.pop_back();
  return mask;
}

}  // namespace

RankPlace RankPlace::mine() {
  RankPlace p;
  p.host = host_name();
  p.pid = getpid();
  p.pid_namespace = pid_namespace_id();
  p.machine = boot_id();
  p.cpu_mask = my_cpu_mask();
  return p;
}

std::string RankPlace::text() const {
  std::string out = host + "\n" + std::to_string(pid) + " " + std::to_string(pid_namespace);
  if (!machine.empty() && !cpu_mask.empty()) {
    out += " " + machine + " ";
    char word[17];
    for (size_t w = 0; w < cpu_mask.size(); ++w) {
      std::snprintf(word, sizeof(word), "%016llx", static_cast<unsigned long long>(cpu_mask[w]));
      out += (w ? "," : "") + std::string(word);
    }
  }
  return out;
}

RankPlace RankPlace::parse(const std::string& text, std::string* rest) {
  RankPlace p;
  const size_t first = text.find('\n');
  p.host = text.substr(0, first);
  const size_t second = first == std::string::npos ? std::string::npos : text.find('\n', first + 1);
  if (first != std::string::npos) {
    long long pid = 0;
    unsigned long long ns = 0;
    const std::string ids = text.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
    if (std::sscanf(ids.c_str(), "%lld %llu", &pid, &ns) == 2) {
      p.pid = pid;
      p.pid_namespace = ns;
    }
    std::istringstream fields(ids);
    std::string skip, machine, mask;
    if (fields >> skip >> skip >> machine >> mask) {
      std::vector<uint64_t> words;
      std::istringstream in(mask);
      std::string word;
      bool good = true;
      while (good && std::getline(in, word, ',') && words.size() < kMaskWords) {
        good = word.size() == 16 && word.find_first_not_of("0123456789abcdef") == std::string::npos;
        if (good) words.push_back(std::stoull(word, nullptr, 16));
      }
      if (good && !words.empty()) {
        p.machine = machine;
        p.cpu_mask = std::move(words);
      }
    }
  }
  *rest = second == std::string::npos ? "" : text.substr(second + 1);
  return p;
}

MachineSharing machine_sharing(const std::vector<RankPlace>& places, int rank) {
  const RankPlace& me = places[static_cast<size_t>(rank)];
  MachineSharing sharing;
  if (me.machine.empty()) return sharing;
  std::vector<uint64_t> all(kMaskWords, 0);
  int ranks = 0;
  for (const RankPlace& p : places) {
    if (p.machine.empty()) return sharing;
    if (p.machine != me.machine) continue;
    ++ranks;
    for (size_t w = 0; w < p.cpu_mask.size() && w < all.size(); ++w) all[w] |= p.cpu_mask[w];
  }
  int cpus = 0;
  for (uint64_t w : all) cpus += __builtin_popcountll(w);
  sharing.ranks = ranks;
  sharing.cpus = cpus;
  return sharing;
}

Topology topology_of(const std::vector<RankPlace>& places, int rank) {
  std::vector<std::string> hosts;
  std::map<std::string, std::pair<int, std::vector<uint64_t>>> machines;  // ranks, CPUs together
  bool known = true;
  for (const RankPlace& p : places) {
    hosts.push_back(p.host);
    known = known && !p.machine.empty();
    auto& [ranks, mask] = machines[p.machine];
    ++ranks;
    mask.resize(std::max(mask.size(), p.cpu_mask.size()), 0);
    for (size_t w = 0; w < p.cpu_mask.size(); ++w) mask[w] |= p.cpu_mask[w];
  }
  Topology t = topology_of(hosts, rank);
  if (!known) return t;
  double fewest = -1;
  for (const auto& [machine, use] : machines) {
    int cpus = 0;
    for (uint64_t w : use.second) cpus += __builtin_popcountll(w);
    const double per_rank = static_cast<double>(cpus) / use.first;
    if (fewest < 0 || per_rank < fewest) fewest = per_rank;
  }
  t.cpus_per_rank = std::max(fewest, 0.0);
  return t;
}

void note_machine_sharing(const std::vector<RankPlace>& places, int rank) {
  const MachineSharing sharing = machine_sharing(places, rank);
  if (sharing.cpus > 0) note_host_sharing(sharing.ranks, sharing.cpus);
}

namespace {

// True when pid is a live process of this user in this pid namespace.
bool process_of_this_user(int64_t pid) {
  if (pid <= 0 || pid > INT32_MAX || !process_alive(static_cast<int>(pid))) return false;
  struct stat st{};
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == geteuid();
}

std::string said(int r, const RankPlace& p) {
  std::string host;
  for (char c : p.host.substr(0, 64)) host += (c >= 0x20 && c < 0x7f) ? c : '?';
  return "rank " + std::to_string(r) + " says it runs on '" + host + "' as process " + std::to_string(p.pid);
}

}  // namespace

void confirm_places(const std::vector<RankPlace>& places, int rank, const std::string& launcher_single_host) {
  const RankPlace& me = places[static_cast<size_t>(rank)];
  for (size_t r = 0; r < places.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    const RankPlace& p = places[r];
    if (!launcher_single_host.empty() && p.host != me.host) {
      raise(ErrorKind::kInvalidArgument, said(static_cast<int>(r), p), ", but this rank's launcher says every rank runs on this host, '",
            me.host, "' (", launcher_single_host,
            "): a process that is not one of this job's ranks wrote to the rendezvous store");
    }
    if (p.host == me.host && me.pid_namespace != 0 && p.pid_namespace == me.pid_namespace &&
        !process_of_this_user(p.pid)) {
      // No process at all with that pid: most likely that rank died after it
      // wrote its place (the job stops either way; only the words differ).
      if (p.pid > 0 && p.pid <= INT32_MAX && !process_alive(static_cast<int>(p.pid))) {
        raise(ErrorKind::kPeerFailure, said(static_cast<int>(r), p),
              ", in this rank's pid namespace, but no process has that pid here now: rank ", r,
              " exited or was killed during the rendezvous (or a process that is not one of this job's ranks wrote "
              "to the rendezvous store)");
      }
      raise(ErrorKind::kInvalidArgument, said(static_cast<int>(r), p),
            ", in this rank's pid namespace, but no process of this user has that pid here: a process that is not "
            "one of this job's ranks wrote to the rendezvous store");
    }
  }
}

}  // namespace ringcc
