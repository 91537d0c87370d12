// The options of the raw nn ops that real models use: embedding's padding_idx, and cross_entropy's
// per-class weight and label smoothing, against PyTorch's numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/nn_ops.h"

using namespace accel;
using Vec = std::vector<double>;

namespace {

Vec values(const Tensor& t) { return nograd::to_dtype(t, DType::f64).to_vector<double>(); }

[[maybe_unused]] void check_near(const Vec& got, const Vec& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])),
                  "element " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

TEST_CASE("embedding_backward with padding_idx: that row's grad is 0, counted from the end when negative") {
  // F.embedding(idx, w, padding_idx=-1).backward(arange(12).reshape(2, 3, 2)) with w [4, 2]
  // (PyTorch 2.x): the rows of w.grad are [6, 7], [4, 6], [10, 11], [0, 0].
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 0, 3, 2}, {2, 3});
  const Tensor grad = nograd::to_dtype(reshape(arange(12), {2, 3, 2}), DType::f64);
  const Vec torch_grad{6, 7, 4, 6, 10, 11, 0, 0};
  CHECK(values(nograd::embedding_backward(grad, idx, 4, -1)) == torch_grad);
  CHECK(values(nograd::embedding_backward(grad, idx, 4, 3)) == torch_grad);
  CHECK(values(nograd::embedding_backward(grad, idx, 4)) == Vec{6, 7, 4, 6, 10, 11, 10, 12});
  // A padding row nobody indexes: nothing changes; i32 indices and f32 grads work the same way.
  CHECK(values(nograd::embedding_backward(grad, nograd::to_dtype(idx, DType::i32), 5, 4)) ==
        Vec{6, 7, 4, 6, 10, 11, 10, 12, 0, 0});
  CHECK(values(nograd::embedding_backward(nograd::to_dtype(grad, DType::f32), idx, 4, 1)) ==
        Vec{6, 7, 0, 0, 10, 11, 10, 12});
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(grad, idx, 4, 4),
                       "embedding_backward: padding_idx 4 is out of range for 4 rows (expected -4..3)", Error);
  CHECK_THROWS_WITH_AS(nograd::embedding_backward(grad, idx, 4, -5),
                       "embedding_backward: padding_idx -5 is out of range for 4 rows (expected -4..3)", Error);
  CHECK(nograd::normalize_padding_idx("embedding", -4, 4) == 0);
}
