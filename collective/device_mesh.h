// DeviceMesh: the ranks of a communicator laid out as a grid with named dimensions (dp x tp, say), and
// for each dimension a communicator over the ranks that differ only in that dimension's coordinate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"

namespace accel {

// One dimension of a mesh: its name and how many ranks lie along it.
struct MeshDim {
  std::string name;
  int size = 1;
};

// The ranks fill the grid in row-major order, the last dimension innermost. In a {dp: 2, tp: 2} mesh
// rank r sits at dp = r / 2, tp = r % 2:
//
//            tp = 0   tp = 1
//   dp = 0   rank 0   rank 1      tp groups (rows):    {0, 1}, {2, 3}
//   dp = 1   rank 2   rank 3      dp groups (columns): {0, 2}, {1, 3}
//
// A rank's communicator for a dimension holds its group along that dimension, and its rank there is
// its coordinate in that dimension.
class DeviceMesh {
 public:
  // Collective over comm: every rank builds the same mesh, at the same point among its collectives on
  // comm. The dimension communicators are split from comm at construction (same backend) and do not
  // need comm afterwards. Throws accel::Error on every rank when the sizes do not multiply to
  // comm.size(), a size is < 1, a name is empty or repeated, or the ranks passed different dims.
  DeviceMesh(Communicator& comm, std::vector<MeshDim> dims);

  int ndim() const { return static_cast<int>(dims_.size()); }
  const std::vector<MeshDim>& dims() const { return dims_; }
  int rank() const { return rank_; }  // this rank in the whole mesh (its rank in comm)
  int size() const { return size_; }  // ranks in the whole mesh

  // Dimension lookups, by name or by index (0 is the outermost). Unknown names throw accel::Error.
  int dim_index(const std::string& name) const;
  int size(const std::string& name) const { return size(dim_index(name)); }
  int size(int dim) const;
  int coordinate(const std::string& name) const { return coordinate(dim_index(name)); }
  int coordinate(int dim) const;
  const std::vector<int>& coordinates() const { return coords_; }
  Communicator& comm(const std::string& name) const { return comm(dim_index(name)); }
  Communicator& comm(int dim) const;
  // The mesh ranks of this rank's group along a dimension, in the order of their ranks in comm(dim).
  std::vector<int> group(const std::string& name) const { return group(dim_index(name)); }
  std::vector<int> group(int dim) const;

  // "dp=2 x tp=2", for messages.
  std::string str() const;

 private:
  int stride(int dim) const;  // how far apart in rank two neighbours along dim are
  void check_dim(int dim) const;

  std::vector<MeshDim> dims_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<Communicator>> comms_;  // one per dimension
};

}  // namespace accel
