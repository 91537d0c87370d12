// CheckList: recording, logging, and the max-reduction of the failure flags across ranks.
#include "runtime/cli/check_list.h"

#include <fmt/format.h>

#include <exception>
#include <ostream>

#include "collective/communicator.h"
#include "kernels/error.h"
#include "tensor/creation.h"

namespace accel {

CheckList::CheckList(int rank, std::ostream& log) : rank_(rank), log_(log) {}

void CheckList::record(const std::string& name, const std::string& problem) {
  names_.push_back(name);
  failed_.push_back(!problem.empty());
  if (!problem.empty()) log_ << fmt::format("accel test: rank {}: {}: {}\n", rank_, name, problem) << std::flush;
}

void CheckList::run(const std::string& name, const std::function<std::string()>& f) {
  std::string problem;
  try {
    problem = f();
  } catch (const std::exception& e) {
    problem = fmt::format("threw: {}", e.what());
  }
  record(name, problem);
}

std::vector<std::string> CheckList::failed_anywhere(Communicator* comm) const {
  const int64_t n = size();
  std::vector<int32_t> flags(failed_.begin(), failed_.end());
  if (comm != nullptr && comm->size() > 1) {
    // Every rank must hold as many flags as the others before they are reduced element by element.
    const Tensor counts = from_vector(std::vector<int64_t>{n, -n});
    comm->all_reduce(counts, ReduceOp::max);
    const std::vector<int64_t> c = counts.to_vector<int64_t>();
    if (c[0] != n || -c[1] != n)
      throw Error(fmt::format("CheckList::failed_anywhere: rank {} ran {} checks, but the ranks ran between {} and {}",
                              rank_, n, -c[1], c[0]));
    const Tensor merged = from_vector(flags);
    comm->all_reduce(merged, ReduceOp::max);
    flags = merged.to_vector<int32_t>();
  }
  std::vector<std::string> failed;
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i] != 0) failed.push_back(names_[i]);
  return failed;
}

}  // namespace accel
