// DeviceMesh: checks the dims, checks that every rank passed the same ones, then splits one
// communicator per dimension off the parent.
#include "collective/device_mesh.h"

#include <fmt/format.h>

#include <cstdint>
#include <set>

#include "kernels/fnv1a.h"

namespace accel {

namespace {

std::string describe(const std::vector<MeshDim>& dims) {
  std::string text;
  for (const MeshDim& d : dims)
    text += fmt::format("{}{}={}", text.empty() ? "" : " x ", d.name.empty() ? "\"\"" : d.name, d.size);
  return text.empty() ? "(no dims)" : text;
}

// A split color standing for the dims (FNV-1a over names and sizes, folded to 31 bits): equal dims
// give equal colors on every rank and every build, different dims almost surely different ones.
int fingerprint(const std::vector<MeshDim>& dims) {
  Fnv1a hash;
  for (const MeshDim& d : dims) hash.text(d.name).word(static_cast<uint64_t>(d.size));
  return static_cast<int>(hash.value() >> 33);
}

// Every rank splits by the fingerprint of its dims. Ranks that agree land in one group, so this
// rank's group is the whole communicator exactly when all ranks agree, and every rank learns it.
// Run before the dims are checked, so that ranks with different (or bad) dims all throw together
// instead of some waiting forever in a split the others never join.
void check_agreement(Communicator& comm, const std::vector<MeshDim>& dims) {
  const std::unique_ptr<Communicator> same = comm.split(fingerprint(dims), comm.rank());
  if (same->size() != comm.size())
    throw Error(fmt::format("DeviceMesh: ranks disagree on the mesh: rank {} has {}, which only {} of the {} ranks "
                            "have; expected every rank to build the same mesh",
                            comm.rank(), describe(dims), same->size(), comm.size()));
}

void check_dims(const std::vector<MeshDim>& dims, int ranks) {
  if (dims.empty()) throw Error("DeviceMesh: no dims; expected at least one, e.g. {\"dp\", world size}");
  std::set<std::string> names;
  double product = 1;  // exact up to 2^53, and never equal to a rank count when larger
  for (size_t i = 0; i < dims.size(); ++i) {
    const MeshDim& d = dims[i];
    if (d.name.empty())
      throw Error(fmt::format("DeviceMesh: dim {} of {} has an empty name; expected a name such as \"tp\"", i,
                              describe(dims)));
    if (!names.insert(d.name).second)
      throw Error(fmt::format("DeviceMesh: dim name '{}' appears twice in {}; expected distinct names", d.name,
                              describe(dims)));
    if (d.size < 1)
      throw Error(fmt::format("DeviceMesh: dim '{}' has size {} in {}; expected a size >= 1", d.name, d.size,
                              describe(dims)));
    product *= d.size;
  }
  if (product != ranks)
    throw Error(fmt::format("DeviceMesh: {} holds {} ranks, but the communicator has {}; expected the sizes to "
                            "multiply to {}",
                            describe(dims), product, ranks, ranks));
}

}  // namespace

DeviceMesh::DeviceMesh(Communicator& comm, std::vector<MeshDim> dims)
    : dims_(std::move(dims)), rank_(comm.rank()), size_(comm.size()) {
  check_agreement(comm, dims_);
  check_dims(dims_, size_);
  for (int d = 0; d < ndim(); ++d) coords_.push_back(rank_ / stride(d) % dims_[d].size);
  // The group along d: the ranks whose other coordinates equal ours. Its first member (coordinate 0
  // along d) names it, and the coordinate along d orders it.
  for (int d = 0; d < ndim(); ++d) {
    const int first = rank_ - coords_[d] * stride(d);
    comms_.push_back(comm.split(first, coords_[d]));
    const Communicator& part = *comms_.back();
    if (part.rank() != coords_[d] || part.size() != dims_[d].size)
      throw Error(fmt::format("DeviceMesh: the {} communicator of '{}' is rank {} of {}; expected rank {} of {}",
                              part.backend(), dims_[d].name, part.rank(), part.size(), coords_[d], dims_[d].size));
  }
}

int DeviceMesh::stride(int dim) const {
  int stride = 1;
  for (int d = dim + 1; d < ndim(); ++d) stride *= dims_[d].size;
  return stride;
}

void DeviceMesh::check_dim(int dim) const {
  if (dim < 0 || dim >= ndim())
    throw Error(fmt::format("DeviceMesh: dim index {} out of range [0, {}) of {}", dim, ndim(), describe(dims_)));
}

int DeviceMesh::dim_index(const std::string& name) const {
  for (int d = 0; d < ndim(); ++d)
    if (dims_[d].name == name) return d;
  throw Error(fmt::format("DeviceMesh: no dim named '{}' in {}", name, describe(dims_)));
}

int DeviceMesh::size(int dim) const {
  check_dim(dim);
  return dims_[dim].size;
}

int DeviceMesh::coordinate(int dim) const {
  check_dim(dim);
  return coords_[dim];
}

Communicator& DeviceMesh::comm(int dim) const {
  check_dim(dim);
  return *comms_[dim];
}

std::vector<int> DeviceMesh::group(int dim) const {
  check_dim(dim);
  std::vector<int> ranks;
  const int first = rank_ - coords_[dim] * stride(dim);
  for (int i = 0; i < dims_[dim].size; ++i) ranks.push_back(first + i * stride(dim));
  return ranks;
}

std::string DeviceMesh::str() const { return describe(dims_); }

}  // namespace accel
