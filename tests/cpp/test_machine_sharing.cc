// Unit tests of where a rank says it runs (core/rendezvous/topology.h): the
// text a rank posts round-trips with its kernel's boot id and CPU mask, a
// mask that is not hex is dropped rather than trusted, and
// machine_sharing counts the ranks under one kernel and the CPUs they may
// run on together, whatever their host names, and topology_of the fewest
// CPUs per rank over the machines.
//
// Exits 0 when every check passes, 1 otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "core/rendezvous/topology.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

RankPlace place(const std::string& host, const std::string& machine, std::vector<uint64_t> mask) {
  RankPlace p;
  p.host = host;
  p.pid = 100;
  p.pid_namespace = 7;
  p.machine = machine;
  p.cpu_mask = std::move(mask);
  return p;
}

void test_round_trip() {
  const RankPlace mine = RankPlace::mine();
  std::string rest;
  const RankPlace back = RankPlace::parse(mine.text() + "\nsettings", &rest);
  EXPECT(back.host == mine.host);
  EXPECT(back.pid == mine.pid);
  EXPECT(back.pid_namespace == mine.pid_namespace);
  EXPECT(back.machine == mine.machine);
  EXPECT(back.cpu_mask == mine.cpu_mask);
  EXPECT(rest == "settings");
  EXPECT(!mine.machine.empty());  // Linux has /proc/sys/kernel/random/boot_id
  EXPECT(!mine.cpu_mask.empty());

  const RankPlace two_words = place("h", "abc-1", {0x3, 0x8000000000000000ull});
  const RankPlace parsed = RankPlace::parse(two_words.text(), &rest);
  EXPECT(parsed.cpu_mask == two_words.cpu_mask);
  EXPECT(parsed.machine == "abc-1");
}

void test_bad_masks_are_dropped() {
  std::string rest;
  for (const char* bad : {"h\n1 2 m zz", "h\n1 2 m 00000000000000ff,xyz", "h\n1 2 m 3", "h\n1 2 m"}) {
    const RankPlace p = RankPlace::parse(bad, &rest);
    EXPECT(p.pid == 1 && p.pid_namespace == 2);
    EXPECT(p.machine.empty() && p.cpu_mask.empty());
  }
}

void test_sharing() {
  // Two "hosts" (network namespaces) under one kernel, two CPUs between
  // four ranks; a fifth rank on another machine.
  const std::vector<RankPlace> places = {
      place("ns-a", "k1", {0x1}), place("ns-a", "k1", {0x2}), place("ns-b", "k1", {0x3}),
      place("ns-b", "k1", {0x3}), place("far", "k2", {0xff}),
  };
  MachineSharing s = machine_sharing(places, 0);
  EXPECT(s.ranks == 4 && s.cpus == 2);
  s = machine_sharing(places, 4);
  EXPECT(s.ranks == 1 && s.cpus == 8);
  // A rank that did not say: nothing is assumed.
  std::vector<RankPlace> unknown = places;
  unknown[3].machine.clear();
  s = machine_sharing(unknown, 0);
  EXPECT(s.ranks == 1 && s.cpus == 0);
}

// The fewest CPUs per rank over the machines, from the same places on
// every rank: what the pipelined hierarchical allreduce is chosen by.
void test_cpus_per_rank() {
  const std::vector<RankPlace> places = {
      place("ns-a", "k1", {0x1}), place("ns-a", "k1", {0x2}), place("ns-b", "k1", {0x3}),
      place("ns-b", "k1", {0x3}), place("far", "k2", {0xff}),
  };
  for (int rank = 0; rank < 5; ++rank) {
    const Topology t = topology_of(places, rank);
    EXPECT(t.cpus_per_rank == 0.5);  // k1: 4 ranks on 2 CPUs; k2: 1 on 8
    EXPECT(t.hosts == 3);
  }
  const std::vector<RankPlace> roomy = {place("a", "k1", {0xf}), place("a", "k1", {0xf0}), place("b", "k2", {0x7})};
  EXPECT(topology_of(roomy, 2).cpus_per_rank == 3);
  std::vector<RankPlace> unknown = roomy;
  unknown[1].machine.clear();
  EXPECT(topology_of(unknown, 0).cpus_per_rank == 0);
}

}  // namespace

int main() {
  test_round_trip();
  test_bad_masks_are_dropped();
  test_sharing();
  test_cpus_per_rank();
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
