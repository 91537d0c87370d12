// LR schedules at their key steps, and the scheduler that drives an optimizer's lr.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "accel.h"

using namespace accel;
using namespace accel::optim;

TEST_CASE("constant and linear warmup") {
  CHECK(constant_lr(0.3, 0) == 0.3);
  CHECK(constant_lr(0.3, 1000) == 0.3);
  CHECK(linear_warmup_lr(1.0, 4, 0) == 0.25);
  CHECK(linear_warmup_lr(1.0, 4, 1) == 0.5);
  CHECK(linear_warmup_lr(1.0, 4, 3) == 1.0);
  CHECK(linear_warmup_lr(1.0, 4, 50) == 1.0);
  CHECK(linear_warmup_lr(1.0, 0, 0) == 1.0);
  CHECK_THROWS_WITH_AS(linear_warmup_lr(1.0, -1, 0), "linear_warmup_lr: warmup_steps must be >= 0, got -1", Error);
}

TEST_CASE("cosine: warmup, then half a cosine from the peak to min_lr, then min_lr") {
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 0) == 0.5);
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 1) == 1.0);
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 2) == 1.0);
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 4) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(0.2 * std::numbers::pi))));
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 7) == doctest::Approx(0.55));
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 12) == 0.1);
  CHECK(cosine_lr(1.0, 0.1, 2, 12, 100) == 0.1);
  for (int s = 2; s < 12; ++s) CHECK(cosine_lr(1.0, 0.1, 2, 12, s + 1) < cosine_lr(1.0, 0.1, 2, 12, s));
  CHECK_THROWS_WITH_AS(cosine_lr(1.0, 0.1, 5, 5, 0), "cosine_lr: total_steps 5 must exceed warmup_steps 5", Error);
  CHECK_THROWS_WITH_AS(cosine_lr(1.0, 2.0, 0, 5, 0), "cosine_lr: min_lr 2 must be in [0, base_lr 1]", Error);
}

TEST_CASE("a scheduler sets the optimizer's lr for each coming step, and resumes from its step count") {
  Tensor p = from_vector<float>({1.0f}).requires_grad_();
  SGD sgd({p}, {.lr = 0.4});
  LRScheduler sched = LRScheduler::cosine(sgd, 2, 10, 0.04);
  CHECK(sgd.lr() == doctest::Approx(0.2));  // lr(0), before the first update
  for (int s = 0; s < 5; ++s) sched.step();
  CHECK(sched.step_count() == 5);
  CHECK(sgd.lr() == doctest::Approx(cosine_lr(0.4, 0.04, 2, 10, 5)));
  const StateDict state = sched.state_dict();
  CHECK(state[0].first == "step");
  CHECK(state[0].second.item() == 5);

  SGD other({p}, {.lr = 0.4});
  LRScheduler resumed = LRScheduler::cosine(other, 2, 10, 0.04);
  resumed.load_state_dict(state);
  CHECK(resumed.step_count() == 5);
  CHECK(other.lr() == sgd.lr());
  sched.step();
  resumed.step();
  CHECK(other.lr() == sgd.lr());
  CHECK_THROWS_WITH_AS(resumed.load_state_dict({{"steps", scalar_tensor(1, DType::i64)}}),
                       "LRScheduler::load_state_dict: expected exactly one 0-d entry \"step\", got 1 entries starting "
                       "with \"steps\"",
                       Error);

  SGD third({p}, {.lr = 0.8});
  LRScheduler warm = LRScheduler::linear_warmup(third, 4);
  CHECK(third.lr() == doctest::Approx(0.2));
  warm.step();
  warm.step();
  CHECK(third.lr() == doctest::Approx(0.6));
  warm.step();
  CHECK(third.lr() == doctest::Approx(0.8));
  third.set_lr(0.3);
  LRScheduler flat = LRScheduler::constant(third);
  flat.step();
  CHECK(third.lr() == 0.3);
}
