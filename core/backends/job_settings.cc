#include "core/backends/job_settings.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/backends/mpi/mpi_collectives.h"
#include "core/algorithms/ring_algorithms.h"
#include "core/algorithms/shm_collectives.h"
#include "core/transport/tcp_transport.h"

namespace ringcc {

namespace {

struct SharedSetting {
  const char* name;
  const char* horovod_name;  // read when ours is unset, or null
  std::function<std::string()> value;  // as the component uses it; may raise
};

std::vector<SharedSetting> shared_settings() {
  auto num = [](auto v) { return std::to_string(v); };
  std::vector<SharedSetting> list = {
      {"RINGCC_TRANSPORT", nullptr, [] { return env_str("RINGCC_TRANSPORT", "auto"); }},
      {"RINGCC_SHM_AREA_BYTES", nullptr, [num] { return num(ShmCollectives::area_bytes_from_env()); }},
      {"RINGCC_SHM_SMALL_BYTES", nullptr, [num] { return num(ShmCollectives::small_bytes_from_env()); }},
      {"RINGCC_TCP_SOCKETS", nullptr, [num] { return num(TcpTransport::sockets_from_env()); }},
      {"RINGCC_TCP_STRIPE_BYTES", nullptr, [num] { return num(TcpTransport::stripe_bytes_from_env()); }},
      {"RINGCC_CHUNK_BYTES", nullptr, [num] { return num(ring_chunk_bytes_from_env()); }},
      {"RINGCC_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE",
       [] {
         return std::string(
             env_int("RINGCC_HIERARCHICAL_ALLREDUCE", 1, "HOROVOD_HIERARCHICAL_ALLREDUCE") != 0 ? "1" : "0");
       }},
      // As EngineOptions::from_env() and the communicator read them.
      {"RINGCC_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD",
       [num] { return num(env_int("RINGCC_FUSION_THRESHOLD", 64 << 20, "HOROVOD_FUSION_THRESHOLD")); }},
      {"RINGCC_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY",
       [num] {
         return num(std::max(static_cast<int>(env_int("RINGCC_CACHE_CAPACITY", 1024, "HOROVOD_CACHE_CAPACITY")), 0));
       }},
  };
  // The MPI transport's algorithm choices matter only where it carries the
  // data (a different RINGCC_TRANSPORT is reported on its own).
  if (env_str("RINGCC_TRANSPORT", "auto") == "mpi") {
    list.push_back({"RINGCC_MPI_ALGORITHM", nullptr, [num] { return num(MpiCollectives::algorithm_from_env()); }});
    list.push_back({"RINGCC_MPI_RING_BYTES", nullptr, [num] { return num(MpiCollectives::ring_bytes_from_env()); }});
    list.push_back({"RINGCC_MPI_INLINE_BYTES", nullptr, [num] { return num(MpiCollectives::inline_bytes_from_env()); }});
  }
  return list;
}

struct Entry {
  std::string value;
  std::string origin;
};

std::map<std::string, Entry> parse(const std::string& text, std::vector<std::string>* order) {
  std::map<std::string, Entry> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? std::string::npos : line.find('\t', a + 1);
    if (b == std::string::npos) continue;
    const std::string name = line.substr(0, a);
    if (std::find(order->begin(), order->end(), name) == order->end()) order->push_back(name);
    out[name] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
  }
  return out;
}

bool invalid(const Entry& e) { return !e.value.empty() && e.value[0] == '!'; }

std::string shown(const Entry& e) {
  if (invalid(e)) return "invalid: " + e.value.substr(1);
  return e.value + (e.origin.empty() ? " (default)" : " (" + e.origin + ")");
}

}  // namespace

std::string shared_settings_text() {
  std::string text;
  for (const auto& s : shared_settings()) {
    std::string value;
    try {
      value = s.value();
    } catch (const std::exception& e) {
      value = std::string("!") + e.what();
    }
    // One line per setting: no tabs or newlines inside the fields.
    std::string origin = env_origin(s.name, s.horovod_name);
    for (std::string* field : {&value, &origin}) {
      std::replace_if(field->begin(), field->end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
    }
    text += std::string(s.name) + "\t" + value + "\t" + origin + "\n";
  }
  return text;
}

std::string compare_shared_settings(const std::vector<std::string>& texts, int my_rank,
                                    bool* kind_invalid) {
  *kind_invalid = false;
  const int n = static_cast<int>(texts.size());
  std::vector<std::string> order;
  std::vector<std::map<std::string, Entry>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(parse(texts[static_cast<size_t>(r)], &order));
  // A value this rank cannot parse is its own argument error.
  for (const auto& [name, e] : ranks[static_cast<size_t>(my_rank)]) {
    if (invalid(e)) {
      *kind_invalid = true;
      return e.value.substr(1);
    }
  }
  std::string problems;
  for (const std::string& name : order) {
    auto entry_of = [&](int r) -> const Entry* {
      auto it = ranks[static_cast<size_t>(r)].find(name);
      return it == ranks[static_cast<size_t>(r)].end() ? nullptr : &it->second;
    };
    bool differs = false;
    for (int r = 0; r < n; ++r) {
      const Entry* e = entry_of(r);
      const Entry* first = entry_of(0);
      differs = differs || !e || invalid(*e) || !first || e->value != first->value;
    }
    if (!differs) continue;
    std::ostringstream line;
    line << name << " (";
    for (int r = 0; r < n; ++r) {
      const Entry* e = entry_of(r);
      line << (r ? ", " : "") << "rank " << r << ": " << (e ? shown(*e) : std::string("not checked"));
    }
    line << ")";
    problems += (problems.empty() ? "" : "; ") + line.str();
  }
  if (problems.empty()) return "";
  return "settings that must be the same on every rank differ: " + problems;
}

}  // namespace ringcc
