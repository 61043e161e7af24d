// Chooses how the shared-memory allreduce writes its areas, plain stores or
// stores that bypass the cache (collective/stream_copy.h), by timing both.
//
// Which is faster depends on where the ranks' CPUs sit, and that can change
// while a job runs (a virtual machine's CPUs move between the host's CPU
// complexes): under one cache, plain stores win by 1.3-2x (the peers read
// the areas from the shared cache); under different caches, bypassing wins
// by 1.4-2x (a plain store must first take away the copy a peer read). Nothing
// the process can read tells the two apart, so the first rank of the host
// times its allreduces per size class (a power of two of bytes, from 32 KiB)
// with the way it used (past the first kWarmupCalls of the class, which pay
// for page faults and cold caches), keeps a moving average of each way's
// time per byte, uses the faster and tries the other once every
// kExploreEvery calls of the class; its choices travel to the other ranks
// in its control block. It leaves plain stores only for a clear gain
// (kToBypass) and returns to them more readily (kToPlain): two ways within
// the noise do not take turns, and plain stores are what a machine whose
// CPUs share one cache wants. Below 1 MiB a call lasts tens of
// microseconds, where a preempted rank skews a sample most, and bypassing
// costs 20-30% under one cache against 2.5-3x gained under two: there it
// takes a larger gain (kToBypassBelow1MiB). A fused batch, gathered from
// and scattered to many tensors, is timed apart from one buffer of its
// size: it takes longer per byte either way, and one class fed both would
// compare one way's batches with the other way's buffers wherever a job
// (or a bench) alternates them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcc {

class StoreChooser {
 public:
  static constexpr size_t kFromBytes = size_t{32} << 10;
  static constexpr int kSizeClasses = 16;
  static constexpr int kClasses = 2 * kSizeClasses;  // one bit each in choices()
  static constexpr uint32_t kWarmupCalls = 2;
  static constexpr uint32_t kExploreEvery = 32;
  static constexpr double kToBypass = 0.85;  // bypassing at most this much of plain's time
  static constexpr double kToBypassBelow1MiB = 0.7;  // the same for the classes below 1 MiB
  static constexpr double kToPlain = 0.95;   // plain at most this much of bypassing's time
  static constexpr double kSpike = 1.5;      // a sample counts as at most this much of the average

  // The class of an allreduce of `bytes`, or -1 below kFromBytes: a power
  // of two from kFromBytes, kSizeClasses on for a fused batch (`scattered`).
  static int size_class(size_t bytes, bool scattered = false);

  // One allreduce of size class c written with (bypass) took ns_per_byte.
  void record(int c, bool bypass, double ns_per_byte);
  // Bit c: whether the next allreduce of class c bypasses the cache.
  uint32_t choices() const { return choices_; }

 private:
  struct Class {
    double estimate[2] = {-1.0, -1.0};  // ns per byte, plain and bypassing
    uint32_t seen = 0;                  // calls of the class, recorded or not
    uint32_t calls = 0;                 // recorded calls
    bool bypass = false;                // the way in use between explorations
  };
  static bool choose(Class& k, double to_bypass);

  Class classes_[kClasses];
  uint32_t choices_ = 0;
};

}  // namespace ringcc
