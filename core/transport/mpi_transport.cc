#include "core/transport/mpi_transport.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"
#include "core/base/log.h"

namespace ringcc {

struct MpiTransport::Recv {
  uint8_t* ptr;
  size_t left;
  bool done = false;
};

// The receive side of one peer: posted receives in order, the matched MPI
// receive in flight for the first of them, and the unread rest of a piece
// that was larger than the receive it arrived for.
struct MpiTransport::Link {
  int peer = -1;
  std::deque<std::shared_ptr<Recv>> queue;
  rcmpi_req* inflight = nullptr;
  size_t inflight_bytes = 0;
  bool inflight_staged = false;
  std::vector<uint8_t> staging;
  size_t stage_off = 0, stage_len = 0;
  std::string failure;

  void pump(MpiTransport& t) {
    if (!failure.empty()) raise(ErrorKind::kPeerFailure, failure);
    const MpiApi& api = t.api_;
    while (!queue.empty()) {
      Recv& r = *queue.front();
      if (inflight) {
        int done = 0;
        int64_t got = 0;
        int rc = api.test(inflight, &done, &got);
        if (rc != 0) {
          inflight = nullptr;
          fail_with(rc, "MPI receive from rank " + std::to_string(peer));
        }
        if (!done) return;
        inflight = nullptr;
        if (inflight_staged) {
          stage_off = 0;
          stage_len = inflight_bytes;
        } else {
          r.ptr += inflight_bytes;
          r.left -= inflight_bytes;
        }
      }
      if (stage_off < stage_len) {
        const size_t n = std::min(r.left, stage_len - stage_off);
        std::memcpy(r.ptr, staging.data() + stage_off, n);
        stage_off += n;
        r.ptr += n;
        r.left -= n;
      }
      if (r.left == 0) {
        r.done = true;
        queue.pop_front();
        continue;
      }
      int found = 0;
      int64_t bytes = 0;
      rcmpi_msg* msg = nullptr;
      int rc = api.improbe(t.comm_->get(), peer, kDataTag, &found, &bytes, &msg);
      if (rc != 0) fail_with(rc, "MPI probe for rank " + std::to_string(peer));
      if (!found) return;
      const size_t m = static_cast<size_t>(bytes);
      inflight_bytes = m;
      inflight_staged = m > r.left;
      void* dst = r.ptr;
      if (inflight_staged) {
        if (staging.size() < m) staging.resize(m);
        dst = staging.data();
      }
      rc = api.imrecv(msg, dst, bytes, &inflight);
      if (rc != 0) {
        inflight = nullptr;
        fail_with(rc, "MPI receive from rank " + std::to_string(peer));
      }
    }
  }

  [[noreturn]] void fail_with(int rc, const std::string& what) {
    char text[512] = {};
    mpi_api().error_string(rc, text, sizeof(text));
    failure = what + " failed: " + text;
    raise(ErrorKind::kPeerFailure, failure);
  }
};

namespace {

class MpiSendRequest : public Request {
 public:
  MpiSendRequest(MpiTransport* t, int peer) : t_(t), peer_(peer) {}
  ~MpiSendRequest() override {
    for (rcmpi_req* r : reqs_) {
      if (r) mpi_api().cancel(r);
    }
  }
  void add(rcmpi_req* r) { reqs_.push_back(r); }

  bool progress() override {
    const MpiApi& api = mpi_api();
    bool all = true;
    for (rcmpi_req*& r : reqs_) {
      if (!r) continue;
      int done = 0;
      int rc = api.test(r, &done, nullptr);
      if (rc != 0) {
        api.cancel(r);
        r = nullptr;
        char text[512] = {};
        api.error_string(rc, text, sizeof(text));
        raise(ErrorKind::kPeerFailure, "MPI send to rank ", peer_, " failed: ", text);
      }
      if (done) {
        r = nullptr;
      } else {
        all = false;
      }
    }
    if (!all) t_->check_failed();
    return all;
  }

  void block(int timeout_ms) override {
    const Deadline until = deadline_after(timeout_ms / 1000.0);
    while (!progress() && Clock::now() < until) pause_();
  }

  int peer() const override { return peer_; }

 private:
  MpiTransport* t_;
  int peer_;
  std::vector<rcmpi_req*> reqs_;
  MpiPause pause_;
};

class MpiRecvRequest : public Request {
 public:
  MpiRecvRequest(MpiTransport* t, MpiTransport::Link* link, std::shared_ptr<MpiTransport::Recv> r)
      : t_(t), link_(link), recv_(std::move(r)) {}
  ~MpiRecvRequest() override {
    if (!recv_->done) {
      // Abandoned (an error elsewhere): the stream to this peer is out of
      // step from here on.
      auto& q = link_->queue;
      q.erase(std::remove(q.begin(), q.end(), recv_), q.end());
      if (link_->failure.empty()) {
        link_->failure = "an earlier receive from rank " + std::to_string(link_->peer) +
                         " was abandoned; the MPI transport is out of step";
      }
    }
  }

  bool progress() override {
    if (recv_->done) return true;
    link_->pump(*t_);
    if (!recv_->done) t_->check_failed();
    return recv_->done;
  }

  void block(int timeout_ms) override {
    const Deadline until = deadline_after(timeout_ms / 1000.0);
    while (!progress() && Clock::now() < until) pause_();
  }

  int peer() const override { return link_->peer; }

 private:
  MpiTransport* t_;
  MpiTransport::Link* link_;
  std::shared_ptr<MpiTransport::Recv> recv_;
  MpiPause pause_;
};

}  // namespace

MpiTransport::MpiTransport(std::shared_ptr<MpiComm> comm)
    : comm_(std::move(comm)), api_(mpi_api()), piece_bytes_(std::min<size_t>(ring_chunk_bytes(), size_t{1} << 30)) {
  links_.resize(static_cast<size_t>(comm_->size()));
  for (int p = 0; p < comm_->size(); ++p) {
    links_[static_cast<size_t>(p)] = std::make_unique<Link>();
    links_[static_cast<size_t>(p)]->peer = p;
  }
}

MpiTransport::~MpiTransport() {
  for (auto& link : links_) {
    if (link && link->inflight) api_.cancel(link->inflight);
  }
  for (rcmpi_req* r : abort_sends_) api_.cancel(r);
}

bool MpiTransport::reaches(int peer) const { return peer >= 0 && peer < comm_->size() && peer != comm_->rank(); }

void MpiTransport::check_failed() {
  if (!failure_.empty()) raise(ErrorKind::kPeerFailure, failure_);
  char text[512];
  int source = -1, bytes = 0;
  if (api_.take_tagged(comm_->get(), kAbortTag, text, sizeof(text) - 1, &source, &bytes) == 0 && source >= 0) {
    text[std::max(0, std::min(bytes, static_cast<int>(sizeof(text)) - 1))] = 0;
    failure_ = "rank " + std::to_string(source) + " aborted: " + text;
    raise(ErrorKind::kPeerFailure, failure_);
  }
}

std::unique_ptr<Request> MpiTransport::isend(int peer, const void* data, size_t size) {
  RINGCC_CHECK(reaches(peer), ErrorKind::kInternal, "no MPI peer ", peer);
  if (!failure_.empty()) raise(ErrorKind::kPeerFailure, failure_);
  auto req = std::make_unique<MpiSendRequest>(this, peer);
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t off = 0; off < size; off += piece_bytes_) {
    rcmpi_req* r = nullptr;
    const size_t n = std::min(piece_bytes_, size - off);
    mpi_check(api_.isend(comm_->get(), p + off, static_cast<int64_t>(n), peer, kDataTag, &r), "MPI_Isend");
    req->add(r);
  }
  return req;
}

std::unique_ptr<Request> MpiTransport::irecv(int peer, void* data, size_t size) {
  RINGCC_CHECK(reaches(peer), ErrorKind::kInternal, "no MPI peer ", peer);
  if (!failure_.empty()) raise(ErrorKind::kPeerFailure, failure_);
  Link* link = links_[static_cast<size_t>(peer)].get();
  auto r = std::make_shared<Recv>(Recv{static_cast<uint8_t*>(data), size});
  if (size == 0) {
    r->done = true;
  } else {
    link->queue.push_back(r);
  }
  return std::make_unique<MpiRecvRequest>(this, link, std::move(r));
}

void MpiTransport::abort(const std::string& reason) {
  if (!failure_.empty()) return;
  failure_ = "this rank aborted: " + reason;
  // Tell every peer; the sends are never waited for (they complete or are
  // dropped with the communicator).
  abort_message_.assign(reason.begin(), reason.begin() + std::min<size_t>(reason.size(), 500));
  abort_message_.push_back(0);
  for (int p = 0; p < comm_->size(); ++p) {
    if (p == comm_->rank()) continue;
    rcmpi_req* r = nullptr;
    if (api_.isend(comm_->get(), abort_message_.data(), static_cast<int64_t>(abort_message_.size()), p, kAbortTag,
                   &r) == 0) {
      abort_sends_.push_back(r);
    }
  }
}

}  // namespace ringcc
