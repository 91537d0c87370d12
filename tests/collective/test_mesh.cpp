// DeviceMesh on every backend under test: the 2 x 2 {dp, tp} mesh of docs/meshes.md on 4 ranks, every
// 2-D and 1-D mesh that fits the world, and the errors. Rank r contributes 10^r to each all_reduce, so
// the sum a rank receives over a dimension names the members of its group there.
#include "support.h"

using namespace test;

namespace {

std::vector<int> ranks_up_to(int n) {
  std::vector<int> ranks;
  for (int q = 0; q < n; ++q) ranks.push_back(q);
  return ranks;
}

// Rank q's coordinates in a grid of these sizes, row-major with the last dimension innermost: the
// last coordinate counts fastest.
std::vector<int> coordinates_of(int q, const std::vector<int>& sizes) {
  std::vector<int> coords(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    coords[d] = q % sizes[d];
    q /= sizes[d];
  }
  return coords;
}

// The world ranks that share every coordinate but dimension d's with rank r, ascending.
std::vector<int> group_along(int r, size_t d, const std::vector<int>& sizes, int n) {
  const std::vector<int> mine = coordinates_of(r, sizes);
  std::vector<int> group;
  for (int q = 0; q < n; ++q) {
    std::vector<int> theirs = coordinates_of(q, sizes);
    theirs[d] = mine[d];
    if (theirs == mine) group.push_back(q);
  }
  return group;
}

// Builds the mesh over comm and checks everything it reports against the layout worked out above.
void check_mesh(Communicator& comm, const std::vector<MeshDim>& dims) {
  const int n = comm.size(), r = comm.rank();
  std::vector<int> sizes;
  for (const MeshDim& d : dims) sizes.push_back(d.size);
  const DeviceMesh mesh(comm, dims);
  INFO("mesh " << mesh.str());
  CHECK(mesh.ndim() == static_cast<int>(dims.size()));
  CHECK(mesh.rank() == r);
  CHECK(mesh.size() == n);
  CHECK(mesh.coordinates() == coordinates_of(r, sizes));
  for (size_t d = 0; d < dims.size(); ++d) {
    INFO("dim " << dims[d].name);
    const int i = static_cast<int>(d);
    CHECK(mesh.dim_index(dims[d].name) == i);
    CHECK(mesh.size(dims[d].name) == dims[d].size);
    CHECK(mesh.coordinate(dims[d].name) == mesh.coordinates()[d]);
    CHECK(&mesh.comm(dims[d].name) == &mesh.comm(i));
    Communicator& along = mesh.comm(i);
    CHECK(std::string(along.backend()) == comm.backend());
    CHECK(along.size() == dims[d].size);
    CHECK(along.rank() == mesh.coordinate(i));
    const std::vector<int> group = group_along(r, d, sizes, n);
    CHECK(mesh.group(i) == group);
    CHECK(members(along) == group);
    CHECK(all_reduced(along, power_of_ten(r)) == sum_over(group));
  }
}

}  // namespace

TEST_CASE("a 2 x 2 mesh {dp, tp} on 4 ranks: coordinates, groups and the sums of docs/meshes.md") {
  if (mpi().size() != 4) return;
  const int r = mpi().rank();
  // Rows of the grid are tp groups {0, 1}, {2, 3}; columns are dp groups {0, 2}, {1, 3}.
  const int dp[4] = {0, 0, 1, 1}, tp[4] = {0, 1, 0, 1};
  const int64_t tp_sum[4] = {11, 11, 1100, 1100}, dp_sum[4] = {101, 1010, 101, 1010};
  const std::vector<int> tp_group[4] = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<int> dp_group[4] = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "2 x 2 mesh"));
    const DeviceMesh mesh(*comm, {{"dp", 2}, {"tp", 2}});
    CHECK(mesh.str() == "dp=2 x tp=2");
    CHECK(mesh.coordinate("dp") == dp[r]);
    CHECK(mesh.coordinate("tp") == tp[r]);
    CHECK(mesh.group("tp") == tp_group[r]);
    CHECK(mesh.group("dp") == dp_group[r]);
    CHECK(mesh.comm("tp").rank() == tp[r]);
    CHECK(mesh.comm("dp").rank() == dp[r]);
    // Interleaved on the two dimensions, as a tensor-parallel step inside data parallelism would be.
    const int64_t on_tp = all_reduced(mesh.comm("tp"), power_of_ten(r));
    const int64_t on_dp = all_reduced(mesh.comm("dp"), power_of_ten(r));
    CHECK(on_tp == tp_sum[r]);
    CHECK(on_dp == dp_sum[r]);
  }
}

TEST_CASE("every 2-D mesh that fits the world (4 x 1, 1 x 4, 2 x 1, ...), a 1-D and a 3-D mesh") {
  const int n = mpi().size();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "meshes"));
    for (int outer = 1; outer <= n; ++outer)
      if (n % outer == 0) check_mesh(*comm, {{"dp", outer}, {"tp", n / outer}});
    // One dimension over the whole world: its communicator spans every rank.
    check_mesh(*comm, {{"world", n}});
    const DeviceMesh line(*comm, {{"dp", n}});
    CHECK(line.comm("dp").size() == n);
    CHECK(all_reduced(line.comm("dp"), power_of_ten(mpi().rank())) == sum_over(ranks_up_to(n)));
    if (n % 2 == 0) check_mesh(*comm, {{"pp", 2}, {"dp", 1}, {"tp", n / 2}});
  }
}

TEST_CASE("DeviceMesh errors name the values and what was expected, on every rank alike") {
  const int n = mpi().size();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "mesh errors"));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", n + 1}}); }) ==
          fmt::format("DeviceMesh: dp={} holds {} ranks, but the communicator has {}; expected the sizes to multiply "
                      "to {}",
                      n + 1, n + 1, n, n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", 2}, {"tp", n}}); }) ==
          fmt::format("DeviceMesh: dp=2 x tp={} holds {} ranks, but the communicator has {}; expected the sizes to "
                      "multiply to {}",
                      n, 2 * n, n, n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", n}, {"tp", 0}}); }) ==
          fmt::format("DeviceMesh: dim 'tp' has size 0 in dp={} x tp=0; expected a size >= 1", n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", -n}, {"tp", -1}}); }) ==
          fmt::format("DeviceMesh: dim 'dp' has size {} in dp={} x tp=-1; expected a size >= 1", -n, -n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", n}, {"dp", 1}}); }) ==
          fmt::format("DeviceMesh: dim name 'dp' appears twice in dp={} x dp=1; expected distinct names", n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {{"dp", 1}, {"", n}}); }) ==
          fmt::format("DeviceMesh: dim 1 of dp=1 x \"\"={} has an empty name; expected a name such as \"tp\"", n));
    CHECK(error_of([&] { (void)DeviceMesh(*comm, {}); }) ==
          "DeviceMesh: no dims; expected at least one, e.g. {\"dp\", world size}");

    const DeviceMesh mesh(*comm, {{"dp", n}, {"tp", 1}});
    const std::string unknown = fmt::format("DeviceMesh: no dim named 'pp' in dp={} x tp=1", n);
    CHECK(error_of([&] { (void)mesh.size("pp"); }) == unknown);
    CHECK(error_of([&] { (void)mesh.coordinate("pp"); }) == unknown);
    CHECK(error_of([&] { (void)mesh.comm("pp"); }) == unknown);
    CHECK(error_of([&] { (void)mesh.group("pp"); }) == unknown);
    CHECK(error_of([&] { (void)mesh.comm(2); }) ==
          fmt::format("DeviceMesh: dim index 2 out of range [0, 2) of dp={} x tp=1", n));
    CHECK(error_of([&] { (void)mesh.size(-1); }) ==
          fmt::format("DeviceMesh: dim index -1 out of range [0, 2) of dp={} x tp=1", n));
    // After the errors every rank is still in step on comm.
    CHECK(all_reduced(*comm, power_of_ten(mpi().rank())) == sum_over(ranks_up_to(n)));
  }
}

TEST_CASE("ranks that build different meshes all throw instead of waiting for each other") {
  const int n = mpi().size(), r = mpi().rank();
  if (n < 2) return;
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "mesh disagreement"));
    // Rank 0 names the dimension differently.
    const std::vector<MeshDim> dims = r == 0 ? std::vector<MeshDim>{{"dp", n}} : std::vector<MeshDim>{{"tp", n}};
    CHECK(error_of([&] { (void)DeviceMesh(*comm, dims); }) ==
          fmt::format("DeviceMesh: ranks disagree on the mesh: rank {} has {}={}, which only {} of the {} ranks have; "
                      "expected every rank to build the same mesh",
                      r, r == 0 ? "dp" : "tp", n, r == 0 ? 1 : n - 1, n));
    // Rank 0's dims are also invalid: it must still join the others in failing, not fail alone.
    const std::vector<MeshDim> bad = r == 0 ? std::vector<MeshDim>{{"dp", 0}} : std::vector<MeshDim>{{"dp", n}};
    CHECK(error_of([&] { (void)DeviceMesh(*comm, bad); }).find("DeviceMesh: ranks disagree on the mesh") == 0);
    CHECK(all_reduced(*comm, power_of_ten(r)) == sum_over(ranks_up_to(n)));
  }
}
