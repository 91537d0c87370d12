// `accel test`: builds the communicators and the Accelerator under the launch settings, runs the
// collective and training checks, and merges their results across ranks into one verdict.
#include "runtime/cli/self_test.h"

#include <fmt/format.h>

#include <memory>
#include <ostream>

#include "accel_config.h"
#include "kernels/error.h"
#include "runtime/accelerator.h"
#include "runtime/cli/check_list.h"
#include "runtime/cli/collective_checks.h"
#include "runtime/cli/training_checks.h"
#include "runtime/process_state.h"
#if ACCEL_WITH_MPI
#include <mpi.h>

#include "collective/mpi_communicator.h"
#include "collective/mpi_environment.h"
#include "collective/ring_communicator.h"
#endif

namespace accel {

namespace {

// The failed checks the verdict names before it only counts the rest.
constexpr size_t kNamedFailures = 8;

}  // namespace

std::string SelfTestResult::verdict() const {
  const std::string where = fmt::format("{} rank{}, backend {}", ranks, ranks == 1 ? "" : "s", backend);
  const std::string unchecked = not_checked.empty() ? "" : fmt::format("; not checked: {}", not_checked);
  if (passed()) return fmt::format("accel test: PASS ({} checks, {}{})", checks, where, unchecked);
  if (checks == 0) return fmt::format("accel test: FAIL (no checks ran, {}{})", where, unchecked);
  std::string names;
  for (size_t i = 0; i < failed.size() && i < kNamedFailures; ++i) names += (i ? ", " : "") + failed[i];
  if (failed.size() > kNamedFailures) names += fmt::format(" and {} more", failed.size() - kNamedFailures);
  return fmt::format("accel test: FAIL ({} of {} checks failed: {}; {}{})", failed.size(), checks, names, where,
                     unchecked);
}

SelfTestResult run_self_test(std::ostream& log) {
  const ProcessState state = ProcessState::from_environment();
  SelfTestResult result;
  result.ranks = state.world_size;
  result.rank = state.rank;
  CheckList checks(state.rank, log);

  // The Accelerator first: it resolves the launch settings, prints them on the main process and,
  // with several ranks, starts MPI. A setting it refuses fails the training checks below.
  std::unique_ptr<Accelerator> accelerator;
  checks.run("Accelerator under the launch settings", [&] {
    accelerator = std::make_unique<Accelerator>();
    result.backend = accelerator->backend();
    return std::string();
  });

#if ACCEL_WITH_MPI
  // The collectives run over MPI also in one process (an MPI singleton). Static: MPI cannot start
  // twice in a process, so it stays up until exit, as the Accelerator's does.
  static MpiEnvironment mpi;
  auto world = std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
  if (world->size() != state.world_size || world->rank() != state.rank)
    throw Error(fmt::format("accel test: the {} variables say rank {} of {}, but MPI says rank {} of {}; start it "
                            "with accel launch or mpirun",
                            state.launcher, state.rank, state.world_size, world->rank(), world->size()));
  check_collectives(*world, checks);
  {
    RingCommunicator ring(world);
    check_collectives(ring, checks);
  }
#else
  if (state.world_size > 1)
    throw Error(fmt::format("accel test: launched as rank {} of {}, but this build has no MPI; run `accel test` as "
                            "one process or rebuild with Open MPI",
                            state.rank, state.world_size));
  result.not_checked = "collectives (this build has no MPI)";
#endif

  if (accelerator) {
    check_training(*accelerator, checks);
    const int k = accelerator->gradient_accumulation_steps();
    check_accumulation(k > 1 ? k : 3, checks);
  } else {
    checks.record("training and accumulation", "not run: no Accelerator under these launch settings (see above)");
  }

  result.checks = checks.size();
#if ACCEL_WITH_MPI
  result.failed = checks.failed_anywhere(world.get());
#else
  result.failed = checks.failed_anywhere(nullptr);
#endif
  return result;
}

}  // namespace accel
