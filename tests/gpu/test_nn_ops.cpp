// GPU neural-network ops against the CPU path on the same inputs, forward and backward, in f32, f16,
// bf16 and f64: softmax and log-softmax over every kind of dim and each path of the row kernels
// (cached in registers, streamed, column-wise), layer norm with and without weight and bias (and its
// deterministic weight/bias grads), embedding, cross-entropy with ignore_index, every reduction, weights
// and label smoothing, dropout's mask (identical to the CPU's) and index_select. Inputs come in
// contiguous and non-contiguous layouts.
#include <limits>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

// Row ops sum in a different order than the CPU loop (a tree instead of a line) and the GPU's exp
// and log may differ from glibc's by an ulp: a few ulps of the compute type, plus rounding once to
// the stored type.
double nn_rtol(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-11;
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0;
  }
}
// For values near zero, where a relative bound means nothing (differences of nearly equal terms).
double nn_atol(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-13;
    case DType::f32: return 1e-6;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 0;
  }
}

void close(const Tensor& got, const Tensor& want, const std::string& what, double scale = 1.0) {
  check_close(got, want, nn_rtol(want.dtype()) * scale, nn_atol(want.dtype()) * scale, what);
}

Tensor gpu(const Tensor& t) { return nograd::to_device(t, kGpu); }

// A [rows, cols] input as a transposed view of a [cols, rows] tensor, on the CPU.
Tensor transposed_random(int64_t rows, int64_t cols, DType dtype, uint64_t seed) {
  return nograd::transpose(random({cols, rows}, dtype, Device::cpu(), seed), 0, 1);
}

}  // namespace

TEST_CASE("softmax: last dim, each row kernel path, every dtype, forward and backward") {
  // Row lengths: 1 and 7 stream (no whole vectors); 64 and 1000 fit a warp's registers; 4096 and
  // 8000 a block's; 20000 is past what registers hold and streams through a block.
  const std::vector<int64_t> sizes = {1, 7, 64, 1000, 4096, 8000, 20000};
  for (DType dtype : float_dtypes()) {
    for (int64_t size : sizes) {
      const int64_t rows = size >= 4096 ? 5 : 37;  // 37: not a multiple of the 8 rows of a block
      for (bool is_log : {false, true}) {
        const std::string what = fmt::format("{} {} [{}, {}]", is_log ? "log_softmax" : "softmax",
                                             dtype_name(dtype), rows, size);
        const Tensor x = nograd::mul(random({rows, size}, dtype, Device::cpu(), 10 + size), 3.0);
        const Tensor want = is_log ? nograd::log_softmax(x, -1) : nograd::softmax(x, -1);
        const Tensor got = is_log ? nograd::log_softmax(gpu(x), -1) : nograd::softmax(gpu(x), -1);
        close(got, want, what);
        const Tensor dy = random({rows, size}, dtype, Device::cpu(), 20 + size);
        const Tensor want_dx =
            is_log ? nograd::log_softmax_backward(dy, want, -1) : nograd::softmax_backward(dy, want, -1);
        const Tensor got_dx = is_log ? nograd::log_softmax_backward(gpu(dy), gpu(want), -1)
                                     : nograd::softmax_backward(gpu(dy), gpu(want), -1);
        // dy - sum(dy * y) cancels: the error scales with the row's sum, so with sqrt(size).
        close(got_dx, want_dx, what + " backward", std::sqrt(static_cast<double>(size)));
      }
    }
  }
}

TEST_CASE("softmax: inner and outer dims, non-contiguous inputs and 0-d/empty tensors") {
  for (DType dtype : float_dtypes()) {
    const Tensor x = random({3, 50, 7}, dtype, Device::cpu(), 30);
    for (int64_t dim : {0, 1, 2}) {
      const std::string what = fmt::format("softmax {} over dim {} of [3, 50, 7]", dtype_name(dtype), dim);
      close(nograd::softmax(gpu(x), dim), nograd::softmax(x, dim), what);
      close(nograd::log_softmax(gpu(x), dim), nograd::log_softmax(x, dim), "log " + what);
      const Tensor y = nograd::softmax(x, dim), dy = random({3, 50, 7}, dtype, Device::cpu(), 31);
      close(nograd::softmax_backward(gpu(dy), gpu(y), dim), nograd::softmax_backward(dy, y, dim), what + " backward");
    }
    const Tensor t = transposed_random(33, 1000, dtype, 32);
    close(nograd::softmax(gpu(t), -1), nograd::softmax(t, -1), fmt::format("transposed input {}", dtype_name(dtype)));
    const Tensor sliced = nograd::narrow(random({9, 1003}, dtype, Device::cpu(), 33), 1, 3, 1000);
    close(nograd::softmax(gpu(sliced), 1), nograd::softmax(sliced, 1), fmt::format("sliced input {}", dtype_name(dtype)));
  }
  close(nograd::softmax(gpu(full({}, 2.0, DType::f32)), 0), nograd::softmax(full({}, 2.0, DType::f32), 0), "0-d");
  CHECK(nograd::softmax(gpu(empty({0, 5}, DType::f32)), 1).shape() == Shape{0, 5});
  CHECK(nograd::softmax(gpu(empty({4, 0}, DType::f32)), 1).shape() == Shape{4, 0});
}

TEST_CASE("softmax: masked (-inf) entries, as causal attention makes them, and fully masked rows") {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t size : {8, 64, 5000}) {
    std::vector<float> v(static_cast<size_t>(4 * size));
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < size; ++j)
        v[r * size + j] = r == 3 || j > r * size / 3 ? -inf : static_cast<float>((j * 7 + r) % 11) * 0.5f;
    const Tensor x = from_vector(v, {4, size});
    for (DType dtype : {DType::f32, DType::bf16}) {
      const Tensor xd = nograd::to_dtype(x, dtype);
      // Row 3 is all -inf: NaN on both devices, as exp(-inf - -inf) is.
      close(nograd::softmax(gpu(xd), 1), nograd::softmax(xd, 1), fmt::format("masked {} size {}", dtype_name(dtype), size));
      close(nograd::log_softmax(gpu(xd), 1), nograd::log_softmax(xd, 1), fmt::format("masked log {}", size));
    }
  }
}

TEST_CASE("layer_norm: forward and backward, each row kernel path, with and without affine") {
  // 64 and 1000 fit a warp's registers, 5000 a block's (the backward streams it), 20000 streams;
  // 3 and 100 (for halves) have no whole 16-byte vectors.
  for (DType dtype : float_dtypes()) {
    for (int64_t dim : {1, 3, 64, 100, 1000, 5000, 20000}) {
      const int64_t rows = dim >= 5000 ? 6 : 67;
      for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
        const std::string what = fmt::format("layer_norm {} [{}, {}] affine {}", dtype_name(dtype), rows, dim, affine);
        const Tensor x = nograd::add(nograd::mul(random({rows, dim}, dtype, Device::cpu(), 40 + dim), 2.0), 0.5);
        const Tensor w = affine >= 1 ? random({dim}, dtype, Device::cpu(), 41) : Tensor();
        const Tensor b = affine >= 2 ? random({dim}, dtype, Device::cpu(), 42) : Tensor();
        const auto want = nograd::layer_norm(x, w, b, 1e-5);
        const auto got = nograd::layer_norm(gpu(x), w.defined() ? gpu(w) : w, b.defined() ? gpu(b) : b, 1e-5);
        close(got.out, want.out, what);
        close(got.mean, want.mean, what + " mean");
        close(got.rstd, want.rstd, what + " rstd");
        const Tensor dy = random({rows, dim}, dtype, Device::cpu(), 43 + dim);
        const auto want_g = nograd::layer_norm_backward(dy, x, want.mean, want.rstd, w, b);
        const auto got_g = nograd::layer_norm_backward(gpu(dy), gpu(x), gpu(want.mean), gpu(want.rstd),
                                                    w.defined() ? gpu(w) : w, b.defined() ? gpu(b) : b);
        close(got_g.grad_input, want_g.grad_input, what + " grad_input", std::sqrt(static_cast<double>(dim)));
        // Column sums over rows: the error grows with the number of rows summed.
        if (w.defined())
          close(got_g.grad_weight, want_g.grad_weight, what + " grad_weight", std::sqrt(static_cast<double>(rows)));
        if (b.defined())
          close(got_g.grad_bias, want_g.grad_bias, what + " grad_bias", std::sqrt(static_cast<double>(rows)));
      }
    }
  }
}

TEST_CASE("layer_norm: 3-d and non-contiguous inputs; the weight and bias grads are deterministic") {
  const Tensor x = random({4, 2500, 96}, DType::f32, Device::cpu(), 50);
  const Tensor w = random({96}, DType::f32, Device::cpu(), 51), b = random({96}, DType::f32, Device::cpu(), 52);
  const Tensor dy = random({4, 2500, 96}, DType::f32, Device::cpu(), 53);
  const auto want = nograd::layer_norm(x, w, b, 1e-5);
  const auto got = nograd::layer_norm(gpu(x), gpu(w), gpu(b), 1e-5);
  close(got.out, want.out, "3-d");
  const auto g1 = nograd::layer_norm_backward(gpu(dy), gpu(x), got.mean, got.rstd, gpu(w), gpu(b));
  const auto g2 = nograd::layer_norm_backward(gpu(dy), gpu(x), got.mean, got.rstd, gpu(w), gpu(b));
  CHECK(g1.grad_weight.to_vector<float>() == g2.grad_weight.to_vector<float>());
  CHECK(g1.grad_bias.to_vector<float>() == g2.grad_bias.to_vector<float>());
  CHECK(g1.grad_input.to_vector<float>() == g2.grad_input.to_vector<float>());
  const auto want_g = nograd::layer_norm_backward(dy, x, want.mean, want.rstd, w, b);
  close(g1.grad_weight, want_g.grad_weight, "grad_weight over 10000 rows", 100.0);
  close(g1.grad_bias, want_g.grad_bias, "grad_bias over 10000 rows", 100.0);
  const Tensor t = transposed_random(40, 256, DType::bf16, 54);
  close(nograd::layer_norm(gpu(t), Tensor(), Tensor(), 1e-5).out, nograd::layer_norm(t, Tensor(), Tensor(), 1e-5).out,
        "transposed bf16");
}

TEST_CASE("embedding: gathers rows and sums repeated positions in the CPU's order") {
  for (DType dtype : float_dtypes()) {
    for (int64_t dim : {1, 33, 64}) {  // 33: rows of 4 * 33 bytes (f32) are not 16-byte multiples
      const Tensor weight = random({50, dim}, dtype, Device::cpu(), 60 + dim);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < 28; ++i) idx.push_back((i * i * 7 + 3) % 50 % (i % 3 == 0 ? 5 : 50));  // repeats
      for (DType index_dtype : {DType::i64, DType::i32}) {
        const Tensor indices = nograd::to_dtype(from_vector(idx, {4, 7}), index_dtype);
        const std::string what = fmt::format("embedding {} dim {} {}", dtype_name(dtype), dim, dtype_name(index_dtype));
        const Tensor want = nograd::embedding(weight, indices);
        const Tensor got = nograd::embedding(gpu(weight), gpu(indices));
        check_close(got, want, 0.0, 0.0, what);  // a copy: exact
        const Tensor dy = random({4, 7, dim}, dtype, Device::cpu(), 70 + dim);
        // Each row sums its positions in increasing order on both devices: the same additions, so
        // the same bits.
        check_close(nograd::embedding_backward(gpu(dy), gpu(indices), 50), nograd::embedding_backward(dy, indices, 50), 0.0,
                    0.0, what + " backward");
        check_close(nograd::embedding_backward(gpu(dy), gpu(indices), 50, -47),
                    nograd::embedding_backward(dy, indices, 50, -47), 0.0, 0.0, what + " backward, padding_idx 3");
      }
    }
  }
  const Tensor w = random({10, 4}, DType::f32, Device::cpu(), 80);
  const Tensor bad = from_vector<int64_t>({1, 10, 2});
  CHECK(error_of([&] { nograd::embedding(gpu(w), gpu(bad)); }) == error_of([&] { nograd::embedding(w, bad); }));
  CHECK(error_of([&] { nograd::embedding(gpu(w), gpu(bad)); }) ==
        "embedding: indices[1] = 10 is out of range for 10 rows (weight [10, 4])");
  CHECK(error_of([&] { nograd::embedding_backward(gpu(w), gpu(from_vector<int64_t>({0, 1, -1, 2, 3, 4, 5, 6, 7, 8})), 3); })
            .find("embedding_backward: indices[2] = -1 is out of range") == 0);
  const Tensor g0 = nograd::embedding_backward(gpu(empty({0, 4}, DType::f32)), gpu(empty({0}, DType::i64)), 3);
  CHECK(g0.to_vector<float>() == std::vector<float>(12, 0.0f));
}

TEST_CASE("cross_entropy: every reduction, ignore_index, short and very long rows, forward and backward") {
  for (DType dtype : float_dtypes()) {
    for (int64_t classes : {1, 3, 10, 1000, 5003, 50257}) {
      const int64_t rows = classes >= 5000 ? 7 : 61;
      const Tensor logits = nograd::mul(random({rows, classes}, dtype, Device::cpu(), 90 + classes), 2.0);
      std::vector<int64_t> t;
      for (int64_t n = 0; n < rows; ++n) t.push_back(n % 5 == 2 ? -100 : (n * 37 + 11) % classes);
      for (DType index_dtype : {DType::i64, DType::i32}) {
        const Tensor target = nograd::to_dtype(from_vector(t), index_dtype);
        for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
          const std::string what = fmt::format("cross_entropy {} [{}, {}] {} reduction {}", dtype_name(dtype), rows,
                                               classes, dtype_name(index_dtype), static_cast<int>(reduction));
          const Tensor want = nograd::cross_entropy(logits, target, -100, reduction);
          const Tensor got = nograd::cross_entropy(gpu(logits), gpu(target), -100, reduction);
          // The loss is f32 (f64 for f64) whatever the logits' dtype: compare at the compute type.
          check_close(got, want, nn_rtol(want.dtype()) * std::sqrt(static_cast<double>(classes)), 1e-5, what);
          const Tensor grad_loss = reduction == Reduction::none
                                       ? random({rows}, want.dtype(), Device::cpu(), 95)
                                       : full({}, 0.75, want.dtype());
          const Tensor want_dx = nograd::cross_entropy_backward(grad_loss, logits, target, -100, reduction);
          const Tensor got_dx = nograd::cross_entropy_backward(gpu(grad_loss), gpu(logits), gpu(target), -100, reduction);
          close(got_dx, want_dx, what + " backward");
        }
      }
    }
  }
}

TEST_CASE("cross_entropy with weight and label_smoothing: the GPU's composition of raw ops equals the CPU's loop") {
  for (DType dtype : float_dtypes()) {
    for (int64_t classes : {3, 1000, 50257}) {
      const int64_t rows = classes >= 5000 ? 7 : 61;
      const Tensor logits = nograd::mul(random({rows, classes}, dtype, Device::cpu(), 110 + classes), 2.0);
      std::vector<int64_t> t;
      for (int64_t n = 0; n < rows; ++n) t.push_back(n % 5 == 2 ? 1 : (n * 37 + 11) % classes);
      const Tensor target = from_vector(t);
      const Tensor weight = random_uniform({classes}, 0.25, 2.0, DType::f32, Device::cpu(), 120);
      for (Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
        for (double eps : {0.0, 0.1}) {
          const std::string what = fmt::format("cross_entropy {} [{}, {}] reduction {} label_smoothing {}",
                                               dtype_name(dtype), rows, classes, static_cast<int>(reduction), eps);
          const CrossEntropyOptions cpu_options{.weight = weight, .ignore_index = 1, .reduction = reduction,
                                                .label_smoothing = eps};
          CrossEntropyOptions gpu_options = cpu_options;
          gpu_options.weight = gpu(weight);
          const Tensor want = nograd::cross_entropy(logits, target, cpu_options);
          const Tensor got = nograd::cross_entropy(gpu(logits), gpu(target), gpu_options);
          CHECK(got.device() == kGpu);
          check_close(got, want, nn_rtol(want.dtype()) * std::sqrt(static_cast<double>(classes)), 1e-5, what);
          const Tensor grad_loss = reduction == Reduction::none ? random({rows}, want.dtype(), Device::cpu(), 96)
                                                                : full({}, 0.75, want.dtype());
          close(nograd::cross_entropy_backward(gpu(grad_loss), gpu(logits), gpu(target), gpu_options),
                nograd::cross_entropy_backward(grad_loss, logits, target, cpu_options), what + " backward");
        }
      }
    }
  }
  const Tensor logits = random({4, 6}, DType::f32, Device::cpu(), 101);
  const CrossEntropyOptions smoothed{.label_smoothing = 0.2};
  const Tensor ignored = gpu(from_vector<int64_t>({-100, -100, -100, -100}));
  CHECK(nograd::cross_entropy(gpu(logits), ignored, smoothed).item() == 0.0);
  CHECK(error_of([&] { nograd::cross_entropy(gpu(logits), gpu(from_vector<int64_t>({0, 6, 1, 2})), smoothed); }) ==
        "cross_entropy: target[1] = 6 is out of range for 6 classes (ignore_index is -100)");
  const Tensor target = gpu(from_vector<int64_t>({0, 1, 1, 2}));
  CHECK(error_of([&] { nograd::cross_entropy(gpu(logits), target, {.weight = ones({6})}); }) ==
        "cross_entropy: weight is on cpu but logits is on cuda:0");
}

TEST_CASE("cross_entropy: all rows ignored means 0, and bad targets fail as on the CPU") {
  const Tensor logits = random({4, 6}, DType::f32, Device::cpu(), 100);
  const Tensor ignored = from_vector<int64_t>({-1, -1, -1, -1});
  CHECK(nograd::cross_entropy(gpu(logits), gpu(ignored), -1, Reduction::mean).item() == 0.0);
  CHECK(nograd::cross_entropy(gpu(logits), gpu(ignored), -1, Reduction::sum).item() == 0.0);
  const Tensor dx = nograd::cross_entropy_backward(gpu(full({}, 1.0, DType::f32)), gpu(logits), gpu(ignored), -1,
                                                Reduction::mean);
  CHECK(dx.to_vector<float>() == std::vector<float>(24, 0.0f));
  const Tensor bad = from_vector<int32_t>({0, 6, 1, 2});
  const std::string message = error_of([&] { nograd::cross_entropy(logits, bad); });
  CHECK(message == "cross_entropy: target[1] = 6 is out of range for 6 classes (ignore_index is -100)");
  CHECK(error_of([&] { nograd::cross_entropy(gpu(logits), gpu(bad)); }) == message);
  CHECK(error_of([&] { nograd::cross_entropy_backward(gpu(full({}, 1.0, DType::f32)), gpu(logits), gpu(bad)); }) ==
        "cross_entropy_backward: target[1] = 6 is out of range for 6 classes (ignore_index is -100)");
  const Tensor none = nograd::cross_entropy(gpu(empty({0, 6}, DType::f32)), gpu(empty({0}, DType::i64)), -100,
                                         Reduction::mean);
  CHECK(none.item() == 0.0);
}

TEST_CASE("dropout: the GPU draws the CPU's mask and scales the same way") {
  for (DType dtype : float_dtypes()) {
    for (double p : {0.1, 0.5, 0.9, 1.0}) {
      // 37001 elements: not a multiple of the 4 elements one Philox block decides.
      const Tensor x = random({1000, 37}, dtype, Device::cpu(), 110);
      const Tensor xt = nograd::transpose(random({37, 1001}, dtype, Device::cpu(), 111), 0, 1);  // non-contiguous
      for (const Tensor& input : {x, xt}) {
        Generator cpu_gen(7), gpu_gen(7);
        cpu_gen.reserve(5);  // a stream that has moved on
        gpu_gen.reserve(5);
        const auto want = nograd::dropout(input, p, cpu_gen);
        const auto got = nograd::dropout(gpu(input), p, gpu_gen);
        const std::string what = fmt::format("dropout {} p {}", dtype_name(dtype), p);
        CHECK_MESSAGE(nograd::to_device(got.keep_mask, Device::cpu()).to_vector<bool>() == want.keep_mask.to_vector<bool>(),
                      what);
        check_close(got.out, want.out, 0.0, 0.0, what);  // x * scale in the same compute type: exact
        CHECK(gpu_gen.state() == cpu_gen.state());
      }
    }
  }
}

TEST_CASE("index_select: on device tensors along every dim, with CPU or device indices") {
  const Tensor t = random({7, 5, 3}, DType::f32, Device::cpu(), 120);
  const Tensor idx = from_vector<int64_t>({4, 0, 4, 2});
  for (int64_t dim : {0, 1, 2}) {
    const Tensor i = dim == 2 ? from_vector<int64_t>({2, 0, 2}) : idx;
    for (DType index_dtype : {DType::i64, DType::i32}) {
      const Tensor id = nograd::to_dtype(i, index_dtype);
      const Tensor want = nograd::index_select(t, dim, id);
      check_close(nograd::index_select(gpu(t), dim, id), want, 0.0, 0.0, fmt::format("dim {} CPU index", dim));
      check_close(nograd::index_select(gpu(t), dim, gpu(id)), want, 0.0, 0.0, fmt::format("dim {} device index", dim));
    }
  }
  for (DType dtype : {DType::bf16, DType::boolean, DType::i64}) {
    const Tensor s = nograd::transpose(nograd::to_dtype(random({9, 6}, DType::f32, Device::cpu(), 121), dtype), 0, 1);
    check_close(nograd::to_dtype(nograd::index_select(gpu(s), 0, idx), DType::f64),
                nograd::to_dtype(nograd::index_select(s, 0, idx), DType::f64), 0.0, 0.0,
                fmt::format("transposed {}", dtype_name(dtype)));
  }
  CHECK(error_of([&] { nograd::index_select(gpu(t), 1, from_vector<int64_t>({0, 5})); }) ==
        "index_select: index 5 out of range for dim 1 of size 5");
}
