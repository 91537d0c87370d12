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

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective/mpi_environment.h"
#include "collective/work_queue.h"

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

// The one place where tensor memory meets MPI: every buffer an MPI call reads or writes comes from
// here. CPU tensors pass their own memory. Device tensors will be staged here through pinned host
// memory (copied in before the call; outputs copied back in the operation's finish step); until the
// CUDA helper adds that, they are refused.
void* host_data(const char* op, const Tensor& t) {
  if (!t.device().is_cpu())
    throw Error(fmt::format("{} (mpi): tensor is on {}, but the mpi backend takes CPU tensors only for now", op,
                            t.device().str()));
  return t.data_ptr();
}

// An MPI_User_function for f16/bf16 held in a 2-byte datatype: widen to f32, combine, round back.
template <DType D, ReduceOp R>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(D, R, inout, in, *len);
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
  int rank() const { return rank_; }
  int size() const { return size_; }

  MPI_Datatype datatype(DType dtype) const {
    switch (dtype) {
      case DType::f64: return MPI_DOUBLE;
      case DType::f32: return MPI_FLOAT;
      case DType::f16:
      case DType::bf16: return half_type_;
      case DType::i64: return MPI_INT64_T;
      case DType::i32: return MPI_INT32_T;
      case DType::boolean: return MPI_C_BOOL;
    }
    throw_unsupported_dtype("MpiCommunicator", dtype, "a known dtype");
  }

  // avg reduces as sum; the division happens after (see average). bool sum and max are logical or.
  MPI_Op op(DType dtype, ReduceOp reduce) const {
    const int index = reduce == ReduceOp::max ? 1 : reduce == ReduceOp::min ? 2 : 0;  // sum, max, min
    switch (dtype) {
      case DType::f16: return f16_ops_[index];
      case DType::bf16: return bf16_ops_[index];
      case DType::boolean: return index == 2 ? MPI_LAND : MPI_LOR;
      default: return index == 1 ? MPI_MAX : index == 2 ? MPI_MIN : MPI_SUM;
    }
  }

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
    int bool_size = 0;
    check("MpiCommunicator", "MPI_Type_size", MPI_Type_size(MPI_C_BOOL, &bool_size));
    if (bool_size != static_cast<int>(sizeof(bool)))
      throw Error(fmt::format("MpiCommunicator: MPI_C_BOOL has {} bytes but bool has {}", bool_size, sizeof(bool)));
    // f16 and bf16 travel as opaque 2-byte units; only the ops below know what the bits mean.
    check("MpiCommunicator", "MPI_Type_contiguous", MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
    check("MpiCommunicator", "MPI_Type_commit", MPI_Type_commit(&half_type_));
    const std::array<MPI_User_function*, 3> f16 = {half_reduce<DType::f16, ReduceOp::sum>,
                                                   half_reduce<DType::f16, ReduceOp::max>,
                                                   half_reduce<DType::f16, ReduceOp::min>};
    const std::array<MPI_User_function*, 3> bf16 = {half_reduce<DType::bf16, ReduceOp::sum>,
                                                    half_reduce<DType::bf16, ReduceOp::max>,
                                                    half_reduce<DType::bf16, ReduceOp::min>};
    for (size_t i = 0; i < 3; ++i) {
      check("MpiCommunicator", "MPI_Op_create", MPI_Op_create(f16[i], /*commute=*/1, &f16_ops_[i]));
      check("MpiCommunicator", "MPI_Op_create", MPI_Op_create(bf16[i], /*commute=*/1, &bf16_ops_[i]));
    }
  }

  // Frees what setup made. Called from a destructor or an unwinding constructor, so failures cannot be
  // reported and are ignored; after MPI_Finalize nothing may be freed at all.
  void release() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Op* op : {&f16_ops_[0], &f16_ops_[1], &f16_ops_[2], &bf16_ops_[0], &bf16_ops_[1], &bf16_ops_[2]})
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
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
        if (rc != MPI_SUCCESS) op.state->fail(failure(op.name, op.call, rc));
        else in_flight.push_back(std::move(op));
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
      if (rc != MPI_SUCCESS) {
        op.state->fail(failure(op.name, op.call, rc));
      } else {
        try {
          if (op.finish) op.finish(status);
          op.state->complete();
        } catch (const std::exception& e) {
          op.state->fail(e.what());
        }
      }
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
      any = true;
    }
    return any;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  std::array<MPI_Op, 3> f16_ops_ = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};   // sum, max, min
  std::array<MPI_Op, 3> bf16_ops_ = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, max, min

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

std::unique_ptr<Communicator> MpiCommunicator::dup() {
  // On the collective thread like any collective, so it stays in order with the others.
  auto copy = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Comm comm = engine_->comm();
  engine_->collective("dup", "MPI_Comm_dup", {}, [comm, copy] { return MPI_Comm_dup(comm, copy.get()); }).wait();
  return std::unique_ptr<Communicator>(new MpiCommunicator(Adopt{}, *copy));
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
  void* send = in_place ? MPI_IN_PLACE : host_data("all_reduce", in);
  void* recv = host_data("all_reduce", out);
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Op mpi_op = engine_->op(in.dtype(), op);
  const MPI_Comm comm = engine_->comm();
  return engine_->collective(
      "all_reduce", "MPI_Allreduce", {in, out}, [=] { return MPI_Allreduce(send, recv, count, type, mpi_op, comm); },
      average(op, in.dtype(), recv, count, size_));
}

Work MpiCommunicator::start_broadcast(const Tensor& tensor, int root) {
  const int count = mpi_count("broadcast", tensor.numel());
  void* data = host_data("broadcast", tensor);
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("broadcast", "MPI_Bcast", {tensor}, [=] { return MPI_Bcast(data, count, type, root, comm); });
}

Work MpiCommunicator::start_all_gather(const Tensor& in, const Tensor& out, bool in_place) {
  const int count = mpi_count("all_gather", in.numel());
  // In place, MPI reads this rank's part from its slot of out, which is where `in` already is.
  void* send = in_place ? MPI_IN_PLACE : host_data("all_gather", in);
  void* recv = host_data("all_gather", out);
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("all_gather", "MPI_Allgather", {in, out},
                             [=] { return MPI_Allgather(send, count, type, recv, count, type, comm); });
}

Work MpiCommunicator::start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) {
  const int count = mpi_count("reduce_scatter", out.numel());
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Op mpi_op = engine_->op(in.dtype(), op);
  const MPI_Comm comm = engine_->comm();
  void* whole = host_data("reduce_scatter", in);
  void* mine = host_data("reduce_scatter", out);
  if (!in_place) {
    return engine_->collective(
        "reduce_scatter", "MPI_Reduce_scatter_block", {in, out},
        [=] { return MPI_Reduce_scatter_block(whole, mine, count, type, mpi_op, comm); },
        average(op, in.dtype(), mine, count, size_));
  }
  // In place, MPI reduces `in` and leaves this rank's result at its start; move it to the rank's slot.
  const size_t bytes = out.nbytes();
  const DType dtype = in.dtype();
  const int size = size_;
  return engine_->collective(
      "reduce_scatter", "MPI_Reduce_scatter_block", {in, out},
      [=] { return MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, count, type, mpi_op, comm); },
      [=] {
        std::memmove(mine, whole, bytes);
        if (op == ReduceOp::avg) divide_by(dtype, mine, count, size);
      });
}

Work MpiCommunicator::start_gather(const Tensor& in, const Tensor& out, int root) {
  const int count = mpi_count("gather", in.numel());
  void* send = host_data("gather", in);
  void* recv = out.defined() ? host_data("gather", out) : nullptr;  // only root receives
  const MPI_Datatype type = engine_->datatype(in.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("gather", "MPI_Gather", {in, out},
                             [=] { return MPI_Gather(send, count, type, recv, count, type, root, comm); });
}

Work MpiCommunicator::start_barrier() {
  const MPI_Comm comm = engine_->comm();
  return engine_->collective("barrier", "MPI_Barrier", {}, [=] { return MPI_Barrier(comm); });
}

Work MpiCommunicator::start_send(const Tensor& tensor, int dst, int tag) {
  const int count = mpi_count("send", tensor.numel());
  void* data = host_data("send", tensor);
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  return engine_->submit("send", "MPI_Isend", {tensor},
                         [=](MPI_Request* r) { return MPI_Isend(data, count, type, dst, tag, comm, r); });
}

Work MpiCommunicator::start_recv(const Tensor& tensor, int src, int tag) {
  const int count = mpi_count("recv", tensor.numel());
  void* data = host_data("recv", tensor);
  const MPI_Datatype type = engine_->datatype(tensor.dtype());
  const MPI_Comm comm = engine_->comm();
  const DType dtype = tensor.dtype();
  return engine_->submit(
      "recv", "MPI_Irecv", {tensor},
      [=](MPI_Request* r) { return MPI_Irecv(data, count, type, src, tag, comm, r); },
      // A longer message fails in MPI (MPI_ERR_TRUNCATE); a shorter one arrives quietly, so check it here.
      [=](const MPI_Status& status) {
        int received = 0;
        check("recv", "MPI_Get_count", MPI_Get_count(&status, type, &received));
        if (received != count)
          throw Error(fmt::format("recv (mpi): expected {} elements of {} from rank {} (tag {}), got {}", count,
                                  dtype_name(dtype), src, tag, received));
      });
}

}  // namespace accel
