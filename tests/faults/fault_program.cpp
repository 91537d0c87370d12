// A 2- or 4-rank program that goes wrong in one chosen way, for tests/faults/check_faults.sh: each
// way must end the whole job quickly, with a report or a failure line naming the rank and the site.
// Usage (under accel launch): fault_program SCENARIO
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "accel.h"

using namespace accel;

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  AcceleratorOptions options;
  options.print_settings = false;
  Accelerator accelerator(options);
  const int rank = accelerator.process_index();
  Tensor t = full({4}, 1.0);
  accelerator.reduce(t);  // one collective that every rank finishes: #2 and #3 follow
  if (scenario == "gather_on_main") {
    if (accelerator.is_main_process()) accelerator.gather(t);  // FAULT-LINE gather_on_main
    else return 0;  // rank 1 calls nothing more
  } else if (scenario == "reduce_vs_broadcast") {
    if (rank == 0) accelerator.reduce(t);  // FAULT-LINE reduce_vs_broadcast
    else accelerator.broadcast(t);
  } else if (scenario == "sleep") {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    accelerator.reduce(t);  // FAULT-LINE sleep
  } else if (scenario == "throw_in_backward") {
    Generator gen(0);
    auto model = std::make_shared<nn::Linear>(4, 1, true, gen);
    model->register_backward_hook([rank](nn::Module&) {
      if (rank == 2) throw Error("a backward hook on rank 2 gives up");
    });
    auto net = accelerator.prepare(model);
    accelerator.backward(sum(net->forward(full({2, 4}, 1.0))));
  } else if (scenario == "exit" || scenario == "return") {
    if (rank == 1) {
      if (scenario == "exit") std::exit(3);
      return 3;
    }
    accelerator.reduce(t);  // FAULT-LINE exit
  } else if (scenario == "sigkill") {
    if (rank == 1) raise(SIGKILL);
    accelerator.reduce(t);
  } else if (scenario == "comm_thread") {
    // Different sizes under one all_reduce: MPI fails on the communication thread of rank 0.
    Tensor mine = zeros({rank == 0 ? 8 : 4});
    accelerator.communicator()->all_reduce(mine);
    accelerator.wait_for_everyone();
  } else {
    std::cerr << "fault_program: unknown scenario '" << scenario << "'\n";
    return 2;
  }
  accelerator.wait_for_everyone();
  std::cout << "rank " << rank << " finished\n";
  return 0;
}
