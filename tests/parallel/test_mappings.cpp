// The four differentiable collectives (Megatron's f, g, gather and scatter): their forward values
// against tensors built locally, their backward against finite differences of the objective summed as
// the group's math demands, and the collectives each direction runs.
#include <string>
#include <vector>

#include "../error_of.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "tp_support.h"

namespace test {

namespace {

using nn::parallel::copy_to_tp_region;
using nn::parallel::gather_from_tp_region;
using nn::parallel::reduce_from_tp_region;
using nn::parallel::scatter_to_tp_region;

// The same draw on every rank (a replicated value), or rank r's own (seed + 100 r): any rank can build
// every rank's part to check a collective's result without communicating.
Tensor replicated(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, gen, DType::f64);
}
Tensor part_of_rank(const Shape& shape, uint64_t seed, int rank) {
  Generator gen(seed + 100 * static_cast<uint64_t>(rank));
  return randn(shape, gen, DType::f64);
}

const std::vector<Shape> kShapes = {{6}, {2, 3}, {2, 2, 3}};

}  // namespace

TEST_CASE("copy_to_tp_region (f): identity forward; backward sums every rank's grad") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const Shape& shape : kShapes) {
      INFO("rank ", tp->rank(), " of ", tp->size(), ", shape ", shape_str(shape));
      const Tensor x = replicated(shape, 1);
      CHECK(differs(copy_to_tp_region(x, *tp), x, 0.0) == "");
      // Each rank uses x in its own way, as a column-parallel layer does with its own weights.
      const double factor = tp->rank() + 1.0;
      auto f = [&](const Tensor& in) { return tanh(copy_to_tp_region(in, *tp)) * factor; };
      CHECK(tp_gradcheck(f, *tp, x, Spread::replicated, Spread::per_rank) == "");
    }
  }
}

TEST_CASE("reduce_from_tp_region (g): forward sums the ranks' parts into one replicated value; identity backward") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const Shape& shape : kShapes) {
      INFO("rank ", tp->rank(), " of ", tp->size(), ", shape ", shape_str(shape));
      const Tensor x = part_of_rank(shape, 2, tp->rank());
      Tensor expected = zeros(shape, DType::f64);
      for (int r = 0; r < tp->size(); ++r) expected = expected + part_of_rank(shape, 2, r);
      const Tensor y = reduce_from_tp_region(x, *tp);
      CHECK(differs(y, expected, 1e-15) == "");
      CHECK(differs_across_ranks(y, *tp) == "");
      const double factor = tp->rank() + 1.0;
      auto f = [&](const Tensor& in) { return tanh(reduce_from_tp_region(in * factor, *tp)); };
      CHECK(tp_gradcheck(f, *tp, x, Spread::per_rank, Spread::replicated) == "");
    }
  }
}

TEST_CASE("gather_from_tp_region: the ranks' parts side by side on the last dim; backward keeps this rank's part") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const Shape& shape : kShapes) {
      INFO("rank ", tp->rank(), " of ", tp->size(), ", shape ", shape_str(shape));
      std::vector<Tensor> parts;
      for (int r = 0; r < tp->size(); ++r) parts.push_back(part_of_rank(shape, 3, r));
      const Tensor x = parts[static_cast<size_t>(tp->rank())];
      const Tensor y = gather_from_tp_region(x, *tp);
      CHECK(differs(y, nograd::cat(parts, -1), 0.0) == "");
      auto f = [&](const Tensor& in) { return tanh(gather_from_tp_region(in * 2.0, *tp)); };
      CHECK(tp_gradcheck(f, *tp, x, Spread::per_rank, Spread::replicated) == "");
    }
  }
}

TEST_CASE("scatter_to_tp_region: this rank's columns of the last dim; backward gathers the parts' grads") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (Shape shape : kShapes) {
      shape.back() = 2 * tp->size();
      INFO("rank ", tp->rank(), " of ", tp->size(), ", shape ", shape_str(shape));
      const Tensor x = replicated(shape, 4);
      CHECK(differs(scatter_to_tp_region(x, *tp), nograd::narrow(x, -1, 2 * tp->rank(), 2), 0.0) == "");
      const double factor = tp->rank() + 1.0;
      auto f = [&](const Tensor& in) { return tanh(scatter_to_tp_region(in, *tp)) * factor; };
      CHECK(tp_gradcheck(f, *tp, x, Spread::replicated, Spread::per_rank) == "");
    }
    CHECK(test_support::error_of([&] { scatter_to_tp_region(zeros({2, 2 * tp->size() + 1}), *tp); })
              .find("scatter_to_tp_region: the last dim of") != std::string::npos);
    CHECK(test_support::error_of([&] { gather_from_tp_region(scalar_tensor(1.0), *tp); })
              .find("gather_from_tp_region: needs a tensor with at least one dim") != std::string::npos);
  }
}

TEST_CASE("each mapping runs its one collective in one direction and none in the other") {
  CountingCommunicator tp(world()->dup());
  const Tensor x = replicated({3, 2 * tp.size()}, 5);
  struct Case {
    const char* name;
    Tensor (*map)(const Tensor&, Communicator&);
    std::string forward_kind;  // "": none
    std::string backward_kind;
  };
  const Case cases[] = {
      {"copy_to_tp_region", copy_to_tp_region, "", "all_reduce"},
      {"reduce_from_tp_region", reduce_from_tp_region, "all_reduce", ""},
      {"gather_from_tp_region", gather_from_tp_region, "all_gather", ""},
      {"scatter_to_tp_region", scatter_to_tp_region, "", "all_gather"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Tensor leaf = nograd::clone(x);
    leaf.requires_grad_();
    tp.reset();
    const Tensor y = c.map(leaf, tp);
    CHECK(tp.count("all_reduce") == (c.forward_kind == "all_reduce" ? 1 : 0));
    CHECK(tp.count("all_gather") == (c.forward_kind == "all_gather" ? 1 : 0));
    tp.reset();
    backward(sum(y));
    CHECK(tp.count("all_reduce") == (c.backward_kind == "all_reduce" ? 1 : 0));
    CHECK(tp.count("all_gather") == (c.backward_kind == "all_gather" ? 1 : 0));
    CHECK(leaf.grad().defined());
  }
}

}  // namespace test
