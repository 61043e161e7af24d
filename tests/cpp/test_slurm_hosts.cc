// Unit tests of what the core reads from SLURM (core/rendezvous/slurm.h):
// the compressed host list, expanded in full or refused with a message
// naming it, and the ports derived from a step's name, which must equal
// those ringcc/slurm.py derives (tests/unit/test_slurm_variables.py holds
// the same values).
//
// Exits 0 when every check passes, 1 otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/rendezvous/slurm.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

using Names = std::vector<std::string>;

// The message of the error that expanding `text` raises, "" when none.
std::string refusal(const std::string& text) {
  try {
    expand_slurm_host_list(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void test_expansion() {
  EXPECT(expand_slurm_host_list("node1") == Names({"node1"}));
  EXPECT(expand_slurm_host_list("a,b,c") == Names({"a", "b", "c"}));
  EXPECT(expand_slurm_host_list("node[01-04,07],gpu-a[1-2]") ==
         Names({"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"}));
  EXPECT(expand_slurm_host_list("n[8-11]") == Names({"n8", "n9", "n10", "n11"}));
  EXPECT(expand_slurm_host_list("n[098-101]") == Names({"n098", "n099", "n100", "n101"}));
  EXPECT(expand_slurm_host_list("r[1-2]n[08-10]") == Names({"r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"}));
  EXPECT(expand_slurm_host_list("x[3]-ib") == Names({"x3-ib"}));
  EXPECT(expand_slurm_host_list("big[1-1000]").size() == 1000);
}

void test_refusals() {
  for (const char* bad : {"", "a,,b", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[]", "n[1-2]]", "n[[1]]", "n[1,]",
                          "n[0-99999999]x[0-99]"}) {
    const std::string why = refusal(bad);
    EXPECT(why.find("cannot read SLURM host list") != std::string::npos);
    if (why.empty()) std::fprintf(stderr, "  accepted: '%s'\n", bad);
  }
  EXPECT(refusal("n[5-3]").find("ends below its start") != std::string::npos);
}

void test_ports() {
  EXPECT(slurm_store_ports("slurm:42.0", "store") ==
         std::vector<int>({27221, 23144, 28751, 25711, 22622, 22143, 30346, 22269}));
  EXPECT(slurm_store_ports("slurm:42.1", "store") ==
         std::vector<int>({28483, 25665, 28384, 30280, 29791, 24469, 22395, 20064}));
  for (int port : slurm_store_ports("slurm:7", "torch")) {
    EXPECT(port >= kSlurmFirstPort && port < kSlurmFirstPort + kSlurmPortRange);
  }
}

}  // namespace

int main() {
  test_expansion();
  test_refusals();
  test_ports();
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
