// CollectiveKind: the collectives `accel bench` measures, their names, how a message size maps onto
// element counts, and the bus-bandwidth factor that makes their numbers comparable (nccl-tests' rules).
#pragma once

#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace accel::bench {

enum class CollectiveKind : uint8_t { all_reduce, all_gather, reduce_scatter, broadcast };

// "allreduce", "allgather", "reducescatter", "broadcast": the `accel bench` subcommand names.
const char* collective_command(CollectiveKind kind);
// "MPI_Allreduce", ...: the raw MPI call each is measured against.
const char* mpi_call_name(CollectiveKind kind);
CollectiveKind parse_collective(const std::string& command);

// Whether the collective reduces (takes a ReduceOp).
bool reduces(CollectiveKind kind);
// Whether it has an out-of-place form (broadcast is in place only, in the Communicator and in MPI).
bool has_out_of_place(CollectiveKind kind);

// busbw = algbw * factor, with n ranks: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and
// reduce-scatter, 1 for broadcast. The factor is what a ring moves over each link per byte of message,
// so busbw can be held against the hardware's link bandwidth whatever n is (docs/benchmarks.md).
double bus_bandwidth_factor(CollectiveKind kind, int ranks);

// How one message of the sweep is laid out. As in nccl-tests, the size of a row is the larger buffer:
// the gathered output of all-gather and the scattered input of reduce-scatter (ranks parts each).
struct MessageShape {
  int64_t count = 0;       // elements in the row's size (the larger buffer)
  int64_t part = 0;        // elements per rank's part (== count for all-reduce and broadcast)
  int64_t in_count = 0;    // elements of the input tensor, out of place
  int64_t out_count = 0;   // elements of the output tensor
  int64_t bytes = 0;       // count * dtype size: the size column, after rounding down
};
// The largest message of at most `bytes` bytes: counts round down to whole parts. count is 0 when
// not even one element per part fits; the sweep skips such sizes.
MessageShape message_shape(CollectiveKind kind, int64_t bytes, DType dtype, int ranks);

}  // namespace accel::bench
