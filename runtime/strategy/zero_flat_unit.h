// FlatUnit: the parameters of one ZeRO/FSDP unit laid out back to back in one flat buffer, padded to a
// multiple of the world size N, so that rank r owns the contiguous slice [r S, (r + 1) S), S = padded / N,
// whatever the parameters' sizes (llm.c's zero.cuh: a shard is an offset and a size).
//
//   params     | w0 (6) | b0 (3) | w1 (4) | pad (3) |      numel 13, padded 16, N = 4: S = 4
//   shards     | rank 0  | rank 1  | rank 2  | rank 3  |
//
// The module's parameters become views of the flat buffer (full()), and their grads views of a flat
// grad buffer of the same layout (full_grad()), so one collective moves a whole unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace accel {

class FlatUnit {
 public:
  // Moves the params' values into a new flat buffer and makes each param a view of it. The params
  // must be distinct leaves of one floating dtype on one device. When some are meta tensors
  // (DeferredInit), the buffer starts unallocated (released) and nothing is copied: the values come
  // to this rank's slice only, through take_initial_shard().
  FlatUnit(std::string name, const nn::StateDict& params, int rank, int world_size);

  const std::string& name() const { return name_; }
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return names_; }
  // Where param i starts in the flat buffer.
  int64_t offset_of(size_t i) const { return offsets_[i]; }
  int64_t numel() const { return numel_; }            // the parameters' elements
  int64_t padded_numel() const { return padded_; }    // numel rounded up to a multiple of N
  int64_t shard_numel() const { return padded_ / world_size_; }
  int64_t shard_offset() const { return shard_numel() * rank_; }
  DType dtype() const { return full_.dtype(); }
  Device device() const { return full_.device(); }

  // The flat buffer the params are views of.
  const Tensor& full() const { return full_; }
  // This rank's slice of a flat tensor of this layout (a view).
  Tensor shard_of(const Tensor& flat) const;
  // A new tensor holding this rank's slice of the params' initial values: a copy of the flat
  // buffer's slice, or for a unit of meta params the slice materialised from their recipes (bitwise
  // the values a full init gives those elements), so the rank never holds the whole unit. Once: it
  // lets go of the params' meta tensors.
  Tensor take_initial_shard();
  // The elements of param i (flattened) that this rank's slice holds: one run, as where it starts in
  // the param and how many (0 when the slice holds none of it; never padding).
  struct HeldRun {
    int64_t param_offset = 0;
    int64_t numel = 0;
    int64_t shard_offset = 0;  // where it starts in the slice
  };
  HeldRun held_run(size_t i) const;
  // Param i's part of a flat tensor of this layout, shaped like the param (a view).
  Tensor param_view(const Tensor& flat, size_t i) const;

  // Gives every param a grad that is a view of one flat grad buffer, so backward accumulates
  // straight into it: a zeroed buffer when there is none, and a param's own grad copied in when it
  // has one that is not a view yet.
  void lend_grads();
  // The flat grad buffer; undefined before lend_grads and after drop_grads.
  const Tensor& full_grad() const { return full_grad_; }
  // Drops the flat grad buffer and every param's grad.
  void drop_grads();
  // Rounds the flat buffer to dtype (a new buffer) and makes every param a view of it: under bf16/fp16
  // the model's parameters become 16-bit, and the f32 masters are the strategy's slices. Drops grads.
  void convert_to(DType dtype);

 private:
  std::string name_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0;
  int64_t padded_ = 0;
  int rank_ = 0;
  int world_size_ = 1;
  Tensor full_;
  Tensor full_grad_;
  std::vector<Tensor> deferred_sources_;  // a unit of meta params: each param's data before the move
};

}  // namespace accel
