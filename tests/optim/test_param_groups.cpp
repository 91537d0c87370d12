// Parameter groups: an optimizer over groups equals one optimizer per group with those settings, a
// schedule scales every group alike, the groups' settings and memberships travel in the state dict
// (keyed by parameter name in a checkpoint, resumed exactly), and bad groups are refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "accel.h"
#include "runtime/checkpoint/named_optimizer_state.h"

using namespace accel;
using namespace accel::optim;

namespace {

using Vec = std::vector<double>;

Tensor param(const Vec& v) { return from_vector<double>(v).requires_grad_(); }
Vec values(const Tensor& t) { return contiguous(t).to_vector<double>(); }

// Grads for step s of parameter k: varied in sign and size so every term matters.
Tensor grad_of(int k, int s) { return from_vector<double>({0.5 - s + k, 0.25 * s * s - k, std::sin(1.0 + s + k)}); }

struct Params {
  Tensor a = param({1.0, -2.0, 0.5}), b = param({0.3, 0.2, -0.1}), c = param({-1.5, 0.7, 2.0});
  std::vector<Tensor> all() const { return {a, b, c}; }
  void set_grads(int s) const {
    for (int k = 0; k < 3; ++k) all()[static_cast<size_t>(k)].set_grad(grad_of(k, s));
  }
};

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

// {a, c} decayed at the optimizer's lr, {b} undecayed at twice the lr with its own beta2.
std::vector<ParamGroup> two_groups(const Params& p) {
  return {ParamGroup{{p.a, p.c}, {{"weight_decay", 0.1}}},
          ParamGroup{{p.b}, {{"weight_decay", 0.0}, {"lr", 0.1}, {"beta2", 0.95}}}};
}

}  // namespace

TEST_CASE("AdamW over two groups equals one AdamW per group with the group's settings, bit for bit") {
  Params grouped, alone;
  AdamW adamw(two_groups(grouped), {.lr = 0.05});
  AdamW decayed({alone.a, alone.c}, {.lr = 0.05, .weight_decay = 0.1});
  AdamW undecayed({alone.b}, {.lr = 0.1, .beta2 = 0.95, .weight_decay = 0.0});
  CHECK(adamw.num_groups() == 2);
  CHECK(adamw.group_of(0) == 0);
  CHECK(adamw.group_of(2) == 1);  // params() lists a, c, then b
  CHECK(adamw.group_lr(1) == doctest::Approx(0.1));
  for (int s = 0; s < 4; ++s) {
    grouped.set_grads(s);
    alone.set_grads(s);
    adamw.step();
    decayed.step();
    undecayed.step();
    for (int k = 0; k < 3; ++k)
      CHECK(values(grouped.all()[static_cast<size_t>(k)]) == values(alone.all()[static_cast<size_t>(k)]));
  }
}

TEST_CASE("SGD over groups equals one SGD per group, momentum buffers seeded on each first update") {
  Params grouped, alone;
  const SGDOptions o{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01};
  SGD sgd({ParamGroup{{grouped.a}, {}}, ParamGroup{{grouped.b, grouped.c}, {{"dampening", 0.5}, {"lr", 0.2}}}}, o);
  SGD first({alone.a}, o);
  SGD second({alone.b, alone.c}, {.lr = 0.2, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.01});
  for (int s = 0; s < 4; ++s) {
    grouped.set_grads(s);
    alone.set_grads(s);
    if (s == 0) grouped.c.set_grad(Tensor()), alone.c.set_grad(Tensor());  // c's buffer starts a step late
    sgd.step();
    first.step();
    second.step();
    for (int k = 0; k < 3; ++k)
      CHECK(values(grouped.all()[static_cast<size_t>(k)]) == values(alone.all()[static_cast<size_t>(k)]));
  }
}

TEST_CASE("a schedule scales every group's lr alike: a group keeps its ratio to the optimizer's lr") {
  Params p;
  AdamW adamw(two_groups(p), {.lr = 0.05});
  LRScheduler schedule = LRScheduler::cosine(adamw, 2, 10, 0.0);
  for (int s = 0; s < 5; ++s) {
    p.set_grads(s);
    adamw.step();
    schedule.step();
    CHECK(adamw.group_lr(0) == adamw.lr());
    CHECK(adamw.group_lr(1) == doctest::Approx(2 * adamw.lr()));
  }
  CHECK(adamw.lr() < 0.05);
}

TEST_CASE("the state dict carries each group's settings and each parameter's group; a resume is exact") {
  Params p;
  AdamW adamw(two_groups(p), {.lr = 0.05});
  for (int s = 0; s < 3; ++s) p.set_grads(s), adamw.step();
  const StateDict saved = snapshot(adamw.state_dict());
  const std::vector<std::string> k = keys(saved);
  CHECK(std::vector<std::string>(k.end() - 7, k.end()) ==
        std::vector<std::string>{"param_groups.0.weight_decay", "param_groups.1.beta2", "param_groups.1.lr",
                                 "param_groups.1.weight_decay", "param_group.0", "param_group.1", "param_group.2"});
  const Vec a_saved = values(p.a), b_saved = values(p.b), c_saved = values(p.c);
  for (int s = 3; s < 6; ++s) p.set_grads(s), adamw.step();

  // The code's settings differ; as in PyTorch, the state's win.
  Params q;
  q.a = param(a_saved), q.b = param(b_saved), q.c = param(c_saved);
  AdamW resumed({ParamGroup{{q.a, q.c}, {{"weight_decay", 0.5}}},
                 ParamGroup{{q.b}, {{"weight_decay", 0.3}, {"lr", 0.9}, {"beta2", 0.5}}}},
                {.lr = 0.05});
  resumed.load_state_dict(saved);
  CHECK(resumed.group_settings(1).at("beta2") == 0.95);
  CHECK(resumed.group_lr(1) == doctest::Approx(0.1));
  for (int s = 3; s < 6; ++s) q.set_grads(s), resumed.step();
  CHECK(values(q.a) == values(p.a));
  CHECK(values(q.b) == values(p.b));
  CHECK(values(q.c) == values(p.c));

  // A checkpoint keys the memberships by parameter name, and back.
  const std::vector<std::string> names{"fc.weight", "ln.bias", "fc.bias"};
  const StateDict named = name_optimizer_state(saved, names);
  const std::vector<std::string> nk = keys(named);
  CHECK(std::vector<std::string>(nk.end() - 3, nk.end()) ==
        std::vector<std::string>{"param_group.fc.weight", "param_group.ln.bias", "param_group.fc.bias"});
  CHECK(keys(index_optimizer_state(named, names, "ckpt")) == k);
  StateDict groups_only;  // as a checkpoint saved before any step would hold
  for (const auto& [key, t] : named)
    if (key.rfind("state.", 0) != 0) groups_only.emplace_back(key, t);
  CHECK_THROWS_WITH_AS(index_optimizer_state(groups_only, {"fc.weight", "ln.bias", "head.bias"}, "ckpt"),
                       doctest::Contains("key 'param_group.fc.bias' is the parameter group of a parameter 'fc.bias'"),
                       Error);
}

TEST_CASE("a state whose groups do not fit is refused, naming what differs, and changes nothing") {
  Params p;
  AdamW adamw(two_groups(p), {.lr = 0.05});
  p.set_grads(0), adamw.step();
  const StateDict saved = snapshot(adamw.state_dict());

  Params q;
  AdamW moved({ParamGroup{{q.a}, {{"weight_decay", 0.1}}},
               ParamGroup{{q.c, q.b}, {{"weight_decay", 0.0}, {"lr", 0.1}, {"beta2", 0.95}}}},
              {.lr = 0.01});
  CHECK_THROWS_WITH_AS(moved.load_state_dict(saved),
                       doctest::Contains("parameter groups: parameter 1 is in group 1 here but in group 0 in the state"),
                       Error);
  CHECK(moved.lr() == 0.01);

  AdamW plain({q.a, q.c, q.b}, {});
  CHECK_THROWS_WITH_AS(plain.load_state_dict(saved),
                       doctest::Contains("parameter groups: unexpected key 'param_groups.0.weight_decay'"), Error);
  AdamW plain_source({p.a, p.c, p.b}, {});
  CHECK_THROWS_WITH_AS(moved.load_state_dict(plain_source.state_dict()),
                       doctest::Contains("missing key 'param_groups.0.weight_decay'"), Error);
}

TEST_CASE("bad groups are refused naming the group and the value") {
  Params p;
  CHECK_THROWS_WITH_AS(AdamW({ParamGroup{{p.a}, {{"momentum", 0.9}}}}, {}),
                       "Optimizer: parameter group 0 sets 'momentum', which this optimizer does not have; expected one "
                       "of weight_decay, beta1, beta2, eps, lr",
                       Error);
  CHECK_THROWS_WITH_AS(AdamW({ParamGroup{{p.a, p.b}, {}}, ParamGroup{{p.b}, {}}}, {}),
                       "Optimizer: parameter 2 appears twice (in group 1)", Error);
  CHECK_THROWS_WITH_AS(SGD({ParamGroup{{p.a}, {}}, ParamGroup{{}, {}}}, {}), "Optimizer: parameter group 1 is empty",
                       Error);
  CHECK_THROWS_WITH_AS(AdamW({ParamGroup{{p.a}, {{"beta2", 1.0}}}, ParamGroup{{p.b}, {}}}, {}),
                       "AdamW: betas must be in [0, 1), got (0.9, 1) (parameter group 0)", Error);
  CHECK_THROWS_WITH_AS(AdamW({ParamGroup{{p.a}, {{"weight_decay", -1.0}}}}, {}),
                       "Optimizer: parameter group 0 sets weight_decay to -1; expected a finite value >= 0", Error);
  CHECK_THROWS_WITH_AS(SGD({ParamGroup{{p.a}, {{"lr", 0.1}}}}, {.lr = 0.0}),
                       doctest::Contains("a parameter group's lr 0.1 needs the optimizer's lr > 0"), Error);
  CHECK_THROWS_WITH_AS(SGD({ParamGroup{{p.a}, {{"dampening", 0.5}}}}, {.momentum = 0.9, .nesterov = true}),
                       "SGD: nesterov needs momentum > 0 and dampening 0, got momentum 0.9 dampening 0.5", Error);
}

TEST_CASE("an Accelerator checkpoint of a grouped optimizer resumes exactly, groups keyed by parameter name") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "accel_test_param_groups";
  std::filesystem::remove_all(dir);
  auto run = [&](bool resume) {
    AcceleratorOptions o;
    o.print_settings = false;
    Accelerator accelerator(o);
    Generator gen(3);
    auto model = std::make_shared<nn::Linear>(3, 2, true, gen);
    auto opt = std::make_shared<AdamW>(std::vector<ParamGroup>{ParamGroup{{model->weight()}, {{"weight_decay", 0.1}}},
                                                               ParamGroup{{model->bias()}, {{"weight_decay", 0.0}}}},
                                       AdamWOptions{.lr = 0.01});
    auto [net, optimizer] = accelerator.prepare(model, opt);
    const Tensor x = reshape(from_vector<float>({0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f}), {2, 3});
    auto train = [&](int steps) {
      for (int s = 0; s < steps; ++s) {
        optimizer->zero_grad();
        accelerator.backward(sum(mul((*net)(x), narrow(x, 1, 0, 2))));
        optimizer->step();
      }
    };
    if (resume) {
      accelerator.load_state(dir.string());
    } else {
      train(2);
      accelerator.save_state(dir.string());
    }
    train(3);
    return contiguous(model->weight()).to_vector<float>();
  };
  const std::vector<float> straight = run(false);
  CHECK(run(true) == straight);
  std::filesystem::remove_all(dir);
}
