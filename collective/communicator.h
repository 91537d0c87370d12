// Communicator: the interface every collective backend implements (mpi, ring and nccl), with the shape
// rules and argument checks that all backends share, and the ledger of the collectives it ran.
#pragma once

#include <memory>
#include <string>

#include "collective/call_site.h"
#include "collective/ledger.h"
#include "collective/reduce_op.h"
#include "collective/work.h"
#include "tensor/tensor.h"

namespace accel {

// The largest tag send/recv accept: MPI guarantees at least 0..32767 (MPI_TAG_UB >= 32767).
inline constexpr int kMaxTag = 32767;
// The color a rank passes to split() to join no group (MPI_UNDEFINED, NCCL_SPLIT_NOCOLOR).
inline constexpr int kNoColor = -1;

// Every operation has an async form returning a Work handle and a sync form that is async + wait.
// The backend holds on to the tensors until the operation has finished; the caller must not read or
// write their memory before wait() returns (or test() is true). Operations may be started from any
// thread, and every rank must start its collectives in the same order.
//
// Shape rules, with n = size() and a "slot" the r-th of n equal parts of a tensor in row-major order:
//   all_reduce(in, out)       out has in's dtype and shape. all_reduce(t) works in place.
//   broadcast(t, root)        in place: every rank's t becomes root's t.
//   all_gather(in, out)       for in of shape [d0, d1, ...], out is [n * d0, d1, ...] (concatenated along
//                             dim 0) or [n, d0, d1, ...] (stacked); a 0-d in gives out [n]. Slot r of out
//                             receives rank r's in. In place: in is out's slot for this rank.
//   reduce_scatter(in, out)   the reverse: in is [n * d0, d1, ...] or [n, d0, d1, ...] for out [d0, d1, ...];
//                             rank r's out receives the reduction of every rank's slot r. In place: out
//                             is in's slot for this rank (the other slots are left unspecified).
//   gather(in, out, root)     as all_gather, but only root's out is written; other ranks may pass Tensor().
//   send(t, dst, tag) / recv(t, src, tag)   recv's t must match the message's dtype and element count.
// Tensors must be defined and contiguous; within one call they share one dtype.
//
// Every rank checks its own arguments before it communicates, and a bad call throws accel::Error
// naming the op and the values. That ranks agree with each other (same op order, dtype, counts, root)
// is the caller's contract, as in MPI; errors while communicating are raised from Work::wait(). In
// debug mode (set_collective_checks) every collective first compares op, dtype, count and root across
// the ranks and throws on all of them when they differ.
//
// Every collective is recorded in ledger() with its call site: by default the caller's file:line
// (the `site` default argument), or a name an internal caller passes ("reducer bucket 3").
class Communicator {
 public:
  virtual ~Communicator() { retire_ledger(std::move(ledger_)); }
  Communicator() : ledger_(make_ledger("world")) {}
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "mpi", "ring", "nccl"
  // Where the tensors it moves must live: the CPU for mpi and ring, its GPU for nccl. Small
  // collectives of the library's own (a flag, a norm, the fp8 amaxes) build their tensors there.
  virtual Device device() const { return Device::cpu(); }
  // The ledger's name, the same on every rank: "world", "world/dup1", "world/split2", or a mesh's
  // dimension name. A communicator a backend builds from a raw handle starts as "world".
  const std::string& name() const { return ledger_->name(); }
  void set_name(std::string name) { ledger_->set_name(std::move(name)); }
  const CollectiveLedger& ledger() const { return *ledger_; }
  // A new communicator over the same ranks whose traffic never mixes with this one's. Collective:
  // every rank calls it in the same order as its other collectives.
  std::unique_ptr<Communicator> dup();
  // Sub-groups, as MPI_Comm_split: the ranks that pass the same color form a new communicator of the
  // same backend, ranked by key (ties by their rank here). color is >= 0, or kNoColor for a rank that
  // joins no group: it gets nullptr. Collective like dup(); the new communicator's traffic never
  // mixes with this one's, and it lives on after this one is destroyed.
  std::unique_ptr<Communicator> split(int color, int key);

  Work all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::sum, CallSite site = {});
  Work all_reduce_async(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum, CallSite site = {});
  Work broadcast_async(const Tensor& tensor, int root, CallSite site = {});
  Work all_gather_async(const Tensor& in, const Tensor& out, CallSite site = {});
  Work reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum, CallSite site = {});
  Work gather_async(const Tensor& in, const Tensor& out, int root, CallSite site = {});
  Work barrier_async(CallSite site = {});
  Work send_async(const Tensor& tensor, int dst, int tag = 0);
  Work recv_async(const Tensor& tensor, int src, int tag = 0);

  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum, CallSite site = {}) {
    all_reduce_async(tensor, op, std::move(site)).wait();
  }
  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum, CallSite site = {}) {
    all_reduce_async(in, out, op, std::move(site)).wait();
  }
  void broadcast(const Tensor& tensor, int root, CallSite site = {}) {
    broadcast_async(tensor, root, std::move(site)).wait();
  }
  void all_gather(const Tensor& in, const Tensor& out, CallSite site = {}) {
    all_gather_async(in, out, std::move(site)).wait();
  }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum, CallSite site = {}) {
    reduce_scatter_async(in, out, op, std::move(site)).wait();
  }
  void gather(const Tensor& in, const Tensor& out, int root, CallSite site = {}) {
    gather_async(in, out, root, std::move(site)).wait();
  }
  void barrier(CallSite site = {}) { barrier_async(std::move(site)).wait(); }
  void send(const Tensor& tensor, int dst, int tag = 0) { send_async(tensor, dst, tag).wait(); }
  void recv(const Tensor& tensor, int src, int tag = 0) { recv_async(tensor, src, tag).wait(); }

 protected:
  // The backend's half, called once the checks above have passed: tensors are defined, contiguous, of
  // one dtype, with the element counts the shape rules ask for. in_place says that in and out are the
  // same memory (all_reduce), or that the smaller tensor is this rank's slot of the larger one
  // (all_gather, reduce_scatter). start_gather gets an undefined out on ranks other than root.
  virtual Work start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) = 0;
  virtual Work start_broadcast(const Tensor& tensor, int root) = 0;
  virtual Work start_all_gather(const Tensor& in, const Tensor& out, bool in_place) = 0;
  virtual Work start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) = 0;
  virtual Work start_gather(const Tensor& in, const Tensor& out, int root) = 0;
  virtual Work start_barrier() = 0;
  virtual Work start_send(const Tensor& tensor, int dst, int tag) = 0;
  virtual Work start_recv(const Tensor& tensor, int src, int tag) = 0;
  // split() once color is known to be >= 0 or kNoColor.
  virtual std::unique_ptr<Communicator> create_split(int color, int key) = 0;
  virtual std::unique_ptr<Communicator> create_dup() = 0;

 private:
  // Records the collective in the ledger around start() (and, in debug mode, checks it across ranks).
  template <class Start>
  Work recorded(const char* op, const Tensor& tensor, int root, const CallSite& site, Start&& start);
  // Debug mode: one all_gather of (op, dtype, count, root) on this communicator, compared.
  void check_across_ranks(const char* op, const Tensor& tensor, int root, const CallSite& site);
  // The name of the n-th communicator derived from this one.
  std::string child_name(const char* how);

  std::shared_ptr<CollectiveLedger> ledger_;
  int children_ = 0;
};

}  // namespace accel
