// The point-to-point transport interface: non-blocking sends and receives of
// byte ranges between the ranks of a communicator, with explicit progress and
// completion. What A sends to B is one byte stream: B's receives from A
// take its bytes in the order they were posted, whatever the sizes of the
// sends (a message may be received in other pieces than it was sent in;
// the ring allreduce and the chain broadcast rely on this).
//
// Transports carry host memory; device memory moves through the device
// backends (core/backends/), which have their own ways.
#pragma once

#include <poll.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/base/deadline.h"

namespace ringcc {

// One outstanding send or receive.
class Request {
 public:
  virtual ~Request() = default;
  // Moves the operation forward without blocking; returns true once it is
  // complete. Raises Error(kPeerFailure) when the peer is gone.
  virtual bool progress() = 0;
  // Blocks for at most timeout_ms until progress() may advance (data or
  // space arrived). Also the place to notice a vanished peer.
  virtual void block(int timeout_ms) = 0;
  // Adds the descriptors whose readiness would let progress() advance;
  // returns false for requests that cannot be waited on through poll(2).
  // Lets a waiter sleep on several requests at once.
  virtual bool add_pollfds(std::vector<pollfd>* /*fds*/) { return false; }
  // The peer this request talks to (for messages).
  virtual int peer() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // True when this transport has a connection to peer.
  virtual bool reaches(int peer) const = 0;
  virtual std::unique_ptr<Request> isend(int peer, const void* data, size_t size) = 0;
  virtual std::unique_ptr<Request> irecv(int peer, void* data, size_t size) = 0;
  // The same peers on streams whose connections carry data one way only
  // (the TCP transport's: a socket that carries a large send one way
  // holds back what arrives the other way until the send is done). A
  // message sent on it is received on it. Transports without such
  // streams return themselves.
  virtual Transport* one_way() { return this; }
  // Makes every peer blocked on us fail fast (closes connections, raises
  // abort flags). The transport is unusable afterwards.
  virtual void abort(const std::string& reason) = 0;
  // Tells every peer that this rank takes part in nothing more (it shut
  // down): a peer waiting for data from us fails at once; what we sent
  // still arrives.
  virtual void leave() {}
};

// Drives requests to completion: spins on progress() for a short while,
// then blocks in short slices so an idle rank does not burn a core. Raises
// Error(kTimeout) naming the peers still pending at the deadline.
void wait_all(const std::vector<Request*>& requests, Deadline deadline, const char* what);
// Waits for `target` only, while also progressing `others` (their
// completion is not required).
void wait_one(Request* target, const std::vector<Request*>& others, Deadline deadline, const char* what);

// Bytes per pipelined chunk (RINGCC_CHUNK_BYTES, default 1 MiB), read
// once per process; ring_chunk_bytes_from_env() reads it now. The ring
// algorithms pipeline in chunks of it, the MPI transport sends in pieces of it.
size_t ring_chunk_bytes();
size_t ring_chunk_bytes_from_env();

// Allreduces, allgathers, reduce-scatters and alltoall messages of fewer
// bytes than this (RINGCC_TCP_ONE_WAY_BYTES, default 8 MiB; the same on
// every rank) exchange their data on the links' one-way streams
// (Transport::one_way); larger ones and broadcasts share one connection
// both ways, whose data segments carry the other way's acknowledgements
// (fewer packets where the CPUs bound a large transfer).
// one_way_for(t, bytes) is t's stream for a collective of `bytes`, which
// the ranks have agreed on. The agreement itself, which must reach its
// verdict whatever the ranks ask for, keeps to the shared stream (on it a
// 64 MiB broadcast of 2 ranks across namespaces took half as long as
// with the agreement on the one-way streams).
uint64_t one_way_bytes();
uint64_t one_way_bytes_from_env();
Transport* one_way_for(Transport* t, uint64_t bytes);

}  // namespace ringcc
