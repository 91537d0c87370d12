// CountingCommunicator: a Communicator that passes every operation on to another one and counts
// them by kind, so tests can assert how many collectives an algorithm runs.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "accel.h"

namespace test {

class CountingCommunicator final : public accel::Communicator {
 public:
  explicit CountingCommunicator(std::shared_ptr<accel::Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend() const override { return inner_->backend(); }
  std::unique_ptr<accel::Communicator> create_dup() override { return std::make_unique<CountingCommunicator>(inner_->dup()); }

  // How many of each kind ran since the last reset: "all_gather", "reduce_scatter", "all_reduce", ...
  int count(const std::string& kind) const {
    const auto it = counts_.find(kind);
    return it == counts_.end() ? 0 : it->second;
  }
  void reset() { counts_.clear(); }

 protected:
  accel::Work start_all_reduce(const accel::Tensor& in, const accel::Tensor& out, accel::ReduceOp op, bool) override {
    ++counts_["all_reduce"];
    return inner_->all_reduce_async(in, out, op);
  }
  accel::Work start_broadcast(const accel::Tensor& t, int root) override {
    ++counts_["broadcast"];
    return inner_->broadcast_async(t, root);
  }
  accel::Work start_all_gather(const accel::Tensor& in, const accel::Tensor& out, bool) override {
    ++counts_["all_gather"];
    return inner_->all_gather_async(in, out);
  }
  accel::Work start_reduce_scatter(const accel::Tensor& in, const accel::Tensor& out, accel::ReduceOp op,
                                   bool) override {
    ++counts_["reduce_scatter"];
    return inner_->reduce_scatter_async(in, out, op);
  }
  accel::Work start_gather(const accel::Tensor& in, const accel::Tensor& out, int root) override {
    ++counts_["gather"];
    return inner_->gather_async(in, out, root);
  }
  accel::Work start_barrier() override {
    ++counts_["barrier"];
    return inner_->barrier_async();
  }
  accel::Work start_send(const accel::Tensor& t, int dst, int tag) override {
    ++counts_["send"];
    return inner_->send_async(t, dst, tag);
  }
  accel::Work start_recv(const accel::Tensor& t, int src, int tag) override {
    ++counts_["recv"];
    return inner_->recv_async(t, src, tag);
  }
  std::unique_ptr<accel::Communicator> create_split(int color, int key) override {
    return inner_->split(color, key);
  }

 private:
  std::shared_ptr<accel::Communicator> inner_;
  std::map<std::string, int> counts_;  // counted on the calling thread: the strategies start collectives there
};

}  // namespace test
