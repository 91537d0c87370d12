// The bucketed reducer: bucket assignment (reverse order, cap, small first bucket), the event log
// (all-reduces start while backward runs, in the same order on every rank), averaging, parameters
// without grads, and prepare()'s broadcast from rank 0.
#include <algorithm>
#include <cmath>

#include "support.h"

namespace test {

namespace {

// Linear(16, 64), Linear(64, 64), Linear(64, 8): parameters of 4096, 256, 16384, 256, 2048 and 32 bytes.
std::shared_ptr<nn::Sequential> three_layers(uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(16, 64, true, gen));
  model->push_back(std::make_shared<nn::Tanh>());
  model->push_back(std::make_shared<nn::Linear>(64, 64, true, gen));
  model->push_back(std::make_shared<nn::Tanh>());
  model->push_back(std::make_shared<nn::Linear>(64, 8, true, gen));
  return model;
}

std::shared_ptr<Communicator> own_comm() { return std::shared_ptr<Communicator>(world()->dup()); }

int64_t position(const std::vector<ReducerEvent>& events, ReducerEvent wanted) {
  auto it = std::find(events.begin(), events.end(), wanted);
  return it == events.end() ? -1 : static_cast<int64_t>(it - events.begin());
}

std::vector<int64_t> launches(const std::vector<ReducerEvent>& events) {
  std::vector<int64_t> out;
  for (const ReducerEvent& e : events)
    if (e.kind == ReducerEvent::Kind::bucket_launched) out.push_back(e.index);
  return out;
}

// Three parameters of 3 elements, each used only when the test says so.
struct ThreeParams : nn::Module {
  Tensor a, b, c;
  ThreeParams() {
    a = register_parameter("a", zeros({3}));
    b = register_parameter("b", zeros({3}));
    c = register_parameter("c", zeros({3}));
  }
};

// A parameter and a buffer drawn from seed.
struct WithBuffer : nn::Module {
  explicit WithBuffer(uint64_t seed) {
    Generator gen(seed);
    register_parameter("w", randn({5}, gen));
    register_buffer("stats", randn({3}, gen));
  }
};

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (float v : t.to_vector<float>()) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("buckets: reverse parameter order, closed at the cap, with a small first bucket") {
  auto model = three_layers(1);
  auto reducer = Reducer::attach(model->named_parameters(), own_comm(), {.bucket_cap_bytes = 8192,
                                                                         .first_bucket_cap_bytes = 1024});
  // Reverse order: b3 (32) fills the first bucket, as w3 (2048) would pass its 1024; w3 + b2 (2304)
  // stay under 8192 until w2 (16384), which is larger than any cap and gets a bucket of its own;
  // then b1 + w1 (4352).
  const std::vector<Reducer::Bucket>& buckets = reducer->buckets();
  REQUIRE(buckets.size() == 4);
  CHECK(buckets[0].params == std::vector<size_t>{5});
  CHECK(buckets[1].params == std::vector<size_t>{4, 3});
  CHECK(buckets[2].params == std::vector<size_t>{2});
  CHECK(buckets[3].params == std::vector<size_t>{1, 0});
  CHECK(buckets[0].cap_bytes == 1024);
  for (size_t i = 1; i < buckets.size(); ++i) CHECK(buckets[i].cap_bytes == 8192);
  CHECK(buckets[1].bytes == 2304);
  CHECK(buckets[3].bytes == 4352);
  // The general rules: several parameters never exceed the cap, and a bucket closed only because
  // the next parameter did not fit.
  const std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].params.size() > 1) CHECK(buckets[i].bytes <= buckets[i].cap_bytes);
    if (i + 1 < buckets.size())
      CHECK(buckets[i].bytes + static_cast<int64_t>(params[buckets[i + 1].params[0]].nbytes()) > buckets[i].cap_bytes);
  }

  // The defaults (25 MiB, first 1 MiB) put this small model in one bucket.
  auto defaults = Reducer::attach(model->named_parameters(), own_comm());
  REQUIRE(defaults->buckets().size() == 1);
  CHECK(defaults->buckets()[0].cap_bytes == 1 << 20);
  CHECK(defaults->buckets()[0].params == std::vector<size_t>{5, 4, 3, 2, 1, 0});
}

TEST_CASE("the first all-reduce starts before backward ends, and buckets launch in the same order on every rank") {
  auto model = three_layers(1);
  auto reducer = Reducer::attach(model->named_parameters(), own_comm(), {.bucket_cap_bytes = 8192,
                                                                         .first_bucket_cap_bytes = 1024});
  Generator gen(100 + static_cast<uint64_t>(world()->rank()));
  for (int step = 0; step < 3; ++step) {
    model->zero_grad();
    const Tensor loss = nn::mse_loss((*model)(randn({4, 16}, gen)), zeros({4, 8}));
    reducer->prepare_for_backward(true);
    backward(loss);
    reducer->finalize();
    const std::vector<ReducerEvent>& events = reducer->events();
    std::string log;
    for (const ReducerEvent& e : events) log += reducer->describe(e) + "; ";
    INFO("rank ", world()->rank(), " step ", step, ": ", log);
    const int64_t first_launch = position(events, {ReducerEvent::Kind::bucket_launched, 0});
    const int64_t done = position(events, {ReducerEvent::Kind::backward_done, -1});
    // The first layer's weight (parameter 0) is the last grad backward computes.
    const int64_t last_grad = position(events, {ReducerEvent::Kind::grad_ready, 0});
    REQUIRE(first_launch >= 0);
    CHECK(first_launch < done);
    CHECK(first_launch < last_grad);
    // Every bucket was launched while backward still ran, in bucket order.
    CHECK(launches(events) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(position(events, {ReducerEvent::Kind::bucket_launched, 3}) < done);
    std::vector<double> order;
    for (int64_t i : launches(events)) order.push_back(static_cast<double>(i));
    CHECK(differs_across_ranks(order) == "");
  }
  CHECK(reducer->describe({ReducerEvent::Kind::grad_ready, 0}) == "grad ready 0.weight");
  CHECK(reducer->describe({ReducerEvent::Kind::bucket_launched, 2}) == "bucket 2 launched");
  CHECK(reducer->describe({ReducerEvent::Kind::backward_done, -1}) == "backward done");
}

TEST_CASE("the reducer averages grads; a parameter used on some ranks counts as zero elsewhere") {
  const int n = world()->size(), rank = world()->rank();
  auto model = std::make_shared<ThreeParams>();
  auto reducer = Reducer::attach(model->named_parameters(), own_comm());
  // Rank r: loss = sum(a * (r + 1)) [+ sum(b * 10) on rank 0 only]; c is used by nobody.
  const double r1 = rank + 1;
  Tensor loss = sum(model->a * r1);
  if (rank == 0) loss = loss + sum(model->b * 10.0);
  reducer->prepare_for_backward(true);
  backward(loss);
  reducer->finalize();
  const double mean_r1 = (n + 1) / 2.0;
  CHECK(values(model->a.grad()) == std::vector<double>(3, mean_r1));
  REQUIRE(model->b.grad().defined());
  CHECK(values(model->b.grad()) == std::vector<double>(3, static_cast<float>(10.0 / n)));
  CHECK_FALSE(model->c.grad().defined());  // no rank had a grad: it stays undefined, as in one process

  // A grad accumulated by an earlier micro-batch (no sync) counts even if the syncing backward
  // does not reach that parameter.
  model->zero_grad();
  reducer->prepare_for_backward(false);
  backward(sum(model->b * r1));
  reducer->finalize();
  // Without sync the grads stay local, and the parameters backward did not reach have none.
  CHECK(values(model->b.grad()) == std::vector<double>(3, r1));
  CHECK_FALSE(model->a.grad().defined());
  CHECK_FALSE(model->c.grad().defined());
  reducer->prepare_for_backward(true);
  backward(sum(model->a * 2.0));
  reducer->finalize();
  CHECK(values(model->a.grad()) == std::vector<double>(3, 2.0));
  CHECK(values(model->b.grad()) == std::vector<double>(3, mean_r1));
  CHECK_FALSE(model->c.grad().defined());
}

TEST_CASE("prepare broadcasts rank 0's parameters and buffers to differently initialised ranks") {
  Accelerator accelerator(options());
  auto model = std::make_shared<WithBuffer>(100 + static_cast<uint64_t>(accelerator.process_index()));
  auto prepared = accelerator.prepare(model);
  const WithBuffer rank0(100);
  const nn::StateDict mine = prepared->state_dict(), expected = rank0.state_dict();
  REQUIRE(mine.size() == 2);
  for (size_t i = 0; i < mine.size(); ++i) {
    INFO("rank ", accelerator.process_index(), ": ", mine[i].first);
    CHECK(values(mine[i].second) == values(expected[i].second));
    CHECK(differs_across_ranks(values(mine[i].second)) == "");
  }
  CHECK(error_of([&] { accelerator.prepare(model); }) ==
        (accelerator.num_processes() > 1 ? "Accelerator::prepare: this model was prepared already" : "no error"));
}

TEST_CASE("the Accelerator's reducer: buckets from bucket_cap_mb, events from accelerator.backward") {
  AcceleratorOptions o = options();
  o.bucket_cap_mb = 8192.0 / (1 << 20);
  Accelerator accelerator(o);
  auto model = three_layers(1);
  auto net = accelerator.prepare(model);
  const Reducer* reducer = accelerator.reducer(*net);
  if (accelerator.num_processes() == 1) {
    CHECK(reducer == nullptr);  // one process: nothing to reduce
    return;
  }
  REQUIRE(reducer != nullptr);
  // The first bucket is capped at min(1 MiB, bucket_cap_mb).
  for (const Reducer::Bucket& b : reducer->buckets()) CHECK(b.cap_bytes == 8192);
  Generator gen(7 + static_cast<uint64_t>(accelerator.process_index()));
  accelerator.backward(nn::mse_loss((*net)(randn({4, 16}, gen)), zeros({4, 8})));
  const std::vector<ReducerEvent>& events = reducer->events();
  CHECK(position(events, {ReducerEvent::Kind::bucket_launched, 0}) <
        position(events, {ReducerEvent::Kind::backward_done, -1}));
  CHECK(differs_across_ranks(values(net->parameters()[0].grad())) == "");
  {
    auto scope = accelerator.no_sync();
    accelerator.backward(nn::mse_loss((*net)(randn({4, 16}, gen)), zeros({4, 8})));
    CHECK(launches(reducer->events()).empty());
  }
}

}  // namespace test
