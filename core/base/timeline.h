// A Chrome-trace / Perfetto timeline of the engine: one row per tensor name
// (a trace "process" named after the tensor), with its phases as duration
// events: QUEUED, NEGOTIATING, then for the collective that ran it
// MEMCPY_IN_FUSION_BUFFER, the collective itself and MEMCPY_OUT_FUSION_BUFFER.
// Tensors fused into one collective carry the same "fusion" id and size in
// their events' args. The file is a JSON array, closed on stop().
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ringcc {

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();

  // Starts writing to path (truncates). Raises Error(kInvalidArgument)
  // when the file cannot be opened.
  void start(const std::string& path);
  // Closes the JSON array and the file. Idempotent.
  void stop();
  // Safe from any thread (enqueuing threads stamp times only while a
  // timeline records).
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // A phase of `tensor` from begin_us to end_us (microseconds of the
  // steady clock); args is a JSON object body ("" for none).
  void phase(const std::string& tensor, const char* name, int64_t begin_us, int64_t end_us,
             const std::string& args = "");
  // An instant mark on the tensor's row.
  void mark(const std::string& tensor, const char* name, int64_t at_us);

  static int64_t now_us();

 private:
  int row_of(const std::string& tensor);
  void write_event(const std::string& json);

  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::atomic<bool> active_{false};
  bool first_ = true;
  std::unordered_map<std::string, int> rows_;
};

}  // namespace ringcc
