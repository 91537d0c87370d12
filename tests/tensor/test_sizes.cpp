// Sizes that overflow int64: every creation op, view and the readers refuse a shape whose element
// count, strides or byte count does not fit, with a message naming the op and the shape, and an
// allocation that cannot be met is an accel::Error naming the bytes, never a crash.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

constexpr int64_t p2(int bits) { return int64_t{1} << bits; }

}  // namespace

TEST_CASE("creation ops refuse a shape whose element count overflows int64, naming the op and the shape") {
  CHECK_THROWS_WITH_AS(empty({p2(40), p2(40)}),
                       "empty: shape [1099511627776, 1099511627776] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(ones({p2(32), p2(31)}, DType::f64),
                       "ones: shape [4294967296, 2147483648] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(zeros({p2(40), p2(40), 3}),
                       "zeros: shape [1099511627776, 1099511627776, 3] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(full({p2(62), 2}, 1.0),
                       "full: shape [4611686018427387904, 2] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(from_vector<float>({1}, {p2(32), p2(32), 1}),
                       "from_vector: shape [4294967296, 4294967296, 1] has more elements than int64 can count", Error);
  // A 0 dim leaves no element, but the contiguous strides are still products of the other dims.
  CHECK(empty({0, p2(40)}).numel() == 0);
  CHECK_THROWS_WITH_AS(empty({0, p2(40), p2(40)}),
                       "empty: shape [0, 1099511627776, 1099511627776] has strides that overflow int64", Error);
}

TEST_CASE("creation ops refuse a shape whose byte count overflows int64 (it used to wrap to a small block)") {
  // 2^62 f32 elements are 2^64 bytes: the product wrapped to 0, and the fill ran off the allocation.
  CHECK_THROWS_WITH_AS(zeros({p2(62)}),
                       "zeros: shape [4611686018427387904] of f32 takes 4611686018427387904 x 4 bytes, more than int64 "
                       "can count",
                       Error);
  CHECK_THROWS_WITH_AS(ones({p2(31), p2(31)}, DType::f64),
                       "ones: shape [2147483648, 2147483648] of f64 takes 4611686018427387904 x 8 bytes, more than "
                       "int64 can count",
                       Error);
  // empty + narrow + item inside such a tensor read far past a 0-byte block.
  CHECK_THROWS_WITH_AS(empty({p2(62)}), doctest::Contains("empty: shape [4611686018427387904] of f32 takes"), Error);
  CHECK_THROWS_WITH_AS(arange(0.0, 2e18, 1.0), doctest::Contains("arange: shape [2000000000000000000] of f64 takes"),
                       Error);
  CHECK_THROWS_WITH_AS(arange(0.0, 1e300, 1.0), doctest::Contains("elements, more than int64 can count"), Error);
}

TEST_CASE("a random draw of a shape too large is refused before the generator moves on") {
  Generator gen(3);
  CHECK_THROWS_WITH_AS(randn({p2(40), p2(40)}, gen),
                       "randn: shape [1099511627776, 1099511627776] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(rand({p2(40), p2(40)}, gen), doctest::Contains("rand: shape"), Error);
  CHECK_THROWS_WITH_AS(uniform({p2(40), p2(40)}, 0.0, 1.0, gen), doctest::Contains("uniform: shape"), Error);
  CHECK(gen.state().offset == 0);
}

TEST_CASE("an allocation that cannot be met is an accel::Error naming the bytes") {
  // 2^50 bytes (1 PiB): more than any machine's memory and than the 47-bit user address space.
  CHECK_THROWS_WITH_AS(empty({p2(50)}, DType::boolean),
                       "Storage: cannot allocate 1125899906842624 bytes of host memory", Error);
  CHECK_THROWS_WITH_AS(Storage(std::numeric_limits<size_t>::max(), Device::cpu()),
                       "Storage: cannot allocate 18446744073709551615 bytes of host memory", Error);
  CHECK(zeros({4}).to_vector<float>() == std::vector<float>(4, 0.0f));  // and the allocator still works
}

TEST_CASE("views refuse shapes that overflow, and read huge stride-0 views without running off their storage") {
  const Tensor x = arange(int64_t{12}, DType::f32);
  CHECK_THROWS_WITH_AS(nograd::view(x, {p2(40), p2(40)}),
                       "view: shape [1099511627776, 1099511627776] has more elements than int64 can count", Error);
  CHECK_THROWS_WITH_AS(nograd::reshape(x, {-1, p2(40), p2(40)}),
                       "reshape: shape [-1, 1099511627776, 1099511627776] has more elements than int64 can count",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::view(zeros({0}), {0, p2(40), p2(40)}),
                       doctest::Contains("has strides that overflow int64"), Error);
  const Tensor s = scalar_tensor(3.0);
  CHECK_THROWS_WITH_AS(nograd::expand(s, {p2(40), p2(40)}),
                       "expand: shape [1099511627776, 1099511627776] has more elements than int64 can count", Error);
  // 2^62 elements that all are the one element of s: a view costs nothing, and narrow + item reads it.
  const Tensor huge = nograd::expand(s, {p2(31), p2(31)});
  CHECK(huge.numel() == p2(62));
  CHECK_THROWS_WITH_AS(huge.nbytes(),
                       "Tensor::nbytes: shape [2147483648, 2147483648] of f32 takes 4611686018427387904 x 4 bytes, "
                       "more than int64 can count",
                       Error);
  CHECK(nograd::narrow(nograd::narrow(huge, 0, p2(31) - 1, 1), 1, p2(30), 1).item() == 3.0);
  CHECK(nograd::select(nograd::select(huge, 0, -1), 0, -1).item() == 3.0);
  // Copying it would take 2^64 bytes: refused, not wrapped, by the readers as by contiguous.
  CHECK_THROWS_WITH_AS(nograd::contiguous(huge), doctest::Contains("more than int64 can count"), Error);
  CHECK_THROWS_WITH_AS(huge.to_vector<float>(), doctest::Contains("[2147483648, 2147483648]"), Error);
  CHECK_THROWS_WITH_AS(huge.item(),
                       "Tensor::item: expected a one-element tensor, got shape [2147483648, 2147483648]", Error);
  CHECK_THROWS_WITH_AS(nograd::add(nograd::expand(s, {p2(40), 1}), nograd::expand(s, {1, p2(40)})),
                       doctest::Contains("has more elements than int64 can count"), Error);
  CHECK_THROWS_WITH_AS(nograd::cat({nograd::expand(s, {p2(62)}), nograd::expand(s, {p2(62)})}, 0),
                       "cat: dim 0 of the 2 tensors adds up to more than int64 can count", Error);
  // Bounds checked without overflowing: a length past the end, a step larger than the dim.
  CHECK_THROWS_WITH_AS(nograd::narrow(x, 0, 2, std::numeric_limits<int64_t>::max()),
                       "narrow: start 2 length 9223372036854775807 out of range for dim 0 of size 12 (shape [12])",
                       Error);
  const Tensor one = nograd::slice(x, 0, 5, 12, std::numeric_limits<int64_t>::max());
  CHECK(one.shape() == Shape{1});
  CHECK(one.item() == 5.0);
  CHECK_THROWS_WITH_AS(nograd::split(x, {std::numeric_limits<int64_t>::max(), 2}, 0),
                       "split: sizes [9223372036854775807, 2] add up to more than int64 can count", Error);
}
