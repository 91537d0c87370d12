// ProcessState reads rank, local rank, world size and node from each launcher's variables.
#include <doctest/doctest.h>

#include "accel.h"
#include "runtime/process_state.h"

using namespace accel;

TEST_CASE("started plainly: one process") {
  const ProcessState s = ProcessState::from_environment({{"PATH", "/usr/bin"}});
  CHECK(s.launcher == "none");
  CHECK(s.rank == 0);
  CHECK(s.world_size == 1);
  CHECK(s.is_main_process());
}

TEST_CASE("Open MPI variables") {
  const ProcessState s = ProcessState::from_environment({{"OMPI_COMM_WORLD_RANK", "5"},
                                                         {"OMPI_COMM_WORLD_SIZE", "8"},
                                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  CHECK(s.launcher == "openmpi");
  CHECK(s.rank == 5);
  CHECK(s.world_size == 8);
  CHECK(s.local_rank == 1);
  CHECK(s.local_world_size == 4);
  CHECK(s.node_rank == 1);
  CHECK(s.num_nodes == 2);
  CHECK_FALSE(s.is_local_main_process());
}

TEST_CASE("MPICH/PMI, SLURM and torchrun variables") {
  ProcessState pmi = ProcessState::from_environment({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"},
                                                     {"MPI_LOCALNRANKS", "2"}});
  CHECK(pmi.launcher == "pmi");
  CHECK(pmi.node_rank == 1);
  ProcessState slurm = ProcessState::from_environment({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"},
                                                       {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                                                       {"SLURM_NNODES", "2"}, {"SLURM_NTASKS_PER_NODE", "2(x2)"}});
  CHECK(slurm.launcher == "slurm");
  CHECK(slurm.rank == 3);
  CHECK(slurm.local_rank == 1);
  CHECK(slurm.local_world_size == 2);
  CHECK(slurm.node_rank == 1);
  CHECK(slurm.num_nodes == 2);
  ProcessState torchrun = ProcessState::from_environment(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  CHECK(torchrun.launcher == "torchrun");
  CHECK(torchrun.local_rank == 1);
}

TEST_CASE("mpirun inside a SLURM allocation: Open MPI's variables win") {
  const ProcessState s = ProcessState::from_environment(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  CHECK(s.launcher == "openmpi");
  CHECK(s.rank == 1);
}

TEST_CASE("malformed variables are errors naming them") {
  CHECK_THROWS_WITH_AS(ProcessState::from_environment({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
                       "ProcessState: RANK='x' is not a non-negative integer", Error);
  CHECK_THROWS_WITH_AS(ProcessState::from_environment({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                       "ProcessState: RANK=2 is not a rank in a world of WORLD_SIZE=2", Error);
  CHECK_THROWS_WITH_AS(ProcessState::from_environment({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "3"}, {"MPI_LOCALNRANKS", "2"}}),
                       "ProcessState: local rank 3 (MPI_LOCALRANKID) is not below the 2 processes on this node", Error);
}
