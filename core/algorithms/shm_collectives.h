// Collectives among ranks on one host, through shared memory. Each rank
// owns a segment with a control block (a phase counter that peers wait on,
// an abort flag), two header slots and two data areas used alternately by
// successive pieces, so one barrier per piece suffices to keep writers from
// overwriting what a slow reader still needs.
//
// Allreduce copies each piece into the rank's area once, every rank reduces
// its own segment of the piece across all areas, and every rank copies the
// reduced segments out: 2 phases per piece, no data crosses a socket.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/algorithms/store_chooser.h"
#include "core/base/deadline.h"
#include "core/collective/collective_args.h"
#include "core/os/shm_segment.h"
#include "core/rendezvous/store.h"

namespace ringcc {

struct ShmControl;
class AllreduceLayout;

class ShmCollectives {
 public:
  // ranks: the global ranks of the local group, in order; me: my index in
  // it. Creates my segment, waits (through the store, bounded by deadline)
  // for the others, maps theirs and removes the names.
  ShmCollectives(Store& store, const std::string& key_prefix, std::vector<int> ranks, int me, Deadline deadline);
  ~ShmCollectives();

  // The data area and the small-message limit in bytes, as
  // RINGCC_SHM_AREA_BYTES and RINGCC_SHM_SMALL_BYTES set them (every rank
  // of a job must have the same).
  static size_t area_bytes_from_env();
  static size_t small_bytes_from_env();
  // The piece of an allreduce past small_bytes (at most area_bytes).
  static size_t allreduce_piece_bytes_from_env();
  // How the allreduce writes its areas (RINGCC_SHM_STORES): chosen by
  // timing (auto), plain stores, or stores that bypass the cache.
  enum class StoreMode { kAuto, kPlain, kBypass };
  static StoreMode store_mode_from_env();

  int size() const { return static_cast<int>(ranks_.size()); }

  // Runs the collective described by args (all its ranks are local).
  void run(CollectiveArgs& args, Deadline deadline);

  // An allgather whose results go straight where the caller wants them
  // rather than one after another in args.out: elements [from, from +
  // count) of local rank r's contribution land at dst, for each block of
  // placement[r] (in order, covering the contribution whole).
  struct Block {
    int64_t from;
    int64_t count;
    uint8_t* dst;
  };
  using Placement = std::vector<std::vector<Block>>;
  void allgather_placed(CollectiveArgs& args, const Placement& placement, Deadline deadline);
  // Whether every rank of the host can read its peers' memory directly
  // (the same on every rank).
  bool reads_peers() const { return cma_; }
  // The bytes a rank stages in one piece (its area).
  size_t area_bytes() const { return area_bytes_; }
  // allgather_placed() where a contribution need not be one run of args.in:
  // block {from, count, dst} of placement[r] is elements [from, from +
  // count) of local rank r's args.in, its blocks' counts adding up to its
  // args.count. Every rank reads its peers' blocks directly, at any size:
  // only where reads_peers().
  void allgather_scattered(CollectiveArgs& args, const Placement& placement, Deadline deadline);

  // Tells every local peer blocked on us that we gave up, and why.
  void abort(const std::string& reason);
  // Tells the local peers that this rank takes part in no more collectives:
  // one waiting for a phase we never reach fails at once. Phases we reached
  // stay readable.
  void leave();

  // The rank a collective is blocked on right now, -1 when none. Safe from
  // any thread.
  int waiting_for() const { return waiting_for_.load(std::memory_order_relaxed); }

  // Microseconds spent waiting for peers to arrive since the last call.
  double take_peer_wait_us() {
    const double us = peer_wait_us_;
    peer_wait_us_ = 0;
    return us;
  }

 private:
  void allreduce(CollectiveArgs& a, Deadline dl);
  // Of a piece of parity p: reduces this rank's part (len elements from
  // element lo of the piece, `at` of the input) into its area.
  void reduce_own_part(const CollectiveArgs& a, const AllreduceLayout& layout, int p, int64_t at, int64_t lo,
                       int64_t len, bool bypass);
  // Whether an allreduce of this size class writes the peer-read parts of
  // its area with stores that bypass the cache.
  bool bypasses(int size_class) const;
  // The first rank: folds the last timed allreduce into the chooser and
  // publishes its choices.
  void publish_store_choices();
  void reduce_scatter(CollectiveArgs& a, Deadline dl);
  void allgather(CollectiveArgs& a, Deadline dl, const Placement* placement = nullptr, bool scattered = false);
  // Raises unless each rank's blocks cover its contribution: in order, or
  // (scattered) in blocks of the right total length.
  void check_placement(const Placement& placement, const std::vector<int64_t>& counts, bool scattered) const;
  void broadcast(CollectiveArgs& a, Deadline dl);
  void alltoall(CollectiveArgs& a, Deadline dl);

  // Starts a piece: returns its parity (which header slot and area to use).
  int next_parity() { return static_cast<int>(piece_++ & 1); }
  // Publishes this rank's header for the piece of parity p.
  void put_header(int p, const CollectiveArgs& a);
  // After the first phase of a collective: everyone's headers agree, or
  // raises on every rank alike. Fills alltoall counts.
  void check_headers(int p, CollectiveArgs& a);
  // Arrive at the next phase and wait for every peer to arrive too.
  void sync(Deadline dl, const char* what);
  void wait_for_peer(int peer, uint32_t phase, Deadline dl, const char* what);

  ShmControl* control(int i) const;
  // Copies bytes at remote_addr in local peer `peer` into dst through
  // process_vm_readv(2); false when the kernel refuses.
  bool read_peer(int peer, void* dst, uint64_t remote_addr, size_t bytes) const;
  // A read_peer() of `what` from local peer `peer` (or, writing, a copy
  // into it) that failed with errno `err`: a peer whose process is gone
  // (ESRCH) is a peer failure naming its rank, a refusal by the kernel is
  // ringcc's error.
  [[noreturn]] void raise_read_failure(int peer, int err, const char* what, bool writing = false) const;
  // The direct path of broadcast(): the readers read the root's buffer,
  // the root writing a share of it into them meanwhile.
  void broadcast_direct(const CollectiveArgs& a, int root, int p, Deadline dl);
  uint8_t* header_slot(int i, int parity) const;
  uint8_t* area(int i, int parity) const;

  std::vector<int> ranks_;
  int me_;
  size_t area_bytes_;
  size_t header_bytes_;
  size_t small_bytes_;
  size_t allreduce_piece_bytes_;
  StoreMode store_mode_ = StoreMode::kAuto;
  StoreChooser chooser_;  // used by the first rank only
  struct Timing {
    int size_class = -1;  // none pending
    bool bypass = false;
    double ns_per_byte = 0;
  } timing_;
  size_t segment_bytes_;
  std::vector<ShmSegment> segments_;
  uint32_t phase_ = 0;
  uint64_t piece_ = 0;
  double peer_wait_us_ = 0;  // see take_peer_wait_us()
  std::atomic<int> waiting_for_{-1};  // see waiting_for()
  // The collective running moves more than small_bytes_ per rank: its
  // phases end with long copies, which a waiter catches by spinning even
  // when its thread has been preempted (wait_policy.h).
  bool bulk_ = false;
  bool cma_ = false;               // every rank can read every peer's memory directly
  std::vector<const void*> srcs_;  // scratch for reduce_many
  std::vector<uint8_t> scratch_;   // small segmented allreduces reduce here
};

}  // namespace ringcc
