// ParallelismConfig: how the ranks split into data-parallel replicas and tensor-parallel groups, under
// Accelerate's name (docs/tensor_parallel.md). dp_size x tp_size is the world; the tp ranks of one
// replica are adjacent (the innermost mesh dimension).
#pragma once

namespace accel {

struct ParallelismConfig {
  // Ranks per tensor-parallel group: each holds 1/tp_size of every split layer (1: no tensor parallelism).
  int tp_size = 1;
  // Data-parallel replicas; 0 takes world size / tp_size. Given, dp_size x tp_size must be the world.
  int dp_size = 0;
};

}  // namespace accel
