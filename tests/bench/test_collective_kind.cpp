// The benchmarked collectives: busbw factors, how a size becomes element counts, and size parsing.
#include <doctest/doctest.h>

#include "bench/lib/collective_bench.h"
#include "bench/lib/collective_kind.h"

using namespace accel;
using namespace accel::bench;

TEST_CASE("bus_bandwidth_factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for broadcast") {
  CHECK(bus_bandwidth_factor(CollectiveKind::all_reduce, 1) == 0.0);
  CHECK(bus_bandwidth_factor(CollectiveKind::all_reduce, 2) == 1.0);
  CHECK(bus_bandwidth_factor(CollectiveKind::all_reduce, 4) == 1.5);
  CHECK(bus_bandwidth_factor(CollectiveKind::all_reduce, 8) == 1.75);
  CHECK(bus_bandwidth_factor(CollectiveKind::all_gather, 2) == 0.5);
  CHECK(bus_bandwidth_factor(CollectiveKind::all_gather, 4) == 0.75);
  CHECK(bus_bandwidth_factor(CollectiveKind::reduce_scatter, 4) == 0.75);
  CHECK(bus_bandwidth_factor(CollectiveKind::reduce_scatter, 8) == 0.875);
  for (int n : {1, 2, 3, 4, 64}) CHECK(bus_bandwidth_factor(CollectiveKind::broadcast, n) == 1.0);
  CHECK_THROWS_WITH_AS(bus_bandwidth_factor(CollectiveKind::all_reduce, 0),
                       "bus_bandwidth_factor: 0 ranks; expected at least 1", Error);
}

TEST_CASE("names: subcommand names round-trip, and each names its raw MPI call") {
  for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                              CollectiveKind::broadcast})
    CHECK(parse_collective(collective_command(kind)) == kind);
  CHECK(std::string(mpi_call_name(CollectiveKind::reduce_scatter)) == "MPI_Reduce_scatter_block");
  CHECK_THROWS_WITH_AS(parse_collective("alltoall"),
                       "bench: unknown collective 'alltoall'; expected allreduce, allgather, reducescatter or broadcast",
                       Error);
  CHECK(reduces(CollectiveKind::all_reduce));
  CHECK(reduces(CollectiveKind::reduce_scatter));
  CHECK_FALSE(reduces(CollectiveKind::all_gather));
  CHECK_FALSE(has_out_of_place(CollectiveKind::broadcast));
}

TEST_CASE("message_shape: the size is the larger buffer, rounded down to whole parts") {
  const MessageShape ar = message_shape(CollectiveKind::all_reduce, 1000, DType::f32, 4);
  CHECK(ar.count == 250);
  CHECK(ar.part == 250);
  CHECK(ar.in_count == 250);
  CHECK(ar.out_count == 250);
  CHECK(ar.bytes == 1000);

  // 1000 B of f32 on 4 ranks: 62 elements per rank, 248 in the gathered buffer.
  const MessageShape ag = message_shape(CollectiveKind::all_gather, 1000, DType::f32, 4);
  CHECK(ag.part == 62);
  CHECK(ag.in_count == 62);
  CHECK(ag.out_count == 248);
  CHECK(ag.count == 248);
  CHECK(ag.bytes == 992);

  const MessageShape rs = message_shape(CollectiveKind::reduce_scatter, 1000, DType::f32, 4);
  CHECK(rs.part == 62);
  CHECK(rs.in_count == 248);
  CHECK(rs.out_count == 62);
  CHECK(rs.bytes == 992);

  const MessageShape bc = message_shape(CollectiveKind::broadcast, 10, DType::f64, 4);
  CHECK(bc.count == 1);
  CHECK(bc.bytes == 8);

  // 16 B of f64 cannot give 4 ranks one element each.
  CHECK(message_shape(CollectiveKind::all_gather, 16, DType::f64, 4).count == 0);
  CHECK(message_shape(CollectiveKind::all_reduce, 8, DType::f16, 1).count == 4);
}

TEST_CASE("parse_byte_size: digits with an optional binary K, M or G") {
  CHECK(parse_byte_size("8") == 8);
  CHECK(parse_byte_size("64K") == 65536);
  CHECK(parse_byte_size("1m") == 1048576);
  CHECK(parse_byte_size("256M") == 268435456);
  CHECK(parse_byte_size("2G") == 2147483648);
  const char* expected = "bench: size '12X' is not a byte count; expected a whole number with an optional K, M or G "
                         "(binary multiples), e.g. 8, 64K, 256M";
  CHECK_THROWS_WITH_AS(parse_byte_size("12X"), expected, Error);
  CHECK_THROWS_AS(parse_byte_size(""), Error);
  CHECK_THROWS_AS(parse_byte_size("-8"), Error);
  CHECK_THROWS_AS(parse_byte_size("M"), Error);
}

TEST_CASE("sweep_sizes: min, min * factor, ... up to max") {
  CHECK(sweep_sizes(8, 64, 2) == std::vector<int64_t>{8, 16, 32, 64});
  CHECK(sweep_sizes(8, 100, 3) == std::vector<int64_t>{8, 24, 72});
  CHECK(sweep_sizes(5, 5, 2) == std::vector<int64_t>{5});
  CHECK(sweep_sizes(8, int64_t{256} << 20, 2).size() == 26);  // the default sweep: 8 B .. 256 MB
  CHECK_THROWS_WITH_AS(sweep_sizes(64, 8, 2),
                       "bench: sizes from 64 to 8 by x2; expected 1 <= min <= max and a factor of at least 2", Error);
  CHECK_THROWS_AS(sweep_sizes(8, 64, 1), Error);
  CHECK_THROWS_AS(sweep_sizes(0, 64, 2), Error);
}

TEST_CASE("validate: options that cannot run are refused with the option named") {
  BenchOptions o;
  CHECK_NOTHROW(validate(o, 4));
  o.iters = 0;
  CHECK_THROWS_WITH_AS(validate(o, 4), "bench: --iters 0; expected 1 or more", Error);
  o = BenchOptions{};
  o.kind = CollectiveKind::broadcast;
  o.root = 4;
  CHECK_THROWS_WITH_AS(validate(o, 4), "bench: --root 4 out of range for 4 ranks", Error);
  o = BenchOptions{};
  o.dtypes = {DType::bf16};
  CHECK_NOTHROW(validate(o, 128));
  CHECK_THROWS_AS(validate(o, 129), Error);  // sums up to 258 are not exact in bf16
}
