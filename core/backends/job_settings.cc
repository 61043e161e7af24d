#include "core/backends/job_settings.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "core/backends/registry.h"
#include "core/base/env.h"
#include "core/base/error.h"

namespace ringcc {

namespace {

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

std::string compare_shared_settings(const std::vector<std::string>& texts, int my_rank, bool* kind_invalid) {
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

std::string transport_from_env() {
  const std::string mode = env_str("RINGCC_TRANSPORT", "auto");
  if (mode != "auto" && mode != "tcp" && mode != "shm" && mode != "mpi") {
    raise(ErrorKind::kInvalidArgument, "RINGCC_TRANSPORT must be auto, tcp, shm or mpi, got '", mode, "'");
  }
  return mode;
}

}  // namespace ringcc
