// Names, sizes and bus-bandwidth factors of the benchmarked collectives.
#include "bench/lib/collective_kind.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace accel::bench {

const char* collective_command(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "allreduce";
    case CollectiveKind::all_gather: return "allgather";
    case CollectiveKind::reduce_scatter: return "reducescatter";
    case CollectiveKind::broadcast: return "broadcast";
  }
  return "unknown";
}

const char* mpi_call_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "MPI_Allreduce";
    case CollectiveKind::all_gather: return "MPI_Allgather";
    case CollectiveKind::reduce_scatter: return "MPI_Reduce_scatter_block";
    case CollectiveKind::broadcast: return "MPI_Bcast";
  }
  return "unknown";
}

CollectiveKind parse_collective(const std::string& command) {
  for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                              CollectiveKind::broadcast})
    if (command == collective_command(kind)) return kind;
  throw Error(fmt::format("bench: unknown collective '{}'; expected allreduce, allgather, reducescatter or broadcast",
                          command));
}

bool reduces(CollectiveKind kind) {
  return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter;
}

bool has_out_of_place(CollectiveKind kind) { return kind != CollectiveKind::broadcast; }

double bus_bandwidth_factor(CollectiveKind kind, int ranks) {
  if (ranks < 1) throw Error(fmt::format("bus_bandwidth_factor: {} ranks; expected at least 1", ranks));
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter: return (n - 1) / n;
    case CollectiveKind::broadcast: return 1.0;
  }
  return 1.0;
}

MessageShape message_shape(CollectiveKind kind, int64_t bytes, DType dtype, int ranks) {
  if (bytes < 0 || ranks < 1)
    throw Error(fmt::format("message_shape: {} bytes on {} ranks; expected bytes >= 0 and ranks >= 1", bytes, ranks));
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  MessageShape s;
  switch (kind) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::broadcast:
      s.count = s.part = s.in_count = s.out_count = bytes / elem;
      break;
    case CollectiveKind::all_gather:
      s.part = s.in_count = bytes / (elem * ranks);
      s.count = s.out_count = s.part * ranks;
      break;
    case CollectiveKind::reduce_scatter:
      s.part = s.out_count = bytes / (elem * ranks);
      s.count = s.in_count = s.part * ranks;
      break;
  }
  s.bytes = s.count * elem;
  return s;
}

}  // namespace accel::bench
