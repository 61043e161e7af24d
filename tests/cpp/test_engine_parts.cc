// Unit tests of the engine's parts that stand alone (core/engine/): the
// response cache, the negotiation of one cycle's messages, the stall
// inspector and the deadlock watch, each driven directly, without ranks, sockets or threads.
//
// Exits 0 when every check passes, 1 otherwise.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/engine/deadlock_watch.h"
#include "core/engine/negotiation.h"
#include "core/engine/response_cache.h"
#include "core/engine/stall_inspector.h"
#include "core/engine/tensor_meta.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

// Runs f and returns the kind of the ringcc::Error it raised (-1: none).
template <typename F>
int raised_kind(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return static_cast<int>(e.kind());
  }
  return -1;
}

std::shared_ptr<const TensorMeta> meta_of(std::vector<int64_t> shape, DataType dtype = DataType::kFloat32,
                                          CollectiveKind kind = CollectiveKind::kAllreduce) {
  auto m = std::make_shared<TensorMeta>();
  m->kind = kind;
  m->dtype = dtype;
  m->shape = std::move(shape);
  return m;
}

std::string bits_with(size_t capacity, std::vector<size_t> set) {
  std::string bits((capacity + 7) / 8, '\0');
  for (size_t b : set) bits[b / 8] = static_cast<char>(bits[b / 8] | (1 << (b % 8)));
  return bits;
}

// One rank's message: flags, cache bits, tensors announced in full, aborts.
std::string message(uint8_t flags, const std::string& bits,
                    const std::vector<std::pair<std::string, TensorMeta>>& announced,
                    const std::vector<std::string>& aborts = {}) {
  MessageBuilder b;
  b.start();
  for (const auto& [name, meta] : announced) b.announce(name, meta);
  std::string out;
  b.finish(flags, bits, aborts, &out);
  return out;
}

// ---- response cache ----

void test_cache_bits_and_lru() {
  ResponseCache cache(3);
  EXPECT(cache.capacity() == 3 && cache.size() == 0 && !cache.full());
  const size_t a = cache.add("a", meta_of({4}));
  const size_t b = cache.add("b", meta_of({8}));
  const size_t c = cache.add("c", meta_of({2, 2}));
  EXPECT(a == 0 && b == 1 && c == 2 && cache.full());
  EXPECT(cache.bit_of("b") == 1 && cache.bit_of("zz") == -1);
  EXPECT(cache.bit_of("b", *meta_of({8})) == 1);
  EXPECT(cache.bit_of("b", *meta_of({9})) == -1);                      // another shape
  EXPECT(cache.bit_of("b", *meta_of({8}, DataType::kFloat64)) == -1);  // another dtype
  // Least recently used first: a, unless touched.
  auto any = [](size_t) { return true; };
  EXPECT(cache.victim(any) == 0);
  cache.touch(size_t{0});
  EXPECT(cache.victim(any) == 1);
  EXPECT(cache.touch("b") && !cache.touch("nope"));
  EXPECT(cache.victim(any) == 2);
  // A bit some rank waits on is never evicted.
  EXPECT(cache.victim([](size_t bit) { return bit != 2; }) == 0);
  EXPECT(cache.victim([](size_t) { return false; }) == -1);
  // Replacing hands the bit to a new name and counts an eviction.
  const uint64_t epoch = cache.epoch();
  cache.replace(2, "d", meta_of({1}));
  EXPECT(cache.epoch() == epoch + 1);
  EXPECT(cache.bit_of("c") == -1 && cache.bit_of("d") == 2 && cache.name(2) == "d");
  EXPECT(cache.meta(2)->shape == std::vector<int64_t>{1});
}

void test_cache_order_follows_entry_not_bits() {
  ResponseCache cache(3);
  cache.add("first", meta_of({1}));
  cache.add("second", meta_of({1}));
  cache.add("third", meta_of({1}));
  EXPECT((cache.bits_in_order() == std::vector<int>{0, 1, 2}));
  // "fourth" takes bit 0 but entered last: it runs last.
  cache.replace(0, "fourth", meta_of({1}));
  EXPECT((cache.bits_in_order() == std::vector<int>{1, 2, 0}));
  ResponseCache none(-5);
  EXPECT(none.capacity() == 0 && none.full());
}

// ---- negotiation ----

void test_negotiation_table_and_readiness() {
  const size_t capacity = 16;
  ResponseCache cache(static_cast<int>(capacity));
  Negotiation n(3);
  n.resize_bits(capacity);
  EXPECT(n.bit_bytes() == 2);
  const std::string none = bits_with(capacity, {});
  const TensorMeta m = *meta_of({5});
  CycleNews news;
  // Cycle 1: ranks 0 and 2 announce "x"; rank 1 announces "y".
  n.apply({message(0, none, {{"x", m}}), message(0, none, {{"y", m}}), message(0, none, {{"x", m}})}, cache, 1.0,
          &news);
  EXPECT(news.any_new && news.shut_down.empty() && news.aborts.empty());
  EXPECT(n.table().size() == 2);
  std::vector<std::pair<TableEntry*, const std::string*>> ready;
  n.ready_entries(&ready);
  EXPECT(ready.empty());
  EXPECT((n.missing_ranks(*n.table().at("x")) == std::vector<int>{1}));
  EXPECT((n.missing_ranks(*n.table().at("y")) == std::vector<int>{0, 2}));
  // Cycle 2: the missing ranks catch up; rank 2 shuts down, rank 1 joined.
  n.apply({message(0, none, {{"y", m}}), message(kFlagJoined, none, {{"x", m}}),
           message(kFlagShutdown, none, {{"y", m}}, {"stuck"})},
          cache, 2.0, &news);
  EXPECT((news.shut_down == std::vector<int>{2}));
  EXPECT((news.joined == std::vector<bool>{false, true, false}));
  EXPECT((news.aborts == std::vector<std::string>{"stuck"}));
  n.ready_entries(&ready);
  // Both ready, in the order they first appeared (x before y).
  EXPECT(ready.size() == 2 && *ready[0].second == "x" && *ready[1].second == "y");
  std::string why;
  EXPECT(n.agree("x", *ready[0].first, &why) && why.empty());
  EXPECT(n.first_meta(*ready[0].first) == m);
  EXPECT(n.table().at("x")->first_seen == 1.0);
}

// Whether two ranks that announce `name` as `a` and `b` agree; why not in *why.
bool two_ranks_agree(const std::string& name, const TensorMeta& a, const TensorMeta& b, std::string* why) {
  ResponseCache cache(8);
  Negotiation n(2);
  n.resize_bits(8);
  const std::string none = bits_with(8, {});
  CycleNews news;
  n.apply({message(0, none, {{name, a}}), message(0, none, {{name, b}})}, cache, 0, &news);
  why->clear();
  return n.agree(name, *n.table().at(name), why);
}

void test_negotiation_disagreement_and_failure() {
  ResponseCache cache(8);
  const std::string none = bits_with(8, {});
  CycleNews news;
  std::string why;
  EXPECT(!two_ranks_agree("t", *meta_of({4}), *meta_of({4}, DataType::kInt32), &why));
  EXPECT(why.find("'t'") != std::string::npos || why.find("t") != std::string::npos);
  EXPECT(!why.empty());
  // Allgather may differ in the first dimension only.
  EXPECT(two_ranks_agree("g", *meta_of({3, 2}, DataType::kFloat32, CollectiveKind::kAllgather),
                         *meta_of({5, 2}, DataType::kFloat32, CollectiveKind::kAllgather), &why));
  // A rank whose call failed: every rank gets its reason.
  Negotiation f(2);
  f.resize_bits(8);
  MessageBuilder b;
  b.start();
  b.announce_failed("bad", *meta_of({1}, DataType::kFloat32, CollectiveKind::kLocalError), CollectiveKind::kBroadcast,
                    "root out of range");
  std::string failed;
  b.finish(0, none, {}, &failed);
  f.apply({failed, message(0, none, {{"bad", *meta_of({1})}})}, cache, 0, &news);
  why.clear();
  EXPECT(!f.agree("bad", *f.table().at("bad"), &why));
  EXPECT(why.find("root out of range") != std::string::npos);
  EXPECT(why.find("rank 0") != std::string::npos);
  // A pack: the same flat shape, different layouts of the tensors in it
  // (the digests come back from the parsed messages).
  TensorMeta packed_a = *meta_of({12});
  TensorMeta packed_b = packed_a;
  packed_a.layout = 7;
  packed_b.layout = 9;
  EXPECT(!two_ranks_agree("pack", packed_a, packed_b, &why));
  EXPECT(why.find("the shapes of the tensors packed into it") != std::string::npos);
  EXPECT(why.find("rank 0: 7, rank 1: 9") != std::string::npos);
  EXPECT(two_ranks_agree("pack", packed_b, packed_b, &why) && why.empty());
}

// A message of `flags` and `bits` that withdraws `withdrawn` and announces
// `announced` (after the withdrawals, as the engine writes them).
std::string withdrawing(const std::string& bits, const std::vector<std::string>& withdrawn,
                        const std::vector<std::pair<std::string, TensorMeta>>& announced = {}) {
  MessageBuilder b;
  b.start();
  for (const auto& [name, meta] : announced) b.announce(name, meta);
  std::string out;
  b.finish(0, bits, {}, &out, withdrawn);
  return out;
}

void test_negotiation_withdrawal() {
  ResponseCache cache(8);
  const std::string none = bits_with(8, {});
  const TensorMeta m = *meta_of({4});
  CycleNews news;
  Negotiation n(3);
  n.resize_bits(8);
  // Ranks 0 and 1 announce "g.1"; rank 2 never does.
  n.apply({message(0, none, {{"g.1", m}}), message(0, none, {{"g.1", m}}), message(0, none, {})}, cache, 1.0, &news);
  EXPECT(n.table().count("g.1") == 1);
  // Rank 0 withdraws: its part goes, rank 1's stays.
  n.apply({withdrawing(none, {"g.1"}), message(0, none, {}), message(0, none, {})}, cache, 2.0, &news);
  EXPECT(n.table().count("g.1") == 1 && news.dropped.empty());
  EXPECT((n.missing_ranks(*n.table().at("g.1")) == std::vector<int>{0, 2}));
  // Rank 1 withdraws too: nobody is left, the entry goes.
  n.apply({message(0, none, {}), withdrawing(none, {"g.1"}), message(0, none, {})}, cache, 3.0, &news);
  EXPECT(n.table().count("g.1") == 0 && news.dropped.empty());
  // A withdrawal and a new announcement of the name in one message: the
  // withdrawal is read first, the new call stays.
  n.apply({message(0, none, {{"g.2", m}}), message(0, none, {}), message(0, none, {})}, cache, 4.0, &news);
  n.apply({withdrawing(none, {"g.2"}, {{"g.2", m}}), message(0, none, {}), message(0, none, {})}, cache, 5.0,
          &news);
  EXPECT(n.table().count("g.2") == 1 && n.table().at("g.2")->submitted[0] == 1);
  // Left with a failed call only (rank 2 failed the same group): the entry
  // goes and says so, for rank 2 to drop its failed call.
  MessageBuilder b;
  b.start();
  b.announce_failed("g.3", *meta_of({1}, DataType::kFloat32, CollectiveKind::kLocalError),
                    CollectiveKind::kAllreduce, "bad op");
  std::string failed;
  b.finish(0, none, {}, &failed);
  n.apply({message(0, none, {{"g.3", m}}), message(0, none, {}), failed}, cache, 6.0, &news);
  EXPECT(n.table().count("g.3") == 1);
  n.apply({withdrawing(none, {"g.3"}), message(0, none, {}), message(0, none, {})}, cache, 7.0, &news);
  EXPECT(n.table().count("g.3") == 0);
  EXPECT((news.dropped == std::vector<std::string>{"g.3"}));
  // A name nobody announced: nothing happens.
  n.apply({withdrawing(none, {"nowhere"}), message(0, none, {}), message(0, none, {})}, cache, 8.0, &news);
  EXPECT(news.dropped.empty() && n.table().count("nowhere") == 0);
}

void test_negotiation_cache_bits() {
  const size_t capacity = 10;
  ResponseCache cache(static_cast<int>(capacity));
  cache.add("w0", meta_of({2}));
  cache.add("w1", meta_of({2}));
  cache.add("w2", meta_of({2}));
  Negotiation n(2);
  n.resize_bits(capacity);
  CycleNews news;
  // Bit 0 on both ranks, bit 1 on rank 0 alone, bit 2 on none.
  n.apply({message(0, bits_with(capacity, {0, 1}), {}), message(0, bits_with(capacity, {0}), {})}, cache, 0, &news);
  EXPECT(!news.any_new);
  EXPECT(n.find_ready_bits(cache) == 1);
  EXPECT(n.all_bits() == bits_with(capacity, {0}));
  EXPECT(n.any_bits() == bits_with(capacity, {0, 1}));
  EXPECT(n.pending_anywhere(1) && !n.pending_anywhere(2));
  EXPECT((n.missing_ranks(size_t{1}) == std::vector<int>{1}));
  // A joined rank counts as ready.
  n.set_joined({false, true});
  EXPECT(n.find_ready_bits(cache) == 2);
  n.clear_joined();
  // A cached name announced in full moves to the table: its bit no longer
  // makes it ready by itself, and the bits fill in the table's entry.
  n.apply({message(0, bits_with(capacity, {0}), {}), message(0, bits_with(capacity, {}), {{"w0", *meta_of({3})}})},
          cache, 0, &news);
  EXPECT(n.in_table(0));
  EXPECT(n.find_ready_bits(cache) == 0);
  std::vector<std::pair<TableEntry*, const std::string*>> ready;
  n.ready_entries(&ready);
  EXPECT(ready.size() == 1 && *ready[0].second == "w0");
  std::string why;
  EXPECT(!n.agree("w0", *ready[0].first, &why));  // shape {2} from the cache against {3}
  // Caches of different capacities are a mismatch, said at once.
  Negotiation other(2);
  other.resize_bits(capacity);
  std::string what;
  EXPECT(raised_kind(
             [&] {
               other.apply({message(0, bits_with(capacity, {}), {}), message(0, bits_with(64, {}), {})}, cache, 0,
                           &news);
             },
             &what) == static_cast<int>(ErrorKind::kMismatch));
  EXPECT(what.find("RINGCC_CACHE_CAPACITY") != std::string::npos);
  // A message cut short is an internal error, not a crash.
  std::string cut = message(0, bits_with(capacity, {}), {{"x", *meta_of({1, 2, 3})}});
  cut.resize(cut.size() - 5);
  EXPECT(raised_kind([&] { other.apply({cut, cut}, cache, 0, &news); }) >= 0);
  EXPECT(raised_kind([&] { other.apply({"", ""}, cache, 0, &news); }) == static_cast<int>(ErrorKind::kInternal));
}

// ---- stall inspector ----

void test_stall_inspector_warns_then_aborts() {
  const size_t capacity = 8;
  ResponseCache cache(static_cast<int>(capacity));
  cache.add("grad", meta_of({4}));
  Negotiation n(3);
  n.resize_bits(capacity);
  StallInspector stall(/*check_s=*/10, /*shutdown_s=*/60);
  stall.resize_bits(capacity);
  CycleNews news;
  // "grad" pending on ranks 0 and 2 (by its bit), "late" in the table on rank 1.
  const std::string bit0 = bits_with(capacity, {0});
  const std::string none = bits_with(capacity, {});
  n.apply({message(0, bit0, {}), message(0, none, {{"late", *meta_of({1})}}), message(0, bit0, {})}, cache, 100, &news);
  n.find_ready_bits(cache);
  stall.track_bits(n, cache, 100);
  EXPECT(stall.stalling(0));
  EXPECT(stall.inspect(n, cache, 105).empty());  // younger than the check time
  const std::string warning = stall.inspect(n, cache, 111);
  EXPECT(warning.find("stall: 2 tensor(s)") == 0);
  EXPECT(warning.find("grad: waiting on rank(s) [1]") != std::string::npos);
  EXPECT(warning.find("late: waiting on rank(s) [0, 2]") != std::string::npos);
  EXPECT(stall.inspect(n, cache, 112).empty());  // warned once per check period
  EXPECT(stall.aborts().empty());
  stall.inspect(n, cache, 161);
  EXPECT(stall.aborts().size() == 2);
  stall.clear_aborts();
  // The bit stops once it is no longer pending anywhere.
  n.apply({message(0, none, {}), message(0, none, {}), message(0, none, {})}, cache, 170, &news);
  n.find_ready_bits(cache);
  stall.track_bits(n, cache, 170);
  EXPECT(!stall.stalling(0));
  stall.stop(0);
  EXPECT(rank_list({}) == "[]" && rank_list({3, 1}) == "[3, 1]");
}

// Two ranks, a cache of 8 bits: rank `r` announces `name` in full at time
// `t`, the other nothing new (a tensor only one rank has enqueued).
void announce_alone(Negotiation& n, const ResponseCache& cache, size_t r, const std::string& name, double t) {
  const std::string none = bits_with(8, {});
  std::vector<std::string> messages{message(0, none, {}), message(0, none, {})};
  messages[r] = message(0, none, {{name, *meta_of({1})}});
  CycleNews news;
  n.apply(messages, cache, t, &news);
}

// One mismatch stalls tensors whose clocks start a little apart: those that
// have stalled almost as long as the one given up on go with it, in the
// same cycle, and a young stall does not.
void test_stall_inspector_gives_up_on_kindred_stalls_together() {
  ResponseCache cache(8);
  Negotiation n(2);
  n.resize_bits(8);
  StallInspector stall(/*check_s=*/10, /*shutdown_s=*/60);
  stall.resize_bits(8);
  announce_alone(n, cache, 0, "first", 100);
  announce_alone(n, cache, 1, "second", 100.5);
  announce_alone(n, cache, 1, "young", 158);
  stall.inspect(n, cache, 159.9);
  EXPECT(stall.aborts().empty());  // nothing past the shutdown time yet
  stall.inspect(n, cache, 160.2);
  std::vector<std::string> aborts = stall.aborts();
  std::sort(aborts.begin(), aborts.end());
  EXPECT((aborts == std::vector<std::string>{"first", "second"}));
}

// With the warnings off the give-up still takes its kindred stalls (the
// window is then 1 s); with the give-up off the warnings still come.
void test_stall_inspector_with_one_clock_off() {
  ResponseCache cache(8);
  Negotiation n(2);
  n.resize_bits(8);
  announce_alone(n, cache, 0, "first", 100);
  announce_alone(n, cache, 1, "second", 100.5);
  announce_alone(n, cache, 1, "later", 101.5);
  StallInspector silent(/*check_s=*/0, /*shutdown_s=*/60);
  silent.resize_bits(8);
  EXPECT(silent.inspect(n, cache, 159.9).empty() && silent.aborts().empty());
  EXPECT(silent.inspect(n, cache, 160.2).empty());
  std::vector<std::string> aborts = silent.aborts();
  std::sort(aborts.begin(), aborts.end());
  EXPECT((aborts == std::vector<std::string>{"first", "second"}));
  StallInspector patient(/*check_s=*/10, /*shutdown_s=*/0);
  patient.resize_bits(8);
  EXPECT(patient.inspect(n, cache, 110).empty());
  const std::string warning = patient.inspect(n, cache, 111);
  EXPECT(warning.find("stall: 2 tensor(s)") == 0);
  EXPECT(warning.find("first: waiting on rank(s) [1]") != std::string::npos);
  EXPECT(warning.find("later") == std::string::npos);  // 9.5 s old
  patient.inspect(n, cache, 1e6);
  EXPECT(patient.aborts().empty());
}

void test_stall_inspector_join() {
  ResponseCache cache(8);
  Negotiation n(2);
  n.resize_bits(8);
  n.set_joined({true, false});
  StallInspector stall(5, 20);
  stall.resize_bits(8);
  // Times are seconds of the engine's clock, which never reads 0.
  stall.track_join(/*some_joined=*/true, /*all_joined=*/false, /*progressed=*/false, 1);
  EXPECT(stall.inspect(n, cache, 4).empty());
  const std::string warning = stall.inspect(n, cache, 7);
  EXPECT(warning.find("join(): waiting on rank(s) [1]") != std::string::npos);
  // Progress restarts the clock.
  stall.track_join(true, false, /*progressed=*/true, 19);
  stall.inspect(n, cache, 31);
  EXPECT(stall.aborts().empty());
  stall.inspect(n, cache, 40);
  EXPECT((stall.aborts() == std::vector<std::string>{""}));  // "" stands for the join
  stall.clear_aborts();
  stall.inspect(n, cache, 80);
  EXPECT(stall.aborts().empty());  // given up on once
  // With no check time and no shutdown time, nothing is said.
  StallInspector quiet(0, 0);
  quiet.resize_bits(8);
  quiet.track_join(true, false, false, 0);
  EXPECT(quiet.inspect(n, cache, 1e6).empty() && quiet.aborts().empty());
}

// ---- deadlock watch ----

void test_deadlock_flags_and_state() {
  const size_t capacity = 8;
  ResponseCache cache(static_cast<int>(capacity));
  cache.add("cached", meta_of({2}));
  Negotiation n(2);
  n.resize_bits(capacity);
  const std::string none = bits_with(capacity, {});
  const TensorMeta m = *meta_of({4});
  CycleNews news;
  // Both ranks announce a name of their own and a caller of each waits:
  // news, not yet a deadlock.
  n.apply({message(kFlagWaiting | kFlagNews, none, {{"a", m}}), message(kFlagWaiting | kFlagNews, none, {{"b", m}})},
          cache, 0, &news);
  EXPECT(news.all_waiting && news.changed && news.any_new && !news.deadlock_called);
  EXPECT(!deadlocked(news, n, /*any_ready=*/false));
  // The next cycle says nothing new: every rank waits on names none can run.
  n.apply({message(kFlagWaiting, none, {}), message(kFlagWaiting, none, {})}, cache, 1, &news);
  EXPECT(news.all_waiting && !news.changed && !news.any_new);
  EXPECT(deadlocked(news, n, false));
  EXPECT(!deadlocked(news, n, /*any_ready=*/true));
  // A rank whose callers do not all wait on the engine may still enqueue.
  n.apply({message(kFlagWaiting, none, {}), message(0, none, {})}, cache, 2, &news);
  EXPECT(!news.all_waiting && !deadlocked(news, n, false));
  // A rank that sets a cached name's bit changes what is pending.
  n.apply({message(kFlagWaiting | kFlagNews, bits_with(capacity, {0}), {}), message(kFlagWaiting, none, {})}, cache, 3,
          &news);
  EXPECT(news.changed && !deadlocked(news, n, false));
  // Only rank 0 calls a deadlock.
  n.apply({message(kFlagWaiting, bits_with(capacity, {0}), {}), message(kFlagWaiting | kFlagDeadlock, none, {})}, cache,
          4, &news);
  EXPECT(!news.deadlock_called && deadlocked(news, n, false));
  n.apply({message(kFlagWaiting | kFlagDeadlock, bits_with(capacity, {0}), {}), message(kFlagWaiting, none, {})}, cache,
          5, &news);
  EXPECT(news.deadlock_called);
  // Nothing pending anywhere is no deadlock, whoever waits.
  Negotiation idle(2);
  idle.resize_bits(capacity);
  idle.apply({message(kFlagWaiting, none, {}), message(kFlagWaiting, none, {})}, cache, 0, &news);
  EXPECT(!idle.any_pending() && !deadlocked(news, idle, false));
}

void test_deadlock_watch_bound() {
  DeadlockWatch watch;
  EXPECT(!watch.observe(true, 3, 10));
  EXPECT(!watch.observe(true, 3, 12.9));
  EXPECT(watch.observe(true, 3, 13));
  // Any cycle that is not stuck starts the clock again.
  EXPECT(!watch.observe(false, 3, 14));
  EXPECT(!watch.observe(true, 3, 15));
  EXPECT(!watch.observe(true, 3, 17.5));
  EXPECT(watch.observe(true, 3, 18));
  watch.reset();
  EXPECT(!watch.observe(true, 3, 19));
}

void test_deadlock_description() {
  const size_t capacity = 8;
  ResponseCache cache(static_cast<int>(capacity));
  cache.add("allreduce.noname.7", meta_of({2}));
  Negotiation n(4);
  n.resize_bits(capacity);
  const std::string none = bits_with(capacity, {});
  const TensorMeta m = *meta_of({4});
  CycleNews news;
  // Rank 0: six names of its own, "b" and a cached automatic name; rank 1:
  // "b"; rank 2: "c"; rank 3 joined.
  std::vector<std::pair<std::string, TensorMeta>> many;
  for (int i = 0; i < 6; ++i) many.push_back({"grad." + std::to_string(i), m});
  many.push_back({"b", m});
  n.apply({message(kFlagWaiting, bits_with(capacity, {0}), many), message(kFlagWaiting, none, {{"b", m}}),
           message(kFlagWaiting, none, {{"c", m}}), message(kFlagWaiting | kFlagJoined, none, {})},
          cache, 0, &news);
  n.set_joined(news.joined);
  const std::string why = describe_deadlock(n, cache, 3);
  EXPECT(why.find("deadlock: every rank waits for named collectives") == 0);
  EXPECT(why.find("for 3 s, RINGCC_COLLECTIVE_TIMEOUT_S") != std::string::npos);  // the variable that sets it
  EXPECT(why.find("\n  rank 0: 'grad.0' (enqueued on rank 0 only), 'grad.1'") != std::string::npos);
  EXPECT(why.find("'grad.3' (enqueued on rank 0 only) and 4 more\n") != std::string::npos);
  EXPECT(why.find("grad.4") == std::string::npos);
  EXPECT(why.find("\n  rank 1: 'b' (not enqueued on rank(s) [2])\n") != std::string::npos);
  EXPECT(why.find("\n  rank 2: 'c' (enqueued on rank 2 only)\n") != std::string::npos);
  EXPECT(why.find("\n  rank 3: joined") != std::string::npos);
  EXPECT(why.find("'allreduce.noname.7' is the automatic name of unnamed ops") != std::string::npos);
  EXPECT(why.find("ranks issued a different number of unnamed ops before this point") != std::string::npos);
}

}  // namespace

void test_join_refuses_all_but_allreduce() {
  Negotiation n(3);
  std::string why;
  const auto allreduce = meta_of({4});
  const auto gather = meta_of({2, 3}, DataType::kFloat32, CollectiveKind::kAllgather);
  auto bcast = std::make_shared<TensorMeta>(*meta_of({5}, DataType::kInt32, CollectiveKind::kBroadcast));
  // Nobody joined: everything runs.
  EXPECT(!n.refused_by_join("g", *gather, &why) && why.empty());
  EXPECT(!n.refused_by_join("b", *bcast, &why) && why.empty());
  // Rank 0 joined: an allreduce runs (rank 0 adds zeros), nothing else.
  n.set_joined({true, false, false});
  EXPECT(!n.refused_by_join("a", *allreduce, &why) && why.empty());
  EXPECT(n.refused_by_join("g", *gather, &why));
  EXPECT(why.find("tensor 'g': allgather cannot run while rank(s) [0] have joined") == 0);
  for (auto kind : {CollectiveKind::kAlltoall, CollectiveKind::kReduceScatter}) {
    why.clear();
    EXPECT(n.refused_by_join("k", *meta_of({3, 1}, DataType::kFloat32, kind), &why));
    EXPECT(why.find(std::string(collective_name(kind)) + " cannot run") != std::string::npos);
  }
  // A broadcast names its root, and says when the root is one of them.
  bcast->root = 1;
  EXPECT(n.refused_by_join("b", *bcast, &why));
  EXPECT(why.find("broadcast from root 1 cannot run while rank(s) [0] have joined") != std::string::npos);
  EXPECT(why.find("has joined and has nothing to send") == std::string::npos);
  bcast->root = 0;
  n.set_joined({true, false, true});
  EXPECT(n.refused_by_join("b", *bcast, &why));
  EXPECT(why.find("broadcast from root 0 (root 0 has joined and has nothing to send) cannot run while rank(s) "
                  "[0, 2] have joined") != std::string::npos);
  n.clear_joined();
  why.clear();
  EXPECT(!n.refused_by_join("b", *bcast, &why) && why.empty());
}

int main() {
  struct Test {
    const char* name;
    void (*run)();
  };
  const Test tests[] = {
      {"cache_bits_and_lru", test_cache_bits_and_lru},
      {"cache_order_follows_entry_not_bits", test_cache_order_follows_entry_not_bits},
      {"negotiation_table_and_readiness", test_negotiation_table_and_readiness},
      {"negotiation_disagreement_and_failure", test_negotiation_disagreement_and_failure},
      {"negotiation_withdrawal", test_negotiation_withdrawal},
      {"negotiation_cache_bits", test_negotiation_cache_bits},
      {"join_refuses_all_but_allreduce", test_join_refuses_all_but_allreduce},
      {"stall_inspector_warns_then_aborts", test_stall_inspector_warns_then_aborts},
      {"stall_inspector_gives_up_on_kindred_stalls_together", test_stall_inspector_gives_up_on_kindred_stalls_together},
      {"stall_inspector_with_one_clock_off", test_stall_inspector_with_one_clock_off},
      {"stall_inspector_join", test_stall_inspector_join},
      {"deadlock_flags_and_state", test_deadlock_flags_and_state},
      {"deadlock_watch_bound", test_deadlock_watch_bound},
      {"deadlock_description", test_deadlock_description},
  };
  for (const Test& t : tests) {
    const int before = g_failures;
    try {
      t.run();
    } catch (const std::exception& e) {
      ++g_failures;
      std::fprintf(stderr, "FAIL %s: unexpected exception: %s\n", t.name, e.what());
    }
    std::printf("%s %s\n", g_failures == before ? "ok  " : "FAIL", t.name);
  }
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
