// CommunicatorBackend: a benchmark call through the accel Communicator interface.
#include "bench/lib/bench_backend.h"

namespace accel::bench {

void CommunicatorBackend::run(const BenchCall& call) {
  switch (call.kind) {
    case CollectiveKind::all_reduce: comm_.all_reduce(call.in, call.out, call.op); return;
    case CollectiveKind::all_gather: comm_.all_gather(call.in, call.out); return;
    case CollectiveKind::reduce_scatter: comm_.reduce_scatter(call.in, call.out, call.op); return;
    case CollectiveKind::broadcast: comm_.broadcast(call.out, call.root); return;
  }
}

}  // namespace accel::bench
