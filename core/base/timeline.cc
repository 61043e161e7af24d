#include "core/base/timeline.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/base/error.h"

namespace ringcc {

namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

Timeline::~Timeline() { stop(); }

int64_t Timeline::now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Timeline::start(const std::string& path) {
  stop();  // a timeline being written is closed as a complete file first
  std::lock_guard<std::mutex> lock(mu_);
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) {
    raise(ErrorKind::kInvalidArgument, "cannot write the timeline to ", path, ": ", std::strerror(errno));
  }
  std::fputs("[\n", file_);
  first_ = true;
  rows_.clear();
  active_.store(true, std::memory_order_relaxed);
}

void Timeline::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  active_.store(false, std::memory_order_relaxed);
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

void Timeline::write_event(const std::string& json) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(json.c_str(), file_);
}

int Timeline::row_of(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(tensor, row);
  write_event("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(row) +
              ", \"args\": {\"name\": \"" + json_escape(tensor) + "\"}}");
  write_event("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + std::to_string(row) +
              ", \"args\": {\"sort_index\": " + std::to_string(row) + "}}");
  return row;
}

void Timeline::phase(const std::string& tensor, const char* name, int64_t begin_us, int64_t end_us,
                     const std::string& args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  const int row = row_of(tensor);
  write_event("{\"name\": \"" + std::string(name) + "\", \"ph\": \"X\", \"pid\": " + std::to_string(row) +
              ", \"tid\": 1, \"ts\": " + std::to_string(begin_us) + ", \"dur\": " +
              std::to_string(end_us > begin_us ? end_us - begin_us : 0) + ", \"args\": {" + args + "}}");
}

void Timeline::mark(const std::string& tensor, const char* name, int64_t at_us) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  const int row = row_of(tensor);
  write_event("{\"name\": \"" + std::string(name) + "\", \"ph\": \"i\", \"s\": \"p\", \"pid\": " + std::to_string(row) +
              ", \"ts\": " + std::to_string(at_us) + "}");
}

}  // namespace ringcc
