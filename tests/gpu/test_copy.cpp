// GPU copies: host <-> device <-> device in every dtype pair, broadcasting, strided views, transfers
// larger than one staging chunk, and the values item() and to_vector() read back.
#include <sstream>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

// Multiples of 0.5 in [-16, 16], which every floating dtype holds exactly, and zeros for bool.
Tensor exact_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 7919) % 65) * 0.5 - 16.0;
  return from_vector(v);
}

}  // namespace

TEST_CASE("copy: host to device to host round trip in every dtype") {
  for (DType dtype : kAllDTypes) {
    for (int64_t n : {1, 7, 1000003}) {
      const Tensor host = nograd::to_dtype(random({n}, DType::f64, Device::cpu(), 1), dtype);
      const Tensor dev = nograd::to_device(host, kGpu);
      CHECK(dev.device() == kGpu);
      const Tensor back = nograd::to_device(dev, Device::cpu());
      check_close(back, host, 0.0, 0.0, fmt::format("{} n={}", dtype_name(dtype), n));
    }
  }
}

TEST_CASE("copy: device casts match the CPU's for every dtype pair") {
  const Tensor base = exact_values(1000003);
  // Also values that round: random normals, and specials that must survive a cast.
  const Tensor normal = random({4097}, DType::f64, Device::cpu(), 3);
  const Tensor specials = from_vector<double>({0.0, -0.0, 1.0, -1.0, 65504.0, 65520.0, 1e-8, 3.0e38, 1e300, -1e300,
                                               INFINITY, -INFINITY, NAN, 0.5, 1.5, 2.5, 1.0 + 1.0 / 2048.0,
                                               2147483648.0, -2147483649.0, 9.3e18, -9.3e18, -2.9});
  for (const Tensor& values : {base, normal, specials}) {
    for (DType from : kAllDTypes) {
      const Tensor src_cpu = nograd::to_dtype(values, from);
      const Tensor src_gpu = nograd::to_device(src_cpu, kGpu);
      for (DType to : kAllDTypes) {
        // Specials into integers too: kernels/float_to_int.h defines those casts on both sides.
        const Tensor want = nograd::to_dtype(src_cpu, to);
        const Tensor got = nograd::to_dtype(src_gpu, to);
        CHECK(got.device() == kGpu);
        check_close(got, want, 0.0, 0.0, fmt::format("{} -> {}, n={}", dtype_name(from), dtype_name(to), values.numel()));
      }
    }
  }
}

TEST_CASE("copy: f64 to f16 and bf16 on the device rounds once, like the CPU") {
  // Doubles just above a 16-bit tie: rounding through f32 first would land on the tie and round to even.
  const double h = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const double b = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  const Tensor src = nograd::to_device(from_vector<double>({h, b}), kGpu);
  CHECK(nograd::to_dtype(src, DType::f16).to_vector<Half>()[0].bits == 0x3c01);
  CHECK(nograd::to_dtype(src, DType::bf16).to_vector<BFloat16>()[1].bits == 0x3f81);
}

TEST_CASE("copy: broadcasting and strided views in every direction") {
  const Tensor host = random({6, 5, 4}, DType::f32, Device::cpu(), 4);
  const Tensor dev = nograd::to_device(host, kGpu);
  SUBCASE("device strided view to host") {
    const Tensor view = nograd::slice(nograd::transpose(dev, 0, 2), 1, 1, 5, 2);  // [4, 2, 6], no unit stride
    check_close(nograd::contiguous(view), nograd::contiguous(nograd::slice(nograd::transpose(host, 0, 2), 1, 1, 5, 2)), 0.0);
    check_close(nograd::to_device(view, Device::cpu()), nograd::slice(nograd::transpose(host, 0, 2), 1, 1, 5, 2), 0.0);
  }
  SUBCASE("host strided view into a device strided view") {
    Tensor dst = zeros({5, 6, 4}, DType::f32, kGpu);
    nograd::copy_(nograd::transpose(dst, 0, 1), host);  // writes [6, 5, 4] through a transposed view
    check_close(nograd::transpose(dst, 0, 1), host, 0.0);
  }
  SUBCASE("broadcast source on the host and on the device, with a cast") {
    const Tensor row = from_vector<float>({1, 2, 3, 4});
    for (const Tensor& src : {row, nograd::to_device(row, kGpu)}) {
      Tensor dst = empty({3, 4}, DType::bf16, kGpu);
      nograd::copy_(dst, src);
      check_close(dst, nograd::to_dtype(nograd::expand(row, {3, 4}), DType::bf16), 0.0);
    }
    Tensor host_dst = empty({3, 4}, DType::f64, Device::cpu());
    nograd::copy_(host_dst, nograd::to_device(row, kGpu));
    check_close(host_dst, nograd::to_dtype(nograd::expand(row, {3, 4}), DType::f64), 0.0);
  }
  SUBCASE("device to device with a cast into a slice") {
    Tensor dst = zeros({6, 10, 4}, DType::f16, kGpu);
    nograd::copy_(nograd::narrow(dst, 1, 3, 5), dev);
    check_close(nograd::narrow(dst, 1, 3, 5), nograd::to_dtype(host, DType::f16), 0.0);
    check_close(nograd::narrow(dst, 1, 0, 3), zeros({6, 3, 4}, DType::f16), 0.0);
  }
  SUBCASE("more than eight dims after coalescing") {
    Shape shape(10, 2);
    const Tensor big = random(shape, DType::f32, Device::cpu(), 5);
    std::vector<int64_t> perm{9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    const Tensor want = nograd::contiguous(nograd::permute(big, perm));
    check_close(nograd::contiguous(nograd::permute(nograd::to_device(big, kGpu), perm)), want, 0.0);
  }
}

TEST_CASE("copy: transfers larger than a staging chunk, both ways, at an odd offset") {
  const int64_t n = 5'000'001;  // 20 MB of f32: three 8 MiB chunks
  const Tensor host = random({n}, DType::f32, Device::cpu(), 6);
  const Tensor dev = nograd::to_device(host, kGpu);
  check_close(dev, host, 0.0);
  const Tensor tail = nograd::narrow(dev, 0, 3, n - 3);  // a device source not 16-byte aligned
  check_close(nograd::to_device(tail, Device::cpu()), nograd::narrow(host, 0, 3, n - 3), 0.0);
}

TEST_CASE("copy: item, to_vector and printing read device tensors") {
  const Tensor dev = nograd::to_device(from_vector<float>({1.5f, -2.0f, 3.25f}), kGpu);
  CHECK(nograd::select(dev, 0, 2).item() == 3.25);
  CHECK(dev.to_vector<float>() == std::vector<float>{1.5f, -2.0f, 3.25f});
  std::ostringstream out;
  out << dev;
  CHECK(out.str() == "Tensor(f32, cuda:0, [3]) [1.5, -2, 3.25]");
}

TEST_CASE("copy: between two GPUs" * doctest::skip(cuda::device_count() < 2)) {
  const Tensor host = random({1000, 37}, DType::f32, Device::cpu(), 7);
  const Tensor a = nograd::to_device(host, Device::cuda(0));
  const Tensor b = nograd::to_device(nograd::transpose(a, 0, 1), Device::cuda(1));
  CHECK(b.device() == Device::cuda(1));
  check_close(b, nograd::contiguous(nograd::transpose(host, 0, 1)), 0.0);
}

TEST_CASE("copy: a device that does not exist is a clear error") {
  const int n = cuda::device_count();
  const std::string msg = error_of([&] { nograd::to_device(from_vector<float>({1}), Device::cuda(n)); });
  CHECK(msg == fmt::format("device_allocate: cuda:{} is not available: {} CUDA device{} visible", n, n,
                           n == 1 ? " is" : "s are"));
}
