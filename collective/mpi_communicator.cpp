// The Open MPI backend, with two threads per communicator:
//  - collectives run one at a time, in submission order, as the blocking MPI calls (MPI_Allreduce, ...)
//    on a collective thread. They are the calls a program using MPI directly makes, with the same
//    algorithms. MPI's nonblocking collectives are another implementation (libnbc in Open MPI): its
//    MPI_Iallreduce reduces to one rank and broadcasts back the whole buffer on fewer than 4 ranks or
//    in place, and allocates a buffer of the message's size per call, which made large all-reduces
//    on 2 ranks about half as fast (docs/benchmarks.md has the numbers). PyTorch's MPI backend does
//    the same: blocking collectives on a worker thread.
//  - send and recv are started as MPI_Isend/MPI_Irecv by a polling thread in submission order and
//    tested with MPI_Test; polling is what drives their progress while the caller computes. They do
//    not queue behind a collective, so a rank blocked in a collective still receives the message its
//    peer must send before joining that collective.
#include "collective/mpi_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "accel_config.h"
#include "collective/mpi_environment.h"
#include "collective/mpi_types.h"
#include "collective/work_queue.h"

#if ACCEL_WITH_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"
#endif

namespace accel {

namespace {

// The polling thread: this many idle polls (each yielding the core), then sleeps.
constexpr int kSpinPolls = 256;
constexpr std::chrono::microseconds kBackoff{20};

std::string failure(const std::string& op, const char* call, int rc) {
  return fmt::format("{} (mpi): {}", op, mpi_error_text(call, rc));
}

void check(const char* op, const char* call, int rc) {
  if (rc != MPI_SUCCESS) throw Error(failure(op, call, rc));
}

// MPI counts elements in an int.
int mpi_count(const char* op, int64_t count) {
  if (count > std::numeric_limits<int>::max())
    throw Error(fmt::format("{} (mpi): {} elements exceed MPI's limit of {} per call", op, count,
                            std::numeric_limits<int>::max()));
  return static_cast<int>(count);
}

// A pool of pinned host buffers for staging device tensors, kept for the communicator's life so a
// training step's bucket all-reduces do not pay for cudaHostAlloc each time. Thread-safe: operations
// take buffers on the caller's thread and give them back on the communication thread.
class PinnedPool {
 public:
  PinnedPool() = default;
  ~PinnedPool() {
#if ACCEL_WITH_CUDA
    for (const auto& [bytes, ptr] : free_) cudaFreeHost(ptr);
#endif
  }
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A buffer of at least bytes; returns its capacity in `capacity`.
  void* take(size_t bytes, size_t& capacity) {
    {
      std::lock_guard lock(mutex_);
      const auto it = free_.lower_bound(bytes);
      if (it != free_.end()) {
        capacity = it->first;
        void* ptr = it->second;
        free_.erase(it);
        return ptr;
      }
    }
    capacity = (std::max<size_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
    void* ptr = nullptr;
#if ACCEL_WITH_CUDA
    ACCEL_CUDA_CHECK(cudaHostAlloc(&ptr, capacity, cudaHostAllocPortable), "cudaHostAlloc({} bytes, mpi staging)",
                     capacity);
#endif
    return ptr;
  }
  void give(void* ptr, size_t capacity) {
    std::lock_guard lock(mutex_);
    free_.emplace(capacity, ptr);
  }

 private:
  static constexpr size_t kGranule = 64 * 1024;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
};

// The one place where tensor memory meets MPI: every buffer an MPI call reads or writes comes from an
// operation's Staging. CPU tensors pass their own memory. A CUDA tensor is staged in a pinned host
// buffer: copied in when the operation starts (on its device's compute stream, then a synchronisation,
// so the copy sees every kernel queued before), and, if the operation writes it, copied back when the
// operation finishes, before its Work completes. Several ranks can so share one GPU.
class Staging {
 public:
  Staging(PinnedPool& pool, const char* op) : pool_(pool), op_(op) {}
  ~Staging() {
    for (const Entry& e : entries_)
      if (e.capacity > 0) pool_.give(e.host, e.capacity);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // The host memory MPI uses for t. read: MPI reads t's values; write: MPI writes t. A tensor inside
  // one staged before (an in-place operation's slot) shares that tensor's buffer.
  void* host(const Tensor& t, bool read, bool write) {
    if (t.device().is_cpu()) return t.data_ptr();
#if ACCEL_WITH_CUDA
    cuda::check_device(fmt::format("{} (mpi)", op_).c_str(), t.device());
#else
    throw Error(fmt::format("{} (mpi): tensor is on {}, but accel was built without CUDA", op_, t.device().str()));
#endif
    const char* begin = static_cast<const char*>(t.data_ptr());
    for (Entry& e : entries_) {
      if (e.tensor.storage() == t.storage() && begin >= e.begin && begin + t.nbytes() <= e.begin + e.bytes) {
        e.read = e.read || read;
        e.write = e.write || write;
        return e.host + (begin - e.begin);
      }
    }
    Entry e{t, begin, t.nbytes(), nullptr, 0, read, write};
    e.host = static_cast<char*>(pool_.take(e.bytes, e.capacity));
    entries_.push_back(e);
    return e.host;
  }

  // Copies the tensors MPI reads to their buffers, once every host() call is made.
  void copy_in() {
#if ACCEL_WITH_CUDA
    for (const Entry& e : entries_) {
      if (!e.read || e.bytes == 0) continue;
      const cuda::DeviceGuard guard(e.tensor.device());
      const cudaStream_t stream = cuda::compute_stream(e.tensor.device());
      ACCEL_CUDA_CHECK(cudaMemcpyAsync(e.host, e.begin, e.bytes, cudaMemcpyDeviceToHost, stream),
                       "cudaMemcpyAsync({} bytes, mpi staging in)", e.bytes);
      ACCEL_CUDA_CHECK(cudaStreamSynchronize(stream), "cudaStreamSynchronize(mpi staging in)");
    }
#endif
  }

  // Copies the tensors MPI wrote back to the device; returns when they are there. A synchronous copy
  // on the legacy stream, which the (non-blocking) compute stream does not wait for: nothing on it may
  // touch these tensors until the operation's Work completes. The compute stream is drained first,
  // because work queued there before the operation may still write or read this memory (the zeros a
  // recv buffer was made with, or a kernel of the block's previous owner); copy_in drains it only
  // where MPI reads a tensor.
  void copy_back() const {
#if ACCEL_WITH_CUDA
    for (const Entry& e : entries_) {
      if (!e.write || e.bytes == 0) continue;
      const cuda::DeviceGuard guard(e.tensor.device());
      ACCEL_CUDA_CHECK(cudaStreamSynchronize(cuda::compute_stream(e.tensor.device())),
                       "cudaStreamSynchronize(mpi staging out)");
      ACCEL_CUDA_CHECK(cudaMemcpy(const_cast<char*>(e.begin), e.host, e.bytes, cudaMemcpyHostToDevice),
                       "cudaMemcpy({} bytes, mpi staging out)", e.bytes);
    }
#endif
  }

 private:
  struct Entry {
    Tensor tensor;
    const char* begin;  // device memory
    size_t bytes;
    char* host;
    size_t capacity;  // of the pooled buffer; 0 for an entry that shares another's
    bool read, write;
  };
  PinnedPool& pool_;
  const char* op_;
  std::vector<Entry> entries_;
};

// The finish step of an operation with staged tensors: the backend's own step on the host buffers
// (may be empty), then the copy back. It also keeps the staging, whose buffers MPI uses, alive until
// the operation has finished. Collectives finish on their own thread, point-to-point operations on the
// polling thread with the request's status.
std::function<void()> finish_staged(std::shared_ptr<Staging> staging, std::function<void()> finish = {}) {
  return [staging = std::move(staging), finish = std::move(finish)] {
    if (finish) finish();
    staging->copy_back();
  };
}

std::function<void(const MPI_Status&)> finish_staged_p2p(std::shared_ptr<Staging> staging,
                                                         std::function<void(const MPI_Status&)> finish = {}) {
  return [staging = std::move(staging), finish = std::move(finish)](const MPI_Status& status) {
    if (finish) finish(status);
    staging->copy_back();
  };
}

// MPI_Comm_dup of comm, after checking that MPI can host the communicator's threads.
MPI_Comm duplicate(MPI_Comm comm) {
  int initialized = 0, finalized = 0, level = 0;
  check("MpiCommunicator", "MPI_Initialized", MPI_Initialized(&initialized));
  check("MpiCommunicator", "MPI_Finalized", MPI_Finalized(&finalized));
  if (!initialized || finalized)
    throw Error(fmt::format("MpiCommunicator: MPI is {}; create the communicator while an accel::MpiEnvironment "
                            "is alive",
                            finalized ? "already finalised" : "not initialised"));
  check("MpiCommunicator", "MPI_Query_thread", MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE)
    throw Error(fmt::format("MpiCommunicator: MPI provides {}, but the communication threads need "
                            "MPI_THREAD_MULTIPLE (initialise MPI with MPI_Init_thread, or let MpiEnvironment do it)",
                            mpi_thread_level_name(level)));
  MPI_Comm dup = MPI_COMM_NULL;
  check("MpiCommunicator", "MPI_Comm_dup", MPI_Comm_dup(comm, &dup));
  return dup;
}

}  // namespace

class MpiCommunicator::Engine {
 public:
  explicit Engine(MPI_Comm owned) : comm_(owned) {
    try {
      setup();
    } catch (...) {
      release();
      throw;
    }
    thread_ = std::thread([this] { loop(); });
    collectives_ = std::make_unique<WorkQueue>();
  }

  ~Engine() {
    collectives_.reset();  // runs the queued collectives, then joins their thread
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
    release();
  }

  MPI_Comm comm() const { return comm_; }
  // Host buffers for the tensors of one operation, from this communicator's pinned pool.
  std::shared_ptr<Staging> staging(const char* op) { return std::make_shared<Staging>(pinned_, op); }
  int rank() const { return rank_; }
  int size() const { return size_; }

  MPI_Datatype datatype(DType dtype) const { return types_->datatype(dtype); }
  MPI_Op op(DType dtype, ReduceOp reduce) const { return types_->op(dtype, reduce); }

  // Queues a collective: run makes the blocking MPI call (named call, for messages) on the collective
  // thread and returns its code; finish (may be empty) runs there after it succeeded. keep holds the
  // tensors whose memory MPI uses until then.
  Work collective(std::string name, const char* call, std::vector<Tensor> keep, std::function<int()> run,
                  std::function<void()> finish = {}) {
    return collectives_->submit([name = std::move(name), call, keep = std::move(keep), run = std::move(run),
                                 finish = std::move(finish)] {
      const int rc = run();
      if (rc != MPI_SUCCESS) throw Error(failure(name, call, rc));
      if (finish) finish();
    });
  }

  // Queues a point-to-point operation: start issues its nonblocking MPI call (named call, for
  // messages) and returns the code; finish (may be empty) runs on the polling thread once it
  // completed. keep holds the tensors whose memory MPI uses until then.
  Work submit(std::string name, const char* call, std::vector<Tensor> keep, std::function<int(MPI_Request*)> start,
              std::function<void(const MPI_Status&)> finish = {}) {
    auto state = std::make_shared<WorkState>();
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(Op{std::move(name), call, std::move(keep), std::move(start), std::move(finish), state});
    }
    wake_.notify_one();
    return Work(state);
  }

 private:
  struct Op {
    std::string name;
    const char* call;
    std::vector<Tensor> keep;
    std::function<int(MPI_Request*)> start;
    std::function<void(const MPI_Status&)> finish;
    std::shared_ptr<WorkState> state;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void setup() {
    // A duplicate inherits its parent's error handler; ours returns codes, which become accel::Error.
    check("MpiCommunicator", "MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    check("MpiCommunicator", "MPI_Comm_rank", MPI_Comm_rank(comm_, &rank_));
    check("MpiCommunicator", "MPI_Comm_size", MPI_Comm_size(comm_, &size_));
    types_ = std::make_unique<MpiTypes>("MpiCommunicator");
  }

  // Frees what setup made. Called from a destructor or an unwinding constructor, so failures cannot be
  // reported and are ignored; after MPI_Finalize nothing may be freed at all.
  void release() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    types_.reset();
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  void loop() {
    std::vector<Op> in_flight;
    int idle_polls = 0;
    for (;;) {
      std::deque<Op> fresh;
      {
        std::unique_lock lock(mutex_);
        if (in_flight.empty()) wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_ && queue_.empty() && in_flight.empty()) return;
        fresh.swap(queue_);
      }
      // Started in submission order, which is what keeps collectives matched across ranks.
      for (Op& op : fresh) {
        const int rc = op.start(&op.request);
        if (rc == MPI_SUCCESS) {
          in_flight.push_back(std::move(op));
        } else {
          const std::shared_ptr<WorkState> state = std::move(op.state);
          const std::string error = failure(op.name, op.call, rc);
          op = Op{};
          settle(*state, error);
        }
      }
      const bool finished_some = poll(in_flight);
      // Nothing finished: give the core to the rank's other threads before asking again. Ranks often
      // share cores, and while an operation waits for a slow peer the caller's compute (backward, say)
      // should not compete with a spinning thread, so a long wait backs off to short sleeps.
      idle_polls = finished_some || !fresh.empty() ? 0 : idle_polls + 1;
      if (idle_polls > kSpinPolls) std::this_thread::sleep_for(kBackoff);
      else if (idle_polls > 0) std::this_thread::yield();
    }
  }

  // Completes an operation's Work, or fails it with error. Called once the operation's buffers (its
  // keep, its staging) are dropped, so a caller whose wait() returned finds their memory freed.
  static void settle(WorkState& state, const std::optional<std::string>& error) {
    if (error) state.fail(*error);
    else state.complete();
  }

  // Tests every request once; finishes and drops the completed ones. True if any completed.
  bool poll(std::vector<Op>& in_flight) {
    bool any = false;
    for (size_t i = 0; i < in_flight.size();) {
      Op& op = in_flight[i];
      int flag = 0;
      MPI_Status status;
      const int rc = MPI_Test(&op.request, &flag, &status);
      if (rc == MPI_SUCCESS && !flag) {
        ++i;
        continue;
      }
      std::optional<std::string> error;
      if (rc != MPI_SUCCESS) {
        error = failure(op.name, op.call, rc);
      } else {
        try {
          if (op.finish) op.finish(status);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      const std::shared_ptr<WorkState> state = std::move(op.state);
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
      settle(*state, error);
      any = true;
    }
    return any;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<MpiTypes> types_;

  PinnedPool pinned_;  // before the queue: destroyed after every operation that staged through it
  // The polling thread and its queue of point-to-point operations.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Op> queue_;
  bool stopping_ = false;
  std::thread thread_;
  // The collective thread.
  std::unique_ptr<WorkQueue> collectives_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : MpiCommunicator(Adopt{}, duplicate(comm)) {}

MpiCommunicator::MpiCommunicator(Adopt, MPI_Comm owned)
    : engine_(std::make_unique<Engine>(owned)), rank_(engine_->rank()), size_(engine_->size()) {}

MpiCommunicator::~MpiCommunicator() = default;

std::unique_ptr<Communicator> MpiCommunicator::create_dup() {
  // On the collective thread like any collective, so it stays in order with the others.
  auto copy = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Comm comm = engine_->comm();
  engine_->collective("dup", "MPI_Comm_dup", {}, [comm, copy] { return MPI_Comm_dup(comm, copy.get()); }).wait();
  return std::unique_ptr<Communicator>(new MpiCommunicator(Adopt{}, *copy));
}

std::unique_ptr<Communicator> MpiCommunicator::create_split(int color, int key) {
  // On the collective thread, as dup() is. A rank of no color takes part in the call and gets
  // MPI_COMM_NULL back.
  auto part = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  const MPI_Comm comm = engine_->comm();
  const int mpi_color = color == kNoColor ? MPI_UNDEFINED : color;
  engine_->collective("split", "MPI_Comm_split", {},
                      [comm, mpi_color, key, part] { return MPI_Comm_split(comm, mpi_color, key, part.get()); })
      .wait();
  if (*part == MPI_COMM_NULL) return nullptr;
  return std::unique_ptr<Communicator>(new MpiCommunicator(Adopt{}, *part));
}

namespace {

// The finish step of avg: MPI summed, every rank divides its result by the rank count.
std::function<void()> average(ReduceOp op, DType dtype, void* data, int64_t count, int size) {
  if (op != ReduceOp::avg) return {};
  return [=] { divide_by(dtype, data, count, size); };
}

}  // namespace

Work MpiCommunicator::start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) {
  const int count = mpi_count("all_reduce", in.numel());
  const auto staging = engine_->staging("all_reduce");
  void* recv = staging->host(out, /*read=*/in_place, /*write=*/true);
  void* send = in_place ? MPI_IN_PLACE : staging->host(in, true, false);
  staging->copy_in();
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Op mpi_op = engine_->op(in.dtype(), op);
  const MPI_Comm comm = engine_->comm();
  return engine_->collective(
      "all_reduce", "MPI_Allreduce", {in, out}, [=] { return MPI_Allreduce(send, recv, count, type, mpi_op, comm); },
      finish_staged(staging, average(op, in.dtype(), recv, count, size_)));
}

Work MpiCommunicator::start_broadcast(const Tensor& tensor, int root) {
  const int count = mpi_count("broadcast", tensor.numel());
  const auto staging = engine_->staging("broadcast");
  void* data = staging->host(tensor, /*read=*/rank_ == root, /*write=*/rank_ != root);
  staging->copy_in();
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("broadcast", "MPI_Bcast", {tensor}, [=] { return MPI_Bcast(data, count, type, root, comm); },
                             finish_staged(staging));
}

Work MpiCommunicator::start_all_gather(const Tensor& in, const Tensor& out, bool in_place) {
  const int count = mpi_count("all_gather", in.numel());
  const auto staging = engine_->staging("all_gather");
  // In place, MPI reads this rank's part from its slot of out, which is where `in` already is.
  void* recv = staging->host(out, /*read=*/in_place, /*write=*/true);
  void* send = in_place ? MPI_IN_PLACE : staging->host(in, true, false);
  staging->copy_in();
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("all_gather", "MPI_Allgather", {in, out},
                             [=] { return MPI_Allgather(send, count, type, recv, count, type, comm); },
                             finish_staged(staging));
}

Work MpiCommunicator::start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) {
  const int count = mpi_count("reduce_scatter", out.numel());
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Op mpi_op = engine_->op(in.dtype(), op);
  const MPI_Comm comm = engine_->comm();
  const auto staging = engine_->staging("reduce_scatter");
  // In place, out is a slot of in: staged first, in's buffer holds out's.
  void* whole = staging->host(in, /*read=*/true, /*write=*/in_place);
  void* mine = staging->host(out, /*read=*/false, /*write=*/true);
  staging->copy_in();
  if (!in_place) {
    return engine_->collective(
        "reduce_scatter", "MPI_Reduce_scatter_block", {in, out},
        [=] { return MPI_Reduce_scatter_block(whole, mine, count, type, mpi_op, comm); },
        finish_staged(staging, average(op, in.dtype(), mine, count, size_)));
  }
  // In place, MPI reduces `in` and leaves this rank's result at its start; move it to the rank's slot.
  const size_t bytes = out.nbytes();
  const DType dtype = in.dtype();
  const int size = size_;
  return engine_->collective(
      "reduce_scatter", "MPI_Reduce_scatter_block", {in, out},
      [=] { return MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, count, type, mpi_op, comm); },
      finish_staged(staging, [=] {
        std::memmove(mine, whole, bytes);
        if (op == ReduceOp::avg) divide_by(dtype, mine, count, size);
      }));
}

Work MpiCommunicator::start_gather(const Tensor& in, const Tensor& out, int root) {
  const int count = mpi_count("gather", in.numel());
  const auto staging = engine_->staging("gather");
  void* send = staging->host(in, true, false);
  void* recv = out.defined() ? staging->host(out, false, true) : nullptr;  // only root receives
  staging->copy_in();
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("gather", "MPI_Gather", {in, out},
                             [=] { return MPI_Gather(send, count, type, recv, count, type, root, comm); },
                             finish_staged(staging));
}

Work MpiCommunicator::start_barrier() {
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("barrier", "MPI_Barrier", {}, [=] { return MPI_Barrier(comm); });
}

Work MpiCommunicator::start_send(const Tensor& tensor, int dst, int tag) {
  const int count = mpi_count("send", tensor.numel());
  const auto staging = engine_->staging("send");
  void* data = staging->host(tensor, true, false);
  staging->copy_in();
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->submit(
      "send", "MPI_Isend", {tensor}, [=](MPI_Request* r) { return MPI_Isend(data, count, type, dst, tag, comm, r); },
      finish_staged_p2p(staging));
}

Work MpiCommunicator::start_recv(const Tensor& tensor, int src, int tag) {
  const int count = mpi_count("recv", tensor.numel());
  const auto staging = engine_->staging("recv");
  void* data = staging->host(tensor, false, true);
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  const DType dtype = tensor.dtype();
  return engine_->submit(
      "recv", "MPI_Irecv", {tensor},
      [=](MPI_Request* r) { return MPI_Irecv(data, count, type, src, tag, comm, r); },
      // A longer message fails in MPI (MPI_ERR_TRUNCATE); a shorter one arrives quietly, so check it here.
      finish_staged_p2p(staging, [=](const MPI_Status& status) {
        int received = 0;
        check("recv", "MPI_Get_count", MPI_Get_count(&status, type, &received));
        if (received != count)
          throw Error(fmt::format("recv (mpi): expected {} elements of {} from rank {} (tag {}), got {}", count,
                                  dtype_name(dtype), src, tag, received));
      }));
}

}  // namespace accel
