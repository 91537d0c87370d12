// DeferredInit: a scope in which new tensors get a shape but no data, so that a model larger than one
// rank can be built whole and each rank then materialises only its shard (tensor/meta_tensor.h).
#pragma once

namespace accel {

// While one is alive on this thread, the creation functions (empty, zeros, ones, full, randn, rand,
// uniform, normal and their _like forms) make meta tensors: a shape, dtype and device, and the
// recipe of the values they would hold (a constant, or a Philox draw fixed by its generator
// position). nn::init's initialisers record themselves on such tensors instead of writing. Any
// other op that reads or writes one throws, naming its shape. `DeferredInit off(false)` turns the
// mode off inside such a scope (materialising uses it for its own buffers).
class DeferredInit {
 public:
  explicit DeferredInit(bool enabled = true);
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;

  static bool is_enabled();

 private:
  bool previous_;
};

// Accelerate's name for the same scope: `auto scope = accel::init_empty_weights();`, then build the
// model; unlike Accelerate's empty weights, these remember their initialisers, so prepare fills them
// with the values a normal init would have given.
inline DeferredInit init_empty_weights() { return DeferredInit(true); }

}  // namespace accel
