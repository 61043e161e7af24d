#include "core/rendezvous/slurm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/sha256.h"

namespace ringcc {

namespace {

constexpr size_t kMostHosts = 1000000;

[[noreturn]] void bad_list(const std::string& text, const std::string& why) {
  raise(ErrorKind::kInvalidArgument, "cannot read SLURM host list '", text.substr(0, 200),
        text.size() > 200 ? "...'" : "'", ": ", why);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "01-04,07" -> 01 02 03 04 07.
std::vector<std::string> expand_ranges(const std::string& ranges, const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = ranges.find(',', start);
    const std::string range = ranges.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) {
      bad_list(text, "'" + range + "' in brackets is not a number or a range of numbers (such as 01-04)");
    }
    const long first = std::strtol(lo.c_str(), nullptr, 10);
    const long last = std::strtol(hi.c_str(), nullptr, 10);
    if (last < first) bad_list(text, "the range '" + range + "' ends below its start");
    if (static_cast<size_t>(last - first) + out.size() >= kMostHosts) bad_list(text, "more than a million hosts");
    for (long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out.push_back(digits);
    }
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// One name of the list, brackets and all: "r[1-2]n[1-2]".
void expand_name(const std::string& name, const std::string& text, std::vector<std::string>* out) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos) bad_list(text, "']' without '['");
    out->push_back(name);
    return;
  }
  const size_t close = name.find(']', open);
  if (close == std::string::npos) bad_list(text, "'[' without ']'");
  const std::string prefix = name.substr(0, open);
  if (prefix.find(']') != std::string::npos) bad_list(text, "']' without '['");
  const std::string inner = name.substr(open + 1, close - open - 1);
  if (inner.find('[') != std::string::npos) bad_list(text, "'[' inside brackets");
  std::vector<std::string> rests;
  expand_name(name.substr(close + 1), text, &rests);
  for (const std::string& value : expand_ranges(inner, text)) {
    for (const std::string& rest : rests) {
      if (out->size() >= kMostHosts) bad_list(text, "more than a million hosts");
      out->push_back(prefix + value + rest);
    }
  }
}

const char* node_list_variable() {
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (env_is_set(var) && !env_str(var, "").empty()) return var;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> expand_slurm_host_list(const std::string& text) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) bad_list(text, "']' without '['");
    if (depth > 1) bad_list(text, "'[' inside brackets");
    if (c != ',' || depth != 0) continue;
    const std::string name = text.substr(start, i - start);
    if (name.empty()) bad_list(text, "an empty host name");
    expand_name(name, text, &hosts);
    start = i + 1;
  }
  if (depth != 0) bad_list(text, "'[' without ']'");
  for (const std::string& host : hosts) {
    if (host.empty()) bad_list(text, "an empty host name");
  }
  return hosts;
}

std::vector<int> slurm_store_ports(const std::string& identity, const std::string& salt) {
  std::vector<int> ports;
  for (int i = 0; static_cast<int>(ports.size()) < kSlurmStorePorts && i < 4 * kSlurmStorePorts; ++i) {
    const std::string text = identity + "/" + salt + "/" + std::to_string(i);
    const Digest d = sha256(text.data(), text.size());
    const uint32_t word = (uint32_t{d[0]} << 24) | (uint32_t{d[1]} << 16) | (uint32_t{d[2]} << 8) | uint32_t{d[3]};
    const int port = kSlurmFirstPort + static_cast<int>(word % kSlurmPortRange);
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  return ports;
}

void fill_store_from_slurm(const std::string& identity, std::string* addr, std::vector<int>* ports, std::string* why) {
  std::string how;
  if (addr->empty()) {
    const char* var = node_list_variable();
    if (var == nullptr) {
      raise(ErrorKind::kInvalidArgument,
            "ranks found from SLURM (SLURM_PROCID/SLURM_NTASKS) but SLURM gives no node "
            "list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST): start the ranks with srun, or set RINGCC_MASTER_ADDR "
            "and RINGCC_MASTER_PORT");
    }
    *addr = expand_slurm_host_list(env_str(var, "")).front();
    how = std::string("the first node of ") + var;
  }
  if (ports->empty()) {
    *ports = slurm_store_ports(identity, "store");
    how += std::string(how.empty() ? "" : ", ") + "a port derived from " + identity;
  }
  *why = how;
}

std::string slurm_rank0_misplaced(const std::string& addr) {
  std::string here = env_str("SLURMD_NODENAME", "");
  if (here.empty()) return "";
  auto short_name = [](const std::string& name) { return name.substr(0, name.find('.')); };
  if (short_name(here) == short_name(addr)) return "";
  return "rank 0 runs on SLURM node " + here + ", not on " + addr +
         ", the first node of the step, where the other ranks look for its rendezvous store (a task distribution "
         "that does not put task 0 on the first node, such as -m arbitrary?): set RINGCC_MASTER_ADDR to rank 0's "
         "host";
}

}  // namespace ringcc
