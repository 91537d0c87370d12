// Backend: which communicator the ranks use, as the settings name it (auto, mpi, ring, nccl), with
// its one name table.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/named_values.h"

namespace accel {

// The values are fixed and only appended: they are written to files and sent between ranks.
enum class Backend : uint8_t {
  automatic = 0,  // "auto": mpi on the CPU, nccl for GPUs when every rank has its own
  mpi = 1,        // the MPI library's collectives; device tensors are staged through the host
  ring = 2,       // the teaching ring all-reduce over MPI send/recv
  nccl = 3,
};

inline constexpr std::array<NamedValue<Backend>, 4> kBackendNames{{
    {Backend::automatic, "auto"},
    {Backend::mpi, "mpi"},
    {Backend::ring, "ring"},
    {Backend::nccl, "nccl"},
}};

constexpr const char* name_of(Backend value) { return name_in(kBackendNames, value); }

}  // namespace accel
