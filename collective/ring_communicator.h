// RingCommunicator: the ring all-reduce written out for learners, as a reduce-scatter followed by an
// all-gather over send/recv between neighbours. It runs over any other communicator's point-to-point
// (the mpi backend's, in practice) and passes the same tests as the library it is measured against.
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "collective/work_queue.h"

namespace accel {

class RingCommunicator final : public Communicator {
 public:
  // Collective: every rank builds its ring together. The ring's own messages travel on
  // transport->dup(), so they never meet the caller's send/recv on transport. broadcast, gather,
  // barrier, send and recv are handed to transport itself; all_reduce, reduce_scatter and all_gather
  // are the ring versions below and run, one at a time in call order, on the ring's own thread.
  explicit RingCommunicator(std::shared_ptr<Communicator> transport);
  ~RingCommunicator() override = default;  // queue_ goes first and finishes the queued collectives

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "ring"; }
  std::unique_ptr<Communicator> create_dup() override;

 protected:
  Work start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_broadcast(const Tensor& tensor, int root) override;
  Work start_all_gather(const Tensor& in, const Tensor& out, bool in_place) override;
  Work start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_gather(const Tensor& in, const Tensor& out, int root) override;
  Work start_barrier() override;
  Work start_send(const Tensor& tensor, int dst, int tag) override;
  Work start_recv(const Tensor& tensor, int src, int tag) override;
  // The ring over the sub-group: a RingCommunicator over the split of the transport.
  std::unique_ptr<Communicator> create_split(int color, int key) override;

 private:
  // Where chunk i of a ring buffer lies; see ring_communicator.cpp.
  struct Chunk {
    int64_t begin = 0;
    int64_t count = 0;
  };
  Chunk chunk(int64_t total, int i) const;
  int wrap(int i) const { return ((i % size_) + size_) % size_; }

  // The two phases of the ring, on a flat contiguous buffer of `total` elements.
  void reduce_scatter_phase(const Tensor& buffer, int64_t total, ReduceOp op);
  void all_gather_phase(const Tensor& buffer, int64_t total);
  // One step of either phase: send `outgoing` to the right while receiving `incoming` from the left.
  void exchange(const Tensor& outgoing, const Tensor& incoming);
  // count elements of dtype in the ring thread's scratch memory `which` (0 or 1), kept between calls.
  Tensor scratch(int which, int64_t count, DType dtype);

  std::shared_ptr<Communicator> transport_;
  std::unique_ptr<Communicator> links_;
  int rank_ = 0;
  int size_ = 1;
  int right_ = 0;
  int left_ = 0;
  std::shared_ptr<Storage> scratch_[2];  // used by the queue's thread only
  WorkQueue queue_;  // last: destroyed first, so queued collectives finish while links_ still exists
};

}  // namespace accel
