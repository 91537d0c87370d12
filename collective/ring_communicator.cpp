// The ring all-reduce, step by step.
//
// n ranks stand in a ring. Rank r only ever sends to its right neighbour (r + 1) % n and receives from
// its left neighbour (r - 1) % n. The buffer of N elements is cut into n chunks c_0 .. c_{n-1}; when n
// does not divide N the first N % n chunks get one element more, and when N < n some chunks are empty
// (they are still "sent", as empty messages, so every rank runs the same steps).
//
// Phase 1, reduce-scatter: n - 1 steps. In step s, rank r sends chunk (r - 1 - s) to the right, receives
// chunk (r - 2 - s) from the left and adds it into its own copy of that chunk. Each chunk's partial sum
// travels round the ring and picks up one more rank's contribution per hop; after n - 1 hops it has all
// n, and it ends on rank r for chunk r. With n = 3, chunks a, b, c and rank r's values a_r, b_r, c_r:
//
//             rank 0               rank 1               rank 2
//   step 0    sends c0             sends a1             sends b2             (each to its right)
//             b := b0+b2           c := c1+c0           a := a2+a1
//   step 1    sends b0+b2          sends c1+c0          sends a2+a1
//             a := a0+a2+a1        b := b1+b0+b2        c := c2+c1+c0        rank r owns chunk r
//
// Phase 2, all-gather: n - 1 more steps. In step s, rank r sends chunk (r - s), which it has finished,
// to the right and stores the finished chunk (r - 1 - s) arriving from the left as it is. After n - 1
// hops every finished chunk has visited every rank.
//
// Why 2(n - 1) steps: a chunk needs n - 1 hops to reach all n ranks, once to collect the contributions
// and once more to hand out the result. Each step moves N / n elements per rank, so each rank sends
// 2 (n - 1) / n * N elements in all: almost independent of n, and no link carries more than any other.
// That is why the ring is the standard all-reduce for large buffers; its cost is the 2(n - 1) latencies,
// which makes it slow for small ones.
//
// avg is sum followed by one division, done by the owner of each chunk between the two phases, so each
// element is divided once and every rank receives the same rounded value.
#include "collective/ring_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tensor/creation.h"

namespace accel {

namespace {

constexpr int kRingTag = 0;  // links_ carries nothing but ring steps, so one tag is enough

// A 1-d view of elements [begin, begin + count) of a contiguous tensor.
Tensor flat_view(const Tensor& t, int64_t begin, int64_t count) {
  return Tensor::make_view(t.storage(), {count}, {1}, t.offset() + begin, t.dtype());
}

// The ring reduces and copies on the host.
void require_cpu(const char* op, const Tensor& t) {
  if (!t.device().is_cpu())
    throw Error(fmt::format("{} (ring): tensor is on {}, but the ring backend takes CPU tensors only", op,
                            t.device().str()));
}

}  // namespace

RingCommunicator::RingCommunicator(std::shared_ptr<Communicator> transport)
    : transport_(std::move(transport)), links_(transport_->dup()) {
  rank_ = transport_->rank();
  size_ = transport_->size();
  right_ = wrap(rank_ + 1);
  left_ = wrap(rank_ - 1);
}

std::unique_ptr<Communicator> RingCommunicator::create_dup() {
  return std::make_unique<RingCommunicator>(std::shared_ptr<Communicator>(transport_->dup()));
}

std::unique_ptr<Communicator> RingCommunicator::create_split(int color, int key) {
  std::unique_ptr<Communicator> part = transport_->split(color, key);
  if (!part) return nullptr;
  return std::make_unique<RingCommunicator>(std::shared_ptr<Communicator>(std::move(part)));
}

RingCommunicator::Chunk RingCommunicator::chunk(int64_t total, int i) const {
  const int64_t base = total / size_;
  const int64_t extra = total % size_;  // the first `extra` chunks hold one element more
  return Chunk{i * base + std::min<int64_t>(i, extra), base + (i < extra ? 1 : 0)};
}

void RingCommunicator::exchange(const Tensor& outgoing, const Tensor& incoming) {
  // Both are posted before either is waited for. Were every rank to finish its send first, each would
  // wait for a receive that its neighbour has not posted yet, and the ring would deadlock.
  Work sent = links_->send_async(outgoing, right_, kRingTag);
  links_->recv(incoming, left_, kRingTag);
  sent.wait();
}

Tensor RingCommunicator::scratch(int which, int64_t count, DType dtype) {
  // Large blocks come from the system as fresh pages on every allocation, and touching them (a page
  // fault and zeroing per 4 KB) costs about as much as a step of the ring moving them; so the ring
  // keeps its largest scratch blocks.
  std::shared_ptr<Storage>& kept = scratch_[which];
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  if (!kept || kept->nbytes() < bytes) kept = std::make_shared<Storage>(bytes, Device::cpu());
  return Tensor::make_view(kept, {count}, {1}, 0, dtype);
}

void RingCommunicator::reduce_scatter_phase(const Tensor& buffer, int64_t total, ReduceOp op) {
  // Room for the largest chunk (chunk 0), reused by every step.
  const Tensor incoming = scratch(0, chunk(total, 0).count, buffer.dtype());
  for (int step = 0; step < size_ - 1; ++step) {
    const Chunk send = chunk(total, wrap(rank_ - 1 - step));
    const Chunk recv = chunk(total, wrap(rank_ - 2 - step));
    const Tensor arrived = flat_view(incoming, 0, recv.count);
    exchange(flat_view(buffer, send.begin, send.count), arrived);
    // Our own contribution joins the partial result that has come round the ring.
    const Tensor mine = flat_view(buffer, recv.begin, recv.count);
    reduce_into(buffer.dtype(), op, mine.data_ptr(), arrived.data_ptr(), recv.count);
  }
}

void RingCommunicator::all_gather_phase(const Tensor& buffer, int64_t total) {
  for (int step = 0; step < size_ - 1; ++step) {
    const Chunk send = chunk(total, wrap(rank_ - step));
    const Chunk recv = chunk(total, wrap(rank_ - 1 - step));
    // A finished chunk is stored as it arrives, straight into its place.
    exchange(flat_view(buffer, send.begin, send.count), flat_view(buffer, recv.begin, recv.count));
  }
}

Work RingCommunicator::start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) {
  require_cpu("all_reduce", in);
  require_cpu("all_reduce", out);
  return queue_.submit([this, in, out, op, in_place] {
    const int64_t total = out.numel();
    if (!in_place) std::memcpy(out.data_ptr(), in.data_ptr(), out.nbytes());
    reduce_scatter_phase(out, total, op);
    const Chunk own = chunk(total, rank_);
    if (op == ReduceOp::avg) divide_by(out.dtype(), flat_view(out, own.begin, own.count).data_ptr(), own.count, size_);
    all_gather_phase(out, total);
  });
}

Work RingCommunicator::start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) {
  require_cpu("reduce_scatter", in);
  require_cpu("reduce_scatter", out);
  return queue_.submit([this, in, out, op, in_place] {
    // The phase overwrites its buffer. In place that may be `in` itself, whose slot for this rank is
    // `out`: exactly where the phase leaves this rank's result. Otherwise it works on a copy of in.
    Tensor buffer = in;
    if (!in_place) {
      buffer = scratch(1, in.numel(), in.dtype());
      std::memcpy(buffer.data_ptr(), in.data_ptr(), in.nbytes());
    }
    const int64_t total = in.numel();  // size_ equal chunks, one per rank
    reduce_scatter_phase(buffer, total, op);
    const Chunk own = chunk(total, rank_);
    if (!in_place) std::memcpy(out.data_ptr(), flat_view(buffer, own.begin, own.count).data_ptr(), out.nbytes());
    if (op == ReduceOp::avg) divide_by(out.dtype(), out.data_ptr(), own.count, size_);
  });
}

Work RingCommunicator::start_all_gather(const Tensor& in, const Tensor& out, bool in_place) {
  require_cpu("all_gather", in);
  require_cpu("all_gather", out);
  return queue_.submit([this, in, out, in_place] {
    // Our own part is the one finished chunk we start with; the phase brings the others.
    const int64_t total = out.numel();
    const Chunk own = chunk(total, rank_);
    if (!in_place) std::memcpy(flat_view(out, own.begin, own.count).data_ptr(), in.data_ptr(), in.nbytes());
    all_gather_phase(out, total);
  });
}

// The rest needs no ring: it goes to the transport as it is.
Work RingCommunicator::start_broadcast(const Tensor& tensor, int root) { return transport_->broadcast_async(tensor, root); }

Work RingCommunicator::start_gather(const Tensor& in, const Tensor& out, int root) {
  return transport_->gather_async(in, out, root);
}

Work RingCommunicator::start_barrier() { return transport_->barrier_async(); }

Work RingCommunicator::start_send(const Tensor& tensor, int dst, int tag) { return transport_->send_async(tensor, dst, tag); }

Work RingCommunicator::start_recv(const Tensor& tensor, int src, int tag) { return transport_->recv_async(tensor, src, tag); }

}  // namespace accel
