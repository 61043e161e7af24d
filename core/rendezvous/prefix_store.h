// A view of a Store whose keys all carry a prefix, so that several
// communicators can meet through one store without their keys colliding.
#pragma once

#include <memory>
#include <string>

#include "core/rendezvous/store.h"

namespace ringcc {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  void set(const std::string& key, const std::string& value) override { base_->set(prefix_ + key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return base_->get(prefix_ + key, timeout);
  }
  bool try_get(const std::string& key, std::string* value) override { return base_->try_get(prefix_ + key, value); }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(prefix_ + key, delta); }
  Store& job_store() override { return base_->job_store(); }

 private:
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace ringcc
