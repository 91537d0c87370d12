// DataParallel: the initial broadcast, one reducer per prepared model, and the reducers' calls
// around each backward.
#include "runtime/strategy/data_parallel.h"


namespace accel {

DataParallel::DataParallel(const Environment& env, const ReducerOptions& options) : env_(env), options_(options) {
  if (!env_.comm()) throw Error("DataParallel: the environment has no communicator between ranks");
}

void DataParallel::prepare_model(nn::Module& model) {
  model.to(env_.device());
  for (const auto& [m, r] : reducers_)
    if (m == &model) throw Error("Accelerator::prepare: this model was prepared already");
  broadcast_from_main(model.named_parameters());
  broadcast_from_main(model.named_buffers());
  // The reducer's all-reduces get a communicator (and communication thread) of their own. Frozen
  // parameters (requires_grad false: a fine-tuning's fixed layers) have no grad to average, as in DDP.
  nn::StateDict trained;
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) trained.emplace_back(name, p);
  reducers_.emplace_back(&model, Reducer::attach(trained, env_.grads_comm().dup(), options_));
}

void DataParallel::broadcast_from_main(const nn::StateDict& entries) const {
  broadcast_from_rank0(entries, [this](const Tensor& t) -> Communicator& { return env_.comm_for(t); }, "data parallel");
}

DataShard DataParallel::data_shard() const { return {env_.rank(), env_.world_size()}; }

void DataParallel::before_backward(bool sync) {
  for (auto& [m, r] : reducers_) r->prepare_for_backward(sync);
}

void DataParallel::after_backward() {
  for (auto& [m, r] : reducers_) r->finalize();
}

void DataParallel::backward_failed() {
  for (auto& [m, r] : reducers_) r->disarm();
}

const Reducer* DataParallel::reducer(const nn::Module& model) const {
  for (const auto& [m, r] : reducers_)
    if (m == &model) return r.get();
  return nullptr;
}

}  // namespace accel
