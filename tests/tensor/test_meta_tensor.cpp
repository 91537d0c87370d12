// Meta tensors and DeferredInit at the tensor layer: the creation functions make meta tensors that
// move the generator as a draw would, reading one throws naming its shape, and any run of a meta
// tensor's elements (offsets mid-Philox-block, odd sizes, every float dtype) materialises bitwise
// equal to the same elements of the eager tensor.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "../error_of.h"
#include "accel.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

using namespace accel;
using test_support::error_of;

namespace {

// The bytes of t's elements in row-major order, for bitwise comparisons.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = nograd::contiguous(nograd::to_device(t, Device::cpu()));
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

// Elements [first, first + n) of t, flattened.
Tensor run_of(const Tensor& t, int64_t first, int64_t n) {
  return nograd::narrow(nograd::view(nograd::contiguous(t), {t.numel()}), 0, first, n);
}

// One way to make a tensor from a generator, called once eagerly and once under DeferredInit.
using Make = std::function<Tensor(Generator&)>;

// Checks every run in `runs` of the deferred tensor against the eager one, bitwise, and that both
// moved the generator to the same place.
void check_runs(const Make& make, const std::vector<std::pair<int64_t, int64_t>>& runs) {
  Generator eager_gen(91), deferred_gen(91);
  const Tensor eager = make(eager_gen);
  Tensor meta;
  {
    DeferredInit deferred;
    meta = make(deferred_gen);
  }
  REQUIRE(meta.is_meta());
  REQUIRE_FALSE(eager.is_meta());
  CHECK(deferred_gen.state() == eager_gen.state());
  CHECK(meta.shape() == eager.shape());
  CHECK(meta.dtype() == eager.dtype());
  for (const auto& [first, n] : runs) {
    INFO("elements [", first, ", ", first + n, ") of ", eager.str());
    const Tensor dst = empty({n}, meta.dtype());
    materialize_run(meta, first, dst);
    CHECK(bytes_of(dst) == bytes_of(run_of(eager, first, n)));
  }
}

// Runs that start and end at every position within a Philox block (4 uniforms, 2 normals per
// block), odd lengths, one element, and the whole tensor.
std::vector<std::pair<int64_t, int64_t>> runs_for(int64_t numel) {
  std::vector<std::pair<int64_t, int64_t>> runs{{0, numel}, {numel - 1, 1}};
  for (int64_t first : {0, 1, 2, 3, 5, 6, 7})
    for (int64_t n : {1, 2, 3, 5, 9, 13})
      if (first + n <= numel) runs.emplace_back(first, n);
  return runs;
}

}  // namespace

TEST_CASE("under DeferredInit the creation functions make meta tensors whose data cannot be read") {
  Generator gen(1);
  DeferredInit deferred;
  for (const Tensor& t : {empty({13, 7}), zeros({13, 7}), ones({13, 7}), full({13, 7}, 2.0), randn({13, 7}, gen),
                          rand({13, 7}, gen), uniform({13, 7}, -1, 1, gen), normal({13, 7}, 0, 0.02, gen),
                          zeros_like(empty({13, 7}))}) {
    CHECK(t.is_meta());
    CHECK(t.shape() == Shape{13, 7});
    CHECK(error_of([&] { (void)t.data_ptr(); }) ==
          "Tensor::data_ptr: this f32 tensor of shape [13, 7] is not materialised: it was made under "
          "accel::DeferredInit (init_empty_weights) and has a shape but no data; prepare its model with an "
          "Accelerator, or call nn::materialize, before reading it");
  }
  // An op reads its input's data, so it throws rather than read garbage.
  const Tensor meta = ones({3});
  CHECK(error_of([&] { (void)nograd::clone(meta); }).find("shape [3] is not materialised") != std::string::npos);
  CHECK(error_of([&] { (void)meta.to_vector<float>(); }).find("is not materialised") != std::string::npos);
  {
    DeferredInit off(false);
    CHECK_FALSE(zeros({2}).is_meta());
  }
  CHECK(zeros({2}).is_meta());
  // arange and from_vector hold values they are given, never a recipe.
  CHECK_FALSE(from_vector<float>({1, 2}).is_meta());
}

TEST_CASE("the scope ends with its guard, and init_empty_weights is the same scope") {
  CHECK_FALSE(DeferredInit::is_enabled());
  {
    auto scope = init_empty_weights();
    CHECK(DeferredInit::is_enabled());
    CHECK(empty({2}).is_meta());
  }
  CHECK_FALSE(DeferredInit::is_enabled());
  CHECK_FALSE(empty({2}).is_meta());
}

TEST_CASE("every draw's materialised runs equal the eager draw's elements bitwise, in every float dtype") {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    INFO(dtype_name(dtype));
    // 91 elements: 22.75 uniform blocks, 45.5 normal blocks, so the last block is cut short too.
    check_runs([&](Generator& g) { return randn({13, 7}, g, dtype); }, runs_for(91));
    check_runs([&](Generator& g) { return rand({91}, g, dtype); }, runs_for(91));
    check_runs([&](Generator& g) { return uniform({7, 13}, -0.3, 0.7, g, dtype); }, runs_for(91));
    check_runs([&](Generator& g) { return normal({91}, 0.5, 0.02, g, dtype); }, runs_for(91));
    check_runs([&](Generator&) { return full({5, 3}, 0.1, dtype); }, runs_for(15));
    check_runs([&](Generator&) { return zeros({5}, dtype); }, runs_for(5));
    check_runs([&](Generator&) { return ones({5}, dtype); }, runs_for(5));
  }
  // A draw that does not start at block 0 of the stream, as every parameter after the first.
  check_runs(
      [](Generator& g) {
        (void)randn({3}, g);  // 2 normal blocks
        (void)rand({5}, g);   // 2 uniform blocks
        return randn({4, 5}, g);
      },
      runs_for(20));
}

TEST_CASE("more than a million elements: a run is computed in pieces and still equals the eager draw") {
  const int64_t n = (int64_t{1} << 20) + 37;
  check_runs([&](Generator& g) { return normal({n}, 0.0, 0.02, g); }, {{0, n}, {3, n - 5}, {(int64_t{1} << 20) - 1, 9}});
}

TEST_CASE("initialisers recorded on views (rows, a column, a transposed view) apply in order, as eager writes do") {
  // Each lambda takes a fresh tensor and writes it eagerly (copy_, fill_) or records (meta).
  auto build = [](Generator& g) {
    Tensor t = randn({6, 5}, g);
    auto apply = [&](const Tensor& region, const FillRecipe& fill) {
      if (region.is_meta()) record_fill(region, fill);
      else if (!fill.is_constant()) nograd::copy_(region, fill.values(region.shape(), 0, region.dtype(), region.device()));
      else nograd::fill_(region, fill.a);
    };
    apply(nograd::narrow(t, 0, 4, 2), FillRecipe::constant(0.0));                             // rows 4-5
    apply(nograd::select(t, 0, 1), FillRecipe::uniform(-1, 1, 5, g));                         // row 1
    apply(nograd::narrow(t, 1, 2, 2), FillRecipe::normal(3.0, 0.5, 12, g));                   // columns 2-3
    apply(nograd::narrow(nograd::transpose(t, 0, 1), 0, 4, 1), FillRecipe::constant(-2.0));  // column 4
    return t;
  };
  check_runs(build, runs_for(30));
}

TEST_CASE("a meta tensor made with empty() and not initialised in full cannot be materialised") {
  Tensor t;
  {
    DeferredInit deferred;
    t = empty({4, 3});
    record_fill(nograd::narrow(t, 0, 0, 2), FillRecipe::constant(1.0));  // rows 0-1 only
  }
  const Tensor dst = empty({3});
  materialize_run(t, 3, dst);  // row 1 is covered
  CHECK(dst.to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(error_of([&] { materialize_run(t, 4, empty({4})); }) ==
        "materialize_run: the f32 tensor of shape [4, 3]: 2 of its elements, the first at 6, were written by no "
        "initialiser (made with empty() and never initialised?)");
  CHECK(error_of([&] { materialize_in_place(t, "w"); }) ==
        "materialize: 'w', a f32 tensor of shape [4, 3]: 6 of its elements, the first at 6, were written by no "
        "initialiser (made with empty() and never initialised?)");
  CHECK(t.is_meta());  // a refused materialisation changes nothing
}

TEST_CASE("materialize_in_place gives every view of the storage the eager values") {
  Generator eager_gen(5), deferred_gen(5);
  const Tensor eager = normal({4, 6}, 0.0, 0.02, eager_gen);
  Tensor meta, alias;
  {
    DeferredInit deferred;
    meta = normal({4, 6}, 0.0, 0.02, deferred_gen);
  }
  alias = nograd::narrow(meta, 0, 1, 2);  // another view of the same storage
  materialize_in_place(meta);
  CHECK_FALSE(meta.is_meta());
  CHECK_FALSE(alias.is_meta());
  CHECK(bytes_of(meta) == bytes_of(eager));
  CHECK(bytes_of(alias) == bytes_of(nograd::narrow(eager, 0, 1, 2)));
}

TEST_CASE("a meta tensor moved to a device keeps its recipe; its fingerprint follows the seed") {
  Generator a(3), b(3), c(4);
  Tensor x, y, z;
  {
    DeferredInit deferred;
    x = randn({9}, a);
    y = randn({9}, b);
    z = randn({9}, c);
  }
  const Tensor moved = meta_to_device(x, Device::cpu());
  CHECK(moved.is_meta());
  CHECK(moved.storage() != x.storage());
  CHECK(moved.storage()->recipe()->fingerprint() == x.storage()->recipe()->fingerprint());
  CHECK(y.storage()->recipe()->fingerprint() == x.storage()->recipe()->fingerprint());
  CHECK(z.storage()->recipe()->fingerprint() != x.storage()->recipe()->fingerprint());
  CHECK(error_of([&] { materialize_run(x, 5, empty({5})); }) ==
        "materialize_run: elements [5, 10) are outside the 9 of shape [9]");
}

TEST_CASE("a source step reads only the run asked of it, in the recipe's dtype, over the draws it overwrites") {
  // The source: a [4, 5] f64 tensor 0, 1, ..., 19 that records each read.
  const Tensor values = arange(0, 20, 1, DType::f64);
  std::vector<std::pair<int64_t, int64_t>> reads;
  auto source = std::make_shared<ElementSource>();
  source->read = [&](int64_t first, int64_t count) {
    reads.emplace_back(first, count);
    return nograd::narrow(values, 0, first, count);
  };
  source->fingerprint = 7;
  source->description = "'w' of test.safetensors";
  Generator gen(1);
  Tensor t;
  {
    DeferredInit deferred;
    t = randn({4, 5}, gen);
    record_fill(t, FillRecipe::from_source(source));
  }
  const Tensor dst = empty({6});
  materialize_run(t, 7, dst);
  CHECK(dst.to_vector<float>() == std::vector<float>{7, 8, 9, 10, 11, 12});
  CHECK(reads == std::vector<std::pair<int64_t, int64_t>>{{7, 6}});
  CHECK(FillRecipe::from_source(source).str() == "the elements of 'w' of test.safetensors");

  // On a column view: the source fills columns 1-2 row by row, the draw the rest.
  Generator eager_gen(2), deferred_gen(2);
  Tensor eager = randn({4, 5}, eager_gen), column_meta;
  nograd::copy_(nograd::narrow(eager, 1, 1, 2), nograd::to_dtype(nograd::view(nograd::narrow(values, 0, 0, 8), {4, 2}), DType::f32));
  {
    DeferredInit deferred;
    column_meta = randn({4, 5}, deferred_gen);
    record_fill(nograd::narrow(column_meta, 1, 1, 2), FillRecipe::from_source(source));
  }
  materialize_in_place(column_meta);
  CHECK(bytes_of(column_meta) == bytes_of(eager));

  // The source's fingerprint is part of the recipe's.
  auto other = std::make_shared<ElementSource>(*source);
  other->fingerprint = 8;
  Tensor a, b;
  {
    DeferredInit deferred;
    a = empty({4, 5});
    b = empty({4, 5});
    record_fill(a, FillRecipe::from_source(source));
    record_fill(b, FillRecipe::from_source(other));
  }
  CHECK(a.storage()->recipe()->fingerprint() != b.storage()->recipe()->fingerprint());
  CHECK(error_of([] { (void)FillRecipe::from_source(nullptr); }) == "FillRecipe::from_source: no source to read from");
}
