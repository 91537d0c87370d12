// The communicators under test and the size lists.
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

std::string where(const Communicator& comm, DType dtype, int64_t n, const char* what) {
  return fmt::format("rank {} of {}, {} backend, {}, n = {} {}", comm.rank(), comm.size(), comm.backend(),
                     dtype_name(dtype), n, what);
}

}  // namespace test
