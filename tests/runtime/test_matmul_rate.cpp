// The matmul rate a trainer's MFU is a fraction of: measured on the CPU (what it says it measured),
// its argument checks. No speed is asserted: that is a benchmark's job, not a test's.
#include <doctest/doctest.h>

#include "accel.h"

using namespace accel;

TEST_CASE("measure_matmul_rate times a square matmul and says so; the CPU's reference rate is measured") {
  const MatmulRate rate = measure_matmul_rate(Device::cpu(), DType::f32, 96, 3);
  CHECK(rate.gflops > 0);
  CHECK(rate.source == "measured: 96^3 f32 matmul on cpu, median of 3");
  CHECK(reference_matmul_rate(Device::cpu()).source.rfind("measured: 1024^3 f32 matmul on cpu", 0) == 0);
  CHECK_THROWS_WITH_AS(measure_matmul_rate(Device::cpu(), DType::f32, 0, 3),
                       "measure_matmul_rate: n 0 and iters 3, expected both >= 1", Error);
}
