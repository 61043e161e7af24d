// The rendezvous key-value store interface. Rank 0 serves a TcpStore by
// default; adapters may hand in their own (torch's c10d store, MPI).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringcc {

class TcpStore;

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value (overwrites).
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until key exists, then returns its value; raises Error(kTimeout)
  // naming the key when timeout passes.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Returns the value if the key exists now, without waiting.
  virtual bool try_get(const std::string& key, std::string* value) = 0;
  // Atomically adds delta to the integer stored at key (0 if absent) and
  // returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // The store that the whole job shares (a PrefixStore's base): records
  // that every communicator of the job should see, such as its first
  // failure, go there.
  virtual Store& job_store() { return *this; }
  // The rendezvous store served by rank 0 that this store is, or sees
  // through; nullptr for any other (an adapter's, a prefix of one).
  virtual TcpStore* rank0_store() { return nullptr; }
};

}  // namespace ringcc
