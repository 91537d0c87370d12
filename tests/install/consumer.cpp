// An outside program, built only with `pkg-config --cflags --libs accel` against an installed accel:
// the README's training loop. It prints the learned weight and bias.
#include <accel.h>

#include <cstdio>

using namespace accel;

int main() {
  Accelerator accelerator;
  Generator gen(0);
  auto model = std::make_shared<nn::Linear>(1, 1, true, gen);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  Tensor x = randn({1000, 1}, gen);
  Tensor y = x * 3.0 + randn({1000, 1}, gen) * 0.5;
  DataLoader loader(std::make_shared<TensorDataset>(std::vector<Tensor>{x, y}), {.batch_size = 1000});

  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  for (int epoch = 0; epoch < 100; ++epoch) {
    for (const Batch& batch : data) {
      opt->zero_grad();
      Tensor loss = nn::mse_loss((*net)(batch[0]), batch[1]);
      accelerator.backward(loss);
      opt->step();
      if (epoch % 10 == 0) accelerator.print("epoch", epoch, "loss", loss.item());
    }
  }
  accelerator.print("weight", net->weight().item(), "bias", net->bias().item());
  return 0;
}
