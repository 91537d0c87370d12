// The world communicator, the gradcheck over a group, gathering and comparisons of the tensor-parallel
// tests.
#include "tp_support.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace test {

std::shared_ptr<Communicator>& world() {
  static std::shared_ptr<Communicator> comm;  // set by main() for the length of the run
  return comm;
}

TpGroups::TpGroups() : whole(world()->dup()) {
  all.push_back(whole.get());
  if (world()->size() == 4) {
    mesh = std::make_unique<DeviceMesh>(*world(), std::vector<MeshDim>{{"dp", 2}, {"tp", 2}});
    all.push_back(&mesh->comm("tp"));
  }
}

namespace {

// The objective of tp_gradcheck for an output y and this rank's weights w.
double objective(const Tensor& y, const Tensor& w, Communicator& tp, Spread output) {
  const Tensor local = nograd::contiguous(nograd::reshape(nograd::sum(nograd::mul(y, w)), {1}));
  if (output == Spread::per_rank) tp.all_reduce(local);
  return local.item();
}

}  // namespace

std::string tp_gradcheck(const std::function<Tensor(const Tensor&)>& f, Communicator& tp, const Tensor& x,
                         Spread input, Spread output, uint64_t seed) {
  REQUIRE(x.dtype() == DType::f64);
  const double eps = 1e-6, atol = 1e-7, rtol = 1e-6;
  Tensor leaf = nograd::clone(x);
  leaf.requires_grad_();
  const Tensor y = f(leaf);
  Generator gen(output == Spread::replicated ? seed : seed + 1000 + static_cast<uint64_t>(tp.rank()));
  const Tensor w = randn(y.shape(), gen, DType::f64);
  backward(y, w);
  // Without a grad every element compares with 0, so the numeric loop (collective) still runs.
  const Tensor grad = leaf.grad().defined() ? leaf.grad() : zeros_like(x);
  const std::vector<double> analytic = nograd::contiguous(grad).to_vector<double>();

  NoGradGuard no_grad;
  auto objective_with = [&](bool perturb, int64_t i, double delta) {
    Tensor moved = nograd::clone(x);
    if (perturb) moved.data<double>()[i] += delta;
    return objective(f(moved), w, tp, output);
  };
  // A replicated input is one value: every rank moves it together. A per-rank one moves on its owner.
  // Every rank runs every perturbation, whatever it found so far: they are collectives.
  std::string first_difference;
  const int owners = input == Spread::replicated ? 1 : tp.size();
  for (int owner = 0; owner < owners; ++owner) {
    const bool mine = input == Spread::replicated || owner == tp.rank();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double numeric =
          (objective_with(mine, i, eps) - objective_with(mine, i, -eps)) / (2 * eps);
      if (!mine || !first_difference.empty()) continue;
      const double a = analytic[static_cast<size_t>(i)];
      if (std::abs(a - numeric) > atol + rtol * std::abs(numeric))
        first_difference = fmt::format("rank {}: element {} of the input: backward gives {}, finite differences {}",
                                       tp.rank(), i, a, numeric);
    }
  }
  return first_difference;
}

Tensor gather_along(const Tensor& part, int64_t dim, Communicator& comm) {
  const Tensor in = nograd::contiguous(part);
  Shape stacked_shape{comm.size()};
  stacked_shape.insert(stacked_shape.end(), in.shape().begin(), in.shape().end());
  Tensor stacked = empty(stacked_shape, in.dtype(), in.device());
  comm.all_gather(in, stacked);
  const int64_t d = dim < 0 ? dim + in.dim() : dim;
  // [size, ..., part_d, ...] -> [..., size, part_d, ...] -> [..., size * part_d, ...]
  std::vector<int64_t> order;
  for (int64_t k = 0; k < in.dim(); ++k) {
    if (k == d) order.push_back(0);
    order.push_back(k + 1);
  }
  Shape full = in.shape();
  full[static_cast<size_t>(d)] *= comm.size();
  return nograd::contiguous(nograd::reshape(nograd::permute(stacked, order), full));
}

Tensor gather_full(const Tensor& part, const nn::parallel::TensorSplit& split, Communicator& comm) {
  const Tensor in = nograd::contiguous(part);
  Shape stacked_shape{comm.size()};
  stacked_shape.insert(stacked_shape.end(), in.shape().begin(), in.shape().end());
  Tensor stacked = empty(stacked_shape, in.dtype(), in.device());
  comm.all_gather(in, stacked);
  std::vector<Tensor> parts;
  for (int r = 0; r < comm.size(); ++r) parts.push_back(nograd::select(stacked, 0, r));
  return nn::parallel::join_parts(parts, split);
}

double max_abs(const Tensor& t) { return nograd::max(nograd::abs(nograd::to_dtype(t, DType::f64))).item(); }

std::string differs(const Tensor& a, const Tensor& b, double rtol) {
  return b.defined() ? differs_at_scale(a, b, max_abs(b), rtol) : differs_at_scale(a, b, 0, rtol);
}

std::string differs_at_scale(const Tensor& a, const Tensor& b, double scale, double rtol) {
  if (!a.defined() || !b.defined())
    return fmt::format("a {}defined, b {}defined", a.defined() ? "" : "not ", b.defined() ? "" : "not ");
  if (a.shape() != b.shape())
    return fmt::format("shapes differ: {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  const std::vector<double> va = nograd::contiguous(nograd::to_dtype(a, DType::f64)).to_vector<double>();
  const std::vector<double> vb = nograd::contiguous(nograd::to_dtype(b, DType::f64)).to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < vb.size(); ++i) {
    if (std::abs(va[i] - vb[i]) > worst) worst = std::abs(va[i] - vb[i]), at = i;
  }
  if (worst <= rtol * scale) return "";
  return fmt::format("element {}: {} vs {} (|diff| {:.3g} > {} x scale {:.3g})", at, va[at], vb[at], worst, rtol,
                     scale);
}

int collectives_run(const CountingCommunicator& c) {
  int n = 0;
  for (const char* kind :
       {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "barrier", "send", "recv"})
    n += c.count(kind);
  return n;
}

std::string differs_across_ranks(const Tensor& t, Communicator& comm) {
  const Tensor mine = nograd::contiguous(nograd::to_dtype(t, DType::f64));
  const Tensor first = nograd::clone(mine);
  comm.broadcast(first, 0);
  const std::vector<double> a = mine.to_vector<double>(), b = first.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i])))
      return fmt::format("rank {} holds {} at element {}, rank 0 {}", comm.rank(), a[i], i, b[i]);
  return "";
}

}  // namespace test
