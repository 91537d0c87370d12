// Views share storage; contiguous copies only when needed; bad arguments name the op and values.
#include <doctest/doctest.h>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {
Tensor iota(const Shape& shape) { return arange(0.0, static_cast<double>(shape_numel(shape)), 1.0, DType::f32); }
}  // namespace

TEST_CASE("reshape and view share storage when the layout allows") {
  Tensor t = nograd::reshape(iota({6}), {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  Tensor v = nograd::view(t, {3, -1});
  CHECK(v.shape() == Shape{3, 2});
  CHECK(v.storage() == t.storage());
  CHECK(v.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("transpose is a view and contiguous copies it") {
  Tensor t = nograd::reshape(iota({6}), {2, 3});
  Tensor tt = nograd::transpose(t, 0, 1);
  CHECK(tt.storage() == t.storage());
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor c = nograd::contiguous(tt);
  CHECK(c.is_contiguous());
  CHECK(c.storage() != t.storage());
  CHECK(nograd::contiguous(t).storage() == t.storage());  // no copy when already contiguous
  CHECK_THROWS_WITH_AS(nograd::view(tt, {6}), doctest::Contains("view: cannot view [3, 2]"), Error);
  CHECK(nograd::reshape(tt, {6}).to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("permute, narrow, slice, select, squeeze, unsqueeze, flatten") {
  Tensor t = nograd::reshape(iota({24}), {2, 3, 4});
  Tensor p = nograd::permute(t, {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(nograd::select(nograd::select(nograd::select(p, 0, 3), 0, 1), 0, 2).item() == 23.0);
  Tensor n = nograd::narrow(t, 2, 1, 2);
  CHECK(n.shape() == Shape{2, 3, 2});
  CHECK(nograd::select(nograd::select(nograd::select(n, 0, 0), 0, 0), 0, 0).item() == 1.0);
  Tensor s = nograd::slice(t, 2, 0, 4, 2);
  CHECK(nograd::contiguous(s).to_vector<float>()[1] == 2.0f);
  CHECK(nograd::unsqueeze(t, 1).shape() == Shape{2, 1, 3, 4});
  CHECK(nograd::squeeze(nograd::unsqueeze(t, -1), -1).shape() == Shape{2, 3, 4});
  CHECK(nograd::flatten(t, 1).shape() == Shape{2, 12});
  CHECK_THROWS_WITH_AS(nograd::narrow(t, 1, 2, 2), "narrow: start 2 length 2 out of range for dim 1 of size 3 (shape [2, 3, 4])", Error);
  CHECK_THROWS_WITH_AS(nograd::permute(t, {0, 0, 1}), "permute: dim 0 repeated in [0, 0, 1]", Error);
  CHECK_THROWS_WITH_AS(nograd::select(t, 3, 0), doctest::Contains("select: dim 3 out of range for a tensor of rank 3"), Error);
}

TEST_CASE("expand broadcasts with stride 0") {
  Tensor t = nograd::reshape(iota({3}), {3, 1});
  Tensor e = nograd::expand(t, {2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(nograd::contiguous(e).to_vector<float>()[5] == 1.0f);
  CHECK_THROWS_WITH_AS(nograd::expand(iota({3}), {4}), doctest::Contains("expand: cannot expand [3] to [4]"), Error);
}

TEST_CASE("split and cat are inverse; stack adds a dim") {
  Tensor t = nograd::reshape(iota({10}), {5, 2});
  auto pieces = nograd::split(t, 2, 0);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[2].shape() == Shape{1, 2});
  CHECK(nograd::cat(pieces, 0).to_vector<float>() == t.to_vector<float>());
  CHECK(nograd::stack({t, t}, 1).shape() == Shape{5, 2, 2});
  CHECK_THROWS_WITH_AS(nograd::split(t, std::vector<int64_t>{2, 2}, 0), "split: sizes [2, 2] sum to 4 but dim 0 has size 5", Error);
  CHECK_THROWS_WITH_AS(nograd::cat({t, iota({3})}, 0), doctest::Contains("cat: tensor 1 is f32 [3]"), Error);
  CHECK_THROWS_WITH_AS(nograd::stack({t, nograd::transpose(t, 0, 1)}, 0), "stack: tensor 1 has shape [2, 5], expected [5, 2] like tensor 0", Error);
}

TEST_CASE("index_select picks rows and checks bounds") {
  Tensor t = nograd::reshape(iota({6}), {3, 2});
  Tensor r = nograd::index_select(t, 0, from_vector<int64_t>({2, 0}));
  CHECK(r.to_vector<float>() == std::vector<float>{4, 5, 0, 1});
  Tensor c = nograd::index_select(t, 1, from_vector<int64_t>({1}));
  CHECK(c.to_vector<float>() == std::vector<float>{1, 3, 5});
  CHECK_THROWS_WITH_AS(nograd::index_select(t, 0, from_vector<int64_t>({3})), "index_select: index 3 out of range for dim 0 of size 3", Error);
}

TEST_CASE("copy_ and casts: errors name the op and the values") {
  Tensor dst = zeros({2, 3});
  CHECK_THROWS_WITH_AS(nograd::copy_(dst, zeros({4})), "copy_: shapes [2, 3] and [4] cannot broadcast (dim 1: 3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(nograd::copy_(dst, zeros({2, 2, 3})), "copy_: source [2, 2, 3] does not broadcast to destination [2, 3]", Error);
  CHECK_THROWS_WITH_AS(nograd::copy_(dst, Tensor()), "copy_: undefined tensor", Error);
  if (!ACCEL_WITH_CUDA)
    CHECK_THROWS_WITH_AS(nograd::to_device(dst, Device::cuda(0)), "Storage: cannot allocate 24 bytes on cuda:0: accel was built without CUDA", Error);
  CHECK_THROWS_WITH_AS(Device::parse("gpu:1"), "Device::parse: cannot parse 'gpu:1', expected cpu, cuda or cuda:N", Error);
  CHECK_THROWS_WITH_AS(parse_dtype("float8"), "parse_dtype: unknown dtype 'float8', expected one of f64, f32, f16, bf16, i64, i32, bool, f8_e4m3, f8_e5m2", Error);
  nograd::copy_(dst, from_vector<int64_t>({1, 2, 3}));  // broadcasts and casts
  CHECK(dst.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
}
