// Communicator::split on every backend under test: who lands in which group and at which rank, kNoColor,
// splits of splits, and a part's traffic staying apart from its parent's. Each rank contributes 10^rank
// to its group's sums, so a sum names exactly the world ranks that were added (at most 4 ranks here).
#include "support.h"

using namespace test;

namespace {

// The world ranks r with r % 2 == parity, ascending.
std::vector<int> of_parity(int parity, int n) {
  std::vector<int> ranks;
  for (int r = parity; r < n; r += 2) ranks.push_back(r);
  return ranks;
}

}  // namespace

TEST_CASE("split by even and odd rank: each group's members, new ranks and sums") {
  const int n = mpi().size(), r = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "split even/odd"));
    const auto part = comm->split(r % 2, r);
    REQUIRE(part != nullptr);
    CHECK(std::string(part->backend()) == comm->backend());
    CHECK(part->rank() == r / 2);
    CHECK(members(*part) == of_parity(r % 2, n));
    CHECK(all_reduced(*part, power_of_ten(r)) == sum_over(of_parity(r % 2, n)));
  }
}

TEST_CASE("split ranks a group by key, and equal keys by the old rank") {
  const int n = mpi().size(), r = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "split keys"));
    const auto reversed = comm->split(0, n - 1 - r);
    CHECK(reversed->rank() == n - 1 - r);
    std::vector<int> backwards;
    for (int q = n - 1; q >= 0; --q) backwards.push_back(q);
    CHECK(members(*reversed) == backwards);
    // Odd ranks take key 0 and even ranks key 1: the odd ones first, each half in old rank order.
    const auto odd_first = comm->split(0, r % 2 == 1 ? 0 : 1);
    std::vector<int> expected = of_parity(1, n);
    for (int q : of_parity(0, n)) expected.push_back(q);
    CHECK(members(*odd_first) == expected);
    const int position = static_cast<int>(std::find(expected.begin(), expected.end(), r) - expected.begin());
    CHECK(odd_first->rank() == position);
    const auto same_key = comm->split(3, 7);
    CHECK(same_key->rank() == r);
    CHECK(same_key->size() == n);
  }
}

TEST_CASE("a rank passing kNoColor gets no communicator; another negative color throws before communicating") {
  const int n = mpi().size(), r = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "split kNoColor"));
    const auto without_zero = comm->split(r == 0 ? kNoColor : 5, r);
    if (r == 0) {
      CHECK(without_zero == nullptr);
    } else {
      REQUIRE(without_zero != nullptr);
      CHECK(without_zero->size() == n - 1);
      CHECK(without_zero->rank() == r - 1);
      std::vector<int> rest;
      for (int q = 1; q < n; ++q) rest.push_back(q);
      CHECK(all_reduced(*without_zero, power_of_ten(r)) == sum_over(rest));
    }
    CHECK(comm->split(kNoColor, r) == nullptr);
    CHECK_THROWS_WITH_AS(comm->split(-2, 0),
                         "split: color -2 is negative; expected a color >= 0, or kNoColor (-1) to join no group",
                         Error);
    // The failed call sent nothing: the communicator is still in step on every rank.
    std::vector<int> world;
    for (int q = 0; q < n; ++q) world.push_back(q);
    CHECK(all_reduced(*comm, power_of_ten(r)) == sum_over(world));
  }
}

TEST_CASE("splits of splits, and a part that outlives the communicator it was split from") {
  const int n = mpi().size(), r = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "nested split"));
    auto half = comm->split(r % 2, r);
    const std::vector<int> mine = of_parity(r % 2, n);
    // Inside the half, reversed: the half's last member becomes rank 0.
    auto reversed = half->split(0, -half->rank());
    CHECK(members(*reversed) == std::vector<int>(mine.rbegin(), mine.rend()));
    const auto alone = reversed->split(reversed->rank(), 0);
    CHECK(alone->size() == 1);
    CHECK(alone->rank() == 0);
    half.reset();
    reversed.reset();
    CHECK(all_reduced(*alone, power_of_ten(r)) == power_of_ten(r));
    // Split from a split, then used once the middle one is gone.
    half = comm->split(r % 2, r);
    const auto same = half->split(0, half->rank());
    half.reset();
    CHECK(members(*same) == mine);
    CHECK(all_reduced(*same, power_of_ten(r)) == sum_over(mine));
  }
}

TEST_CASE("a part's traffic never mixes with its parent's: interleaved async collectives") {
  const int n = mpi().size(), r = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 100003, "split traffic"));
    const auto part = comm->split(r % 2, r);
    const std::vector<int> group = of_parity(r % 2, n);
    std::vector<int> world;
    for (int q = 0; q < n; ++q) world.push_back(q);
    // Same dtype and shape on both, so a message delivered to the wrong communicator would be taken
    // and only the values could tell; the parent's carry 10^r times i + 1, the part's 10^r times 2 (i + 1).
    const int64_t count = 100003;
    const auto ramp = [&](int64_t factor) {
      return filled<int64_t>({count}, [&, factor](int64_t i) { return factor * (i + 1) * power_of_ten(r); });
    };
    const Tensor a = ramp(1), b = ramp(2), c = ramp(1), d = ramp(2);
    const Tensor e = ramp(1), f = ramp(2);
    std::vector<Work> works;
    works.push_back(comm->all_reduce_async(a));
    works.push_back(part->all_reduce_async(b));
    works.push_back(comm->broadcast_async(e, n - 1));
    works.push_back(part->all_reduce_async(d));
    works.push_back(part->broadcast_async(f, 0));
    works.push_back(comm->all_reduce_async(c));
    for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
    const int64_t world_sum = sum_over(world), group_sum = sum_over(group);
    CHECK(mismatch<int64_t>(a, [&](int64_t i) { return (i + 1) * world_sum; }) == "");
    CHECK(mismatch<int64_t>(c, [&](int64_t i) { return (i + 1) * world_sum; }) == "");
    CHECK(mismatch<int64_t>(b, [&](int64_t i) { return 2 * (i + 1) * group_sum; }) == "");
    CHECK(mismatch<int64_t>(d, [&](int64_t i) { return 2 * (i + 1) * group_sum; }) == "");
    CHECK(mismatch<int64_t>(e, [&](int64_t i) { return (i + 1) * power_of_ten(n - 1); }) == "");
    CHECK(mismatch<int64_t>(f, [&](int64_t i) { return 2 * (i + 1) * power_of_ten(group[0]); }) == "");
  }
}
