// SGD and AdamW against PyTorch's update rules written out here in f64, their state dicts, and a
// tiny end-to-end fit.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"

using namespace accel;
using namespace accel::optim;

namespace {

using Vec = std::vector<double>;

// Grads for step s of a 3-element parameter: varied in sign and size so every term matters.
Vec grad_at(int s) { return {0.5 - s, 0.25 * s * s, std::sin(1.0 + s)}; }

Vec values(const Tensor& t) { return contiguous(to(t, DType::f64)).to_vector<double>(); }

void check_close(const Vec& got, const Vec& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])),
                  "element " << i << ": " << got[i] << " vs " << want[i]);
}

// PyTorch's SGD for one parameter.
struct SgdReference {
  SGDOptions o;
  Vec p, buf;
  void step(const Vec& grad) {
    const bool first = buf.empty();
    if (first) buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = first ? g : o.momentum * buf[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
  }
};

// PyTorch's AdamW for one parameter, with its own step count.
struct AdamWReference {
  AdamWOptions o;
  Vec p, m, v;
  int t = 0;
  void step(const Vec& g) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - o.lr * o.weight_decay;
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      p[i] -= o.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
    }
  }
};

Tensor param(const Vec& v) { return from_vector<double>(v).requires_grad_(); }

std::vector<std::string> keys(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& entry : state) out.push_back(entry.first);
  return out;
}

StateDict snapshot(const StateDict& state) {
  StateDict out;
  for (const auto& [name, t] : state) out.emplace_back(name, clone(t));
  return out;
}

}  // namespace

TEST_CASE("SGD matches PyTorch's rule over several steps: plain, momentum, dampening, nesterov, weight decay") {
  const Vec start{1.0, -2.0, 0.5};
  for (const SGDOptions& o : {SGDOptions{.lr = 0.1}, SGDOptions{.lr = 0.1, .momentum = 0.9},
                              SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3},
                              SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true},
                              SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true},
                              SGDOptions{.lr = 0.2, .weight_decay = 0.5}}) {
    CAPTURE(o.momentum);
    CAPTURE(o.nesterov);
    Tensor p = param(start);
    SGD sgd({p}, o);
    SgdReference ref{o, start, {}};
    for (int s = 0; s < 4; ++s) {
      p.set_grad(from_vector<double>(grad_at(s)));
      sgd.step();
      ref.step(grad_at(s));
      check_close(values(p), ref.p);
    }
  }
  // One step of momentum by hand: the first buffer is the grad itself.
  Tensor p = param({1.0});
  SGD sgd({p}, {.lr = 0.5, .momentum = 0.9});
  p.set_grad(from_vector<double>({2.0}));
  sgd.step();  // b = 2, p = 1 - 0.5 * 2
  sgd.step();  // b = 0.9 * 2 + 2 = 3.8, p = 0 - 0.5 * 3.8
  CHECK(values(p)[0] == doctest::Approx(-1.9));
  CHECK_THROWS_WITH_AS(SGD({p}, {.lr = 0.1, .nesterov = true}),
                       "SGD: nesterov needs momentum > 0 and dampening 0, got momentum 0 dampening 0", Error);
}

TEST_CASE("AdamW matches PyTorch's rule over several steps") {
  const Vec start{1.0, -2.0, 0.5};
  for (const AdamWOptions& o :
       {AdamWOptions{}, AdamWOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1}}) {
    Tensor p = param(start);
    AdamW adamw({p}, o);
    AdamWReference ref{o, start, {}, {}};
    for (int s = 0; s < 5; ++s) {
      p.set_grad(from_vector<double>(grad_at(s)));
      adamw.step();
      ref.step(grad_at(s));
      check_close(values(p), ref.p);
    }
  }
}

TEST_CASE("parameters without a grad are skipped and keep their own step count") {
  Tensor a = param({1.0, -2.0, 0.5}), b = param({0.3, 0.2, 0.1});
  const AdamWOptions o{.lr = 0.1};
  AdamW adamw({a, b}, o);
  AdamWReference ra{o, values(a), {}, {}}, rb{o, values(b), {}, {}};
  a.set_grad(from_vector<double>(grad_at(0)));
  adamw.step();
  ra.step(grad_at(0));
  CHECK(values(b) == Vec{0.3, 0.2, 0.1});
  CHECK(keys(adamw.state_dict()) ==
        std::vector<std::string>{"lr", "state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq"});
  for (int s = 1; s < 4; ++s) {  // b joins at step 1, so its bias correction lags a's
    a.set_grad(from_vector<double>(grad_at(s)));
    b.set_grad(from_vector<double>(grad_at(s + 7)));
    adamw.step();
    ra.step(grad_at(s));
    rb.step(grad_at(s + 7));
    check_close(values(a), ra.p);
    check_close(values(b), rb.p);
  }
  const StateDict state = adamw.state_dict();
  CHECK(state[1].second.item() == 4);  // state.0.step
  CHECK(state[4].second.item() == 3);  // state.1.step
}

TEST_CASE("a saved optimizer state resumes identically") {
  auto run = [](Optimizer& opt, Tensor& p, int from, int to) {
    for (int s = from; s < to; ++s) {
      p.set_grad(from_vector<double>(grad_at(s)));
      opt.step();
    }
  };
  const Vec start{1.0, -2.0, 0.5};
  SUBCASE("AdamW") {
    Tensor p = param(start);
    AdamW a({p}, {.lr = 0.05});
    run(a, p, 0, 3);
    const StateDict saved = snapshot(a.state_dict());
    const Vec saved_p = values(p);
    run(a, p, 3, 6);

    Tensor q = param(saved_p);
    AdamW b({q}, {.lr = 1.0});  // lr comes from the state
    b.load_state_dict(saved);
    CHECK(b.lr() == 0.05);
    run(b, q, 3, 6);
    CHECK(values(q) == values(p));
  }
  SUBCASE("SGD with momentum") {
    Tensor p = param(start);
    SGD a({p}, {.lr = 0.05, .momentum = 0.9, .nesterov = true});
    run(a, p, 0, 3);
    const StateDict saved = snapshot(a.state_dict());
    CHECK(keys(saved) == std::vector<std::string>{"lr", "state.0.momentum_buffer"});
    const Vec saved_p = values(p);
    run(a, p, 3, 6);

    Tensor q = param(saved_p);
    SGD b({q}, {.lr = 0.05, .momentum = 0.9, .nesterov = true});
    b.load_state_dict(saved);
    run(b, q, 3, 6);
    CHECK(values(q) == values(p));
  }
}

TEST_CASE("loading a state that does not fit names every missing, unexpected and mis-shaped key") {
  Tensor a = param({1, 2, 3}), b = param({1, 2});
  AdamW adamw({a, b}, {});
  const StateDict bad{{"lr", scalar_tensor(0.1, DType::f64)},
                      {"state.0.step", scalar_tensor(2, DType::i64)},
                      {"state.0.exp_avg", zeros({4})},
                      {"state.1.step", scalar_tensor(2, DType::i64)},
                      {"state.2.step", scalar_tensor(2, DType::i64)},
                      {"momentum", zeros({1})}};
  CHECK_THROWS_WITH_AS(adamw.load_state_dict(bad),
                       "load_state_dict: the state does not fit this AdamW: missing keys [state.0.exp_avg_sq, "
                       "state.1.exp_avg, state.1.exp_avg_sq]; unexpected keys [state.2.step, momentum]; mis-shaped "
                       "keys [state.0.exp_avg: optimizer [3], state [4]]",
                       Error);
  CHECK(adamw.lr() == 1e-3);  // unchanged
  CHECK_THROWS_WITH_AS(adamw.load_state_dict({}),
                       "load_state_dict: the state does not fit this AdamW: missing keys [lr]", Error);
  CHECK_THROWS_WITH_AS(AdamW({a, a}, {}), "Optimizer: parameter 1 appears twice", Error);
}

TEST_CASE("Module::to(DType) keeps the optimizer's handles valid, state included") {
  Generator gen(30);
  nn::Linear lin(3, 2, true, gen);
  AdamW adamw(lin.parameters(), {.lr = 0.01});
  auto train_step = [&](DType dtype) {
    adamw.zero_grad();
    backward(nn::mse_loss(lin(ones({4, 3}, dtype)), zeros({4, 2}, dtype)));
    adamw.step();
  };
  train_step(DType::f32);
  lin.to(DType::f64);
  CHECK(adamw.params()[0].dtype() == DType::f64);
  const Vec before = values(lin.weight());
  train_step(DType::f64);
  CHECK(values(lin.weight()) != before);                      // the optimizer updated the model's (cast) weight
  CHECK(adamw.state_dict()[2].second.dtype() == DType::f64);  // state.0.exp_avg followed the parameter
  lin.to(DType::f32);
  train_step(DType::f32);
  CHECK(adamw.state_dict()[2].second.dtype() == DType::f32);
  CHECK(adamw.state_dict()[1].second.item() == 3);
}

TEST_CASE("end to end: a Linear fits y = 3x + 0.5 with SGD") {
  Generator gen(31);
  nn::Linear lin(1, 1, true, gen);
  const Tensor x = uniform({64, 1}, -1.0, 1.0, gen);
  const Tensor y = x * 3.0 + 0.5;
  SGD sgd(lin.parameters(), {.lr = 0.1, .momentum = 0.9});
  double loss = 0;
  for (int step = 0; step < 200; ++step) {
    sgd.zero_grad();
    const Tensor l = nn::mse_loss(lin(x), y);
    backward(l);
    sgd.step();
    loss = l.item();
  }
  CHECK(loss < 1e-8);
  CHECK(lin.weight().item() == doctest::Approx(3.0).epsilon(1e-4));
  CHECK(lin.bias().item() == doctest::Approx(0.5).epsilon(1e-4));
}

namespace {
// A step hook that lets the update and zero_grad through when told to.
struct Gate : optim::StepHook {
  bool allow_step = false, allow_zero = false;
  void step(optim::Optimizer& o) override {
    if (allow_step) o.apply_update();
  }
  void zero_grad(optim::Optimizer& o, bool set_to_none) override {
    if (allow_zero) o.clear_grads(set_to_none);
  }
};
}  // namespace

TEST_CASE("step() and zero_grad() hand over to their step hook; no hook means always") {
  Tensor w = from_vector(std::vector<float>{1, 2}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.5});
  w.set_grad(from_vector(std::vector<float>{1, 1}));
  auto gate = std::make_shared<Gate>();
  bool& allow_step = gate->allow_step;
  bool& allow_zero = gate->allow_zero;
  sgd.set_step_hook(gate);
  sgd.step();
  sgd.zero_grad();
  CHECK(w.to_vector<float>() == std::vector<float>{1, 2});  // gated: no update
  REQUIRE(w.grad().defined());                              // gated: grad kept
  allow_step = allow_zero = true;
  sgd.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0.5f, 1.5f});
  sgd.zero_grad();
  CHECK_FALSE(w.grad().defined());
  sgd.set_step_hook({});
  w.set_grad(from_vector(std::vector<float>{1, 1}));
  sgd.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0.0f, 1.0f});
}

TEST_CASE("an optimizer holds its step hook weakly: once the hook is gone, step() and zero_grad() act plainly") {
  Tensor w = from_vector(std::vector<float>{1, 2}).requires_grad_();
  optim::SGD sgd({w}, {.lr = 0.5});
  w.set_grad(from_vector(std::vector<float>{1, 1}));
  {
    auto gate = std::make_shared<Gate>();
    sgd.set_step_hook(gate);
    sgd.step();
    CHECK(w.to_vector<float>() == std::vector<float>{1, 2});
  }
  sgd.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0.5f, 1.5f});
  sgd.zero_grad();
  CHECK_FALSE(w.grad().defined());
}
