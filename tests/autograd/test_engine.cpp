// The backward engine: accumulation in leaves, grad-ready hooks, no-grad scopes, freed graphs.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"

using namespace accel;

TEST_CASE("grads accumulate in leaves across uses and across backward calls") {
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor y = sum(x * x + x);  // dy/dx = 2x + 1
  backward(y);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 5, 7});
  backward(sum(x * 2.0));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7, 9});
}

TEST_CASE("grad-ready hooks fire once per backward, after the leaf's grad is complete") {
  Tensor w = from_vector<float>({1, 2}).requires_grad_();
  std::vector<std::vector<float>> seen;
  w.add_grad_ready_hook([&](Tensor& leaf) { seen.push_back(leaf.grad().to_vector<float>()); });
  backward(sum(w * 3.0 + w));  // two paths into w: the hook sees their sum
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<float>{4, 4});
  CHECK_THROWS_WITH_AS(from_vector<float>({1}).add_grad_ready_hook([](Tensor&) {}),
                       doctest::Contains("hooks go on leaves that require grad"), Error);
}

TEST_CASE("hooks run in reverse order of use, as a reducer expects") {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  std::vector<char> order;
  a.add_grad_ready_hook([&](Tensor&) { order.push_back('a'); });
  b.add_grad_ready_hook([&](Tensor&) { order.push_back('b'); });
  Tensor h = relu(a * 2.0);
  Tensor out = sum(h * b);
  backward(out);
  CHECK(order == std::vector<char>{'b', 'a'});
}

TEST_CASE("no-grad scope records nothing") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
  }
  CHECK((x * 2.0).requires_grad());
}

TEST_CASE("a second backward through a freed graph is a clear error; retain_graph allows it") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = sum(exp(x));
  backward(y);
  CHECK_THROWS_WITH_AS(backward(y), doctest::Contains("a second time"), Error);
  Tensor z = sum(exp(x));
  backward(z, Tensor(), {.retain_graph = true});
  backward(z);
  CHECK(x.grad().to_vector<float>()[0] == doctest::Approx(3 * std::exp(1.0f)));
}

TEST_CASE("backward errors") {
  CHECK_THROWS_WITH_AS(backward(ones({2})), doctest::Contains("does not require grad"), Error);
  Tensor x = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(backward(x * 2.0), doctest::Contains("a grad can only be implied for a one-element root"), Error);
  CHECK_THROWS_WITH_AS(ones({2}, DType::i64).requires_grad_(), "Tensor::requires_grad_: only floating tensors can require grad, got i64", Error);
  CHECK_THROWS_WITH_AS((x * 2.0).requires_grad_(), doctest::Contains("only leaves"), Error);
}

TEST_CASE("grads flow through dtype casts back in the leaf's dtype") {
  Tensor x = from_vector<float>({1, 2}).requires_grad_();
  Tensor y = sum(to(x, DType::f16) * 2.0);
  backward(y);
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("a grad-ready hook's handle removes it; removing twice or after the leaf is gone does nothing") {
  Tensor w = ones({2}).requires_grad_();
  int first = 0, second = 0;
  HookHandle h1 = w.add_grad_ready_hook([&](Tensor&) { ++first; });
  HookHandle h2 = w.add_grad_ready_hook([&](Tensor&) { ++second; });
  backward(sum(w * 2.0));
  CHECK(first == 1);
  CHECK(second == 1);
  CHECK(h1.active());
  h1.remove();
  CHECK_FALSE(h1.active());
  backward(sum(w * 2.0));
  CHECK(first == 1);  // removed: no longer called
  CHECK(second == 2);
  h1.remove();  // a second removal is harmless
  w = Tensor();  // the leaf, and with it the hook list, is gone
  h2.remove();
  CHECK_FALSE(h2.active());
}

TEST_CASE("a hook that removes itself while running still lets the others run, and is not called again") {
  Tensor w = ones({1}).requires_grad_();
  std::vector<int> calls;
  HookHandle self;
  self = w.add_grad_ready_hook([&](Tensor&) {
    calls.push_back(1);
    self.remove();
  });
  w.add_grad_ready_hook([&](Tensor&) { calls.push_back(2); });
  backward(sum(w));
  backward(sum(w));
  CHECK(calls == std::vector<int>{1, 2, 2});
}

TEST_CASE("backward_pass_count counts this thread's backward passes") {
  Tensor w = ones({1}).requires_grad_();
  const uint64_t before = backward_pass_count();
  backward(sum(w));
  backward(sum(w * 2.0));
  CHECK(backward_pass_count() == before + 2);
}
