// Replicas of LayerNorm and Dropout.
#include "nn/parallel/replica.h"

#include "tensor/nograd/copy.h"

namespace accel::nn::parallel {

std::shared_ptr<LayerNorm> replica_of(const std::shared_ptr<LayerNorm>& full_layer, FromFull how) {
  if (how == FromFull::in_place) return full_layer;
  const LayerNorm& full = *full_layer;
  auto copy = std::make_shared<LayerNorm>(full.weight().size(0), full.eps());
  copy->to(full.weight().device());
  copy->to(full.weight().dtype());
  nograd::copy_(copy->weight(), full.weight());
  nograd::copy_(copy->bias(), full.bias());
  if (!full.is_training()) copy->eval();
  return copy;
}

std::shared_ptr<Dropout> replica_of(const std::shared_ptr<Dropout>& full_layer, FromFull how) {
  if (how == FromFull::in_place) return full_layer;
  Dropout& full = *full_layer;
  Generator unused;
  auto copy = std::make_shared<Dropout>(full.p(), unused);
  copy->generator().set_state(full.generator().state());
  if (!full.is_training()) copy->eval();
  return copy;
}

}  // namespace accel::nn::parallel
