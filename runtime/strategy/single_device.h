// SingleDevice: one process trains the whole model on its device. Nothing to synchronise: prepare
// moves the model, and everything else is the Strategy's replicated default.
#pragma once

#include "runtime/environment.h"
#include "runtime/strategy/strategy.h"

namespace accel {

class SingleDevice final : public Strategy {
 public:
  explicit SingleDevice(Device device) : device_(device) {}

  std::string name() const override { return "single_device"; }
  void prepare_model(nn::Module& model) override { model.to(device_); }
  DataShard data_shard() const override { return {}; }

 private:
  Device device_;
};

}  // namespace accel
