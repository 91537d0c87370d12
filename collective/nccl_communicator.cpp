// The NCCL backend. Every operation: check the tensors are on this communicator's device, make the
// communication stream wait for the compute stream (an event, no host wait), issue the NCCL call(s) on
// the communication stream, register the tensors' memory with that stream for the caching allocator,
// and record a completion event, which the Work waits on. Every NCCL return code becomes accel::Error.
#include "collective/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda_check.h"
#include "tensor/creation.h"
#include "tensor/cuda/allocator.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/stream.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the nccl backend needs NCCL 2.18 or later (ncclCommSplit, ncclCommFinalize, ncclGetLastError)"
#endif

namespace accel {

namespace {

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = fmt::format("{} (ncclResult {})", ncclGetErrorString(result), static_cast<int>(result));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') text += fmt::format("; {}", last);
  }
  return text;
}

void check(const char* op, const char* call, ncclResult_t result, ncclComm_t comm = nullptr) {
  if (result != ncclSuccess) throw Error(fmt::format("{} (nccl): {} failed: {}", op, call, nccl_text(result, comm)));
}

struct NcclType {
  DType dtype;
  ncclDataType_t type;
};

// One row per dtype, in DType order (checked below), so the value indexes it. bool and fp8 travel as bytes
// (fp8 is never reduced: Communicator's check_op rejects it first).
constexpr NcclType kNcclTypes[] = {
    {DType::f64, ncclFloat64}, {DType::f32, ncclFloat32}, {DType::f16, ncclFloat16}, {DType::bf16, ncclBfloat16},
    {DType::i64, ncclInt64},   {DType::i32, ncclInt32},   {DType::boolean, ncclUint8},
    {DType::f8_e4m3, ncclUint8}, {DType::f8_e5m2, ncclUint8},
};
static_assert(rows_in_dtype_order(kNcclTypes), "kNcclTypes needs one row per DType, in enum order");

ncclDataType_t nccl_type(DType dtype) {
  if (!is_known(dtype)) throw_unsupported_dtype("NcclCommunicator", dtype, "a known dtype");
  return kNcclTypes[static_cast<size_t>(dtype)].type;
}

// bool travels as bytes holding 0 or 1: sum and max are logical or (ncclMax), min is logical and.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::sum: return dtype == DType::boolean ? ncclMax : ncclSum;
    case ReduceOp::avg: return ncclAvg;  // integers: the sum divided, truncated, as the mpi backend does
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

}  // namespace

struct NcclCommState {
  ncclComm_t comm = nullptr;
  Device device;
  cudaStream_t stream = nullptr;
  std::mutex mutex;           // NCCL calls on one communicator must not interleave across threads
  void* barrier = nullptr;    // one f32 on the device, all-reduced by barrier()

  NcclCommState(ncclComm_t c, Device d) : comm(c), device(d), stream(cuda::comm_stream(d.index)) {
    barrier = cuda::device_allocate(sizeof(float), device);
  }
  ~NcclCommState() {
    // Destructors cannot report failures; what could fail here only fails when the device is gone.
    const cuda::DeviceGuard guard(device);
    if (cudaStreamSynchronize(stream) != cudaSuccess) cudaGetLastError();
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    cuda::device_free(barrier, device);
  }
  NcclCommState(const NcclCommState&) = delete;
  NcclCommState& operator=(const NcclCommState&) = delete;

  // An error NCCL met while running queued operations (a peer gone, a network failure).
  void check_async(const char* op) const {
    ncclResult_t async = ncclSuccess;
    check(op, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async), comm);
    if (async != ncclSuccess && async != ncclInProgress)
      throw Error(fmt::format("{} (nccl): the communicator failed: {}", op, nccl_text(async, comm)));
  }
};

namespace {

// A queued NCCL operation: done when its event on the communication stream is reached.
class NcclWork final : public WorkState {
 public:
  NcclWork(std::shared_ptr<NcclCommState> state, const char* op, std::unique_ptr<cuda::Event> done, bool host_wait,
           std::vector<Tensor> keep)
      : state_(std::move(state)), op_(op), done_(std::move(done)), host_wait_(host_wait), keep_(std::move(keep)) {}

  void wait() override {
    state_->check_async(op_);
    if (host_wait_) done_->synchronize();
    else done_->wait(cuda::compute_stream(state_->device));
  }
  bool test() override {
    state_->check_async(op_);
    return done_->query();
  }

 private:
  std::shared_ptr<NcclCommState> state_;
  const char* op_;
  std::unique_ptr<cuda::Event> done_;
  bool host_wait_;
  std::vector<Tensor> keep_;  // the tensors stay alive as long as the handle (the allocator covers the rest)
};

}  // namespace

int nccl_version() {
  int version = 0;
  check("nccl_version", "ncclGetVersion", ncclGetVersion(&version));
  return version;
}

std::string nccl_version_string() {
  int v = 0;
  const ncclResult_t result = ncclGetVersion(&v);
  if (result != ncclSuccess) return fmt::format("unknown (ncclGetVersion: {})", ncclGetErrorString(result));
  // NCCL_VERSION_CODE is major * 10000 + minor * 100 + patch since 2.9 (major * 1000 + ... before).
  return v >= 10000 ? fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
                    : fmt::format("{}.{}.{}", v / 1000, v / 100 % 10, v % 100);
}

NcclCommunicator::NcclCommunicator(Device device, Communicator& bootstrap) {
  const char* op = "NcclCommunicator";
  cuda::check_device(op, device);
  // [0] says whether rank 0 made an id, so that a failure there fails every rank instead of hanging them.
  constexpr int64_t kIdWords = (sizeof(ncclUniqueId) + sizeof(int32_t) - 1) / sizeof(int32_t);
  const Tensor message = zeros({1 + kIdWords}, DType::i32);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::string failure;
  if (bootstrap.rank() == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result == ncclSuccess) {
      message.data<int32_t>()[0] = 1;
      std::memcpy(message.data<int32_t>() + 1, &id, sizeof id);
    } else {
      failure = fmt::format("{} (nccl): ncclGetUniqueId failed: {}", op, nccl_text(result, nullptr));
    }
  }
  bootstrap.broadcast(message, 0);
  if (!failure.empty()) throw Error(failure);
  if (message.data<int32_t>()[0] != 1)
    throw Error(fmt::format("{} (nccl): rank 0 could not create the NCCL unique id (see its error)", op));
  std::memcpy(&id, message.data<int32_t>() + 1, sizeof id);

  const cuda::DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  check(op, "ncclCommInitRank", ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  try {
    state_ = std::make_shared<NcclCommState>(comm, device);
  } catch (...) {
    ncclCommDestroy(comm);
    throw;
  }
  device_ = device;
  rank_ = bootstrap.rank();
  size_ = bootstrap.size();
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclCommState> state, int rank, int size)
    : state_(std::move(state)), device_(state_->device), rank_(rank), size_(size) {}

NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<Communicator> NcclCommunicator::create_dup() { return split_as("dup", 0, rank_); }

std::unique_ptr<Communicator> NcclCommunicator::create_split(int color, int key) {
  return split_as("split", color, key);
}

std::unique_ptr<Communicator> NcclCommunicator::split_as(const char* op, int color, int key) {
  std::lock_guard lock(state_->mutex);
  const cuda::DeviceGuard guard(device_);
  ncclComm_t part = nullptr;
  // A null config: the part inherits this communicator's. NCCL orders equal keys by rank, as MPI does.
  check(op, "ncclCommSplit",
        ncclCommSplit(state_->comm, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key, &part, nullptr),
        state_->comm);
  if (part == nullptr) return nullptr;
  int rank = 0, size = 0;
  std::shared_ptr<NcclCommState> state;
  try {
    check(op, "ncclCommUserRank", ncclCommUserRank(part, &rank), part);
    check(op, "ncclCommCount", ncclCommCount(part, &size), part);
    state = std::make_shared<NcclCommState>(part, device_);
  } catch (...) {
    ncclCommDestroy(part);
    throw;
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(std::move(state), rank, size));
}

template <class Body>
Work NcclCommunicator::launch(const char* op, std::initializer_list<const Tensor*> tensors, bool host_wait,
                              Body&& body) {
  std::vector<Tensor> keep;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (t->device() != device_)
      throw Error(fmt::format("{} (nccl): tensor is on {}, but this communicator runs on {}", op, t->device().str(),
                              device_.str()));
    keep.push_back(*t);
  }
  NcclCommState& s = *state_;
  std::lock_guard lock(s.mutex);
  s.check_async(op);
  const cuda::DeviceGuard guard(device_);
  const cudaStream_t compute = cuda::compute_stream(device_);
  // The stream waits for the kernels that made the inputs (and that last used the outputs).
  cuda::Event ready;
  ready.record(compute);
  ready.wait(s.stream);
  body(s.stream);
  // A tensor freed while the operation runs must not go back to the cache before it has finished.
  for (const Tensor& t : keep)
    if (t.numel() > 0) cuda::record_stream(t.storage()->data(), device_, s.stream);
  auto done = std::make_unique<cuda::Event>();
  done->record(s.stream);
  return Work(std::make_shared<NcclWork>(state_, op, std::move(done), host_wait, std::move(keep)));
}

Work NcclCommunicator::start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool) {
  return launch("all_reduce", {&in, &out}, false, [&](cudaStream_t stream) {
    if (in.numel() == 0) return;
    check("all_reduce", "ncclAllReduce",
          ncclAllReduce(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()),
                        nccl_op(op, in.dtype()), state_->comm, stream),
          state_->comm);
  });
}

Work NcclCommunicator::start_broadcast(const Tensor& tensor, int root) {
  return launch("broadcast", {&tensor}, false, [&](cudaStream_t stream) {
    if (tensor.numel() == 0) return;
    check("broadcast", "ncclBroadcast",
          ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                        nccl_type(tensor.dtype()), root, state_->comm, stream),
          state_->comm);
  });
}

Work NcclCommunicator::start_all_gather(const Tensor& in, const Tensor& out, bool) {
  // In place, in is out's slot for this rank, which is what NCCL expects of an in-place all-gather.
  return launch("all_gather", {&in, &out}, false, [&](cudaStream_t stream) {
    if (in.numel() == 0) return;
    check("all_gather", "ncclAllGather",
          ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()),
                        state_->comm, stream),
          state_->comm);
  });
}

Work NcclCommunicator::start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool) {
  return launch("reduce_scatter", {&in, &out}, false, [&](cudaStream_t stream) {
    if (out.numel() == 0) return;
    check("reduce_scatter", "ncclReduceScatter",
          ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                            nccl_op(op, in.dtype()), state_->comm, stream),
          state_->comm);
  });
}

Work NcclCommunicator::start_gather(const Tensor& in, const Tensor& out, int root) {
  // Point to point in one group: every other rank sends to root, root receives into each slot.
  return launch("gather", {&in, &out}, false, [&](cudaStream_t stream) {
    const size_t count = static_cast<size_t>(in.numel());
    if (count == 0) return;
    const ncclDataType_t type = nccl_type(in.dtype());
    ncclComm_t comm = state_->comm;
    check("gather", "ncclGroupStart", ncclGroupStart(), comm);
    ncclResult_t result = ncclSuccess;
    const char* call = "ncclSend";
    if (rank_ == root) {
      char* slots = static_cast<char*>(out.data_ptr());
      for (int r = 0; r < size_ && result == ncclSuccess; ++r) {
        void* slot = slots + static_cast<size_t>(r) * in.nbytes();
        if (r == root) {
          const cudaError_t err = cudaMemcpyAsync(slot, in.data_ptr(), in.nbytes(), cudaMemcpyDeviceToDevice, stream);
          if (err != cudaSuccess) {
            ncclGroupEnd();
            cuda::throw_cuda_error(err, "gather (nccl): cudaMemcpyAsync(root's own slot)", device_.index);
          }
        } else {
          call = "ncclRecv";
          result = ncclRecv(slot, count, type, r, comm, stream);
        }
      }
    } else {
      result = ncclSend(in.data_ptr(), count, type, root, comm, stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    check("gather", call, result, comm);
    check("gather", "ncclGroupEnd", end, comm);
  });
}

Work NcclCommunicator::start_barrier() {
  // A one-element all-reduce that the host waits for: when it completes, every rank has reached it.
  return launch("barrier", {}, true, [&](cudaStream_t stream) {
    check("barrier", "ncclAllReduce",
          ncclAllReduce(state_->barrier, state_->barrier, 1, ncclFloat32, ncclSum, state_->comm, stream), state_->comm);
  });
}

Work NcclCommunicator::start_send(const Tensor& tensor, int dst, int) {
  return launch("send", {&tensor}, false, [&](cudaStream_t stream) {
    if (tensor.numel() == 0) return;
    check("send", "ncclSend",
          ncclSend(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), dst,
                   state_->comm, stream),
          state_->comm);
  });
}

Work NcclCommunicator::start_recv(const Tensor& tensor, int src, int) {
  return launch("recv", {&tensor}, false, [&](cudaStream_t stream) {
    if (tensor.numel() == 0) return;
    check("recv", "ncclRecv",
          ncclRecv(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), src,
                   state_->comm, stream),
          state_->comm);
  });
}

}  // namespace accel
