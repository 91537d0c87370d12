// The communicators under test, the size lists and the rank-identifying sums.
#include "support.h"

namespace test {

std::vector<Communicator*>& backends() {
  static std::vector<Communicator*> list;  // filled by main() for the length of the run
  return list;
}

Communicator& mpi() { return *backends().at(0); }

namespace {
std::vector<int64_t> unique_sorted(std::vector<int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}
}  // namespace

std::vector<int64_t> test_sizes(int ranks) { return unique_sorted({0, 1, 3, ranks - 1, 1000003}); }

std::vector<int64_t> part_sizes(int ranks) { return unique_sorted({0, 1, 3, ranks - 1, 1000003 / ranks}); }

int64_t power_of_ten(int rank) {
  int64_t p = 1;
  for (int i = 0; i < rank; ++i) p *= 10;
  return p;
}

int64_t sum_over(const std::vector<int>& world_ranks) {
  int64_t sum = 0;
  for (int r : world_ranks) sum += power_of_ten(r);
  return sum;
}

int64_t all_reduced(Communicator& comm, int64_t value) {
  const Tensor t = filled<int64_t>({1}, [&](int64_t) { return value; });
  comm.all_reduce(t);
  return t.data<int64_t>()[0];
}

std::vector<int> members(Communicator& comm) {
  const Tensor out = zeros({comm.size()}, DType::i64);
  comm.all_gather(filled<int64_t>({1}, [](int64_t) { return int64_t{mpi().rank()}; }), out);
  std::vector<int> ranks;
  for (int64_t r : out.to_vector<int64_t>()) ranks.push_back(static_cast<int>(r));
  return ranks;
}

std::string where(const Communicator& comm, DType dtype, int64_t n, const char* what) {
  return fmt::format("rank {} of {}, {} backend, {}, n = {} {}", comm.rank(), comm.size(), comm.backend(),
                     dtype_name(dtype), n, what);
}

}  // namespace test
