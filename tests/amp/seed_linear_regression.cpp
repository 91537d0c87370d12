// The seed's linear-regression example as a user ports it: an ordinary training loop with the five
// lines that Accelerate changes (marked "accel k/5") and no autocast scope. After training, the test's
// own lines (below the loop) count the model outputs that are exactly values of the compute dtype:
// all of them when the matmuls ran in bf16 or fp16, few in f32.
#include <fmt/format.h>

#include <accel.h>

using namespace accel;

int main() {
  try {
    Accelerator accelerator;                 // accel 1/5
    const Device device = accelerator.device();  // accel 2/5

    Generator gen(0);
    const Tensor x = randn({512, 1}, gen);
    const Tensor y = x * 3.0 + randn({512, 1}, gen) * 0.5;
    auto model = std::make_shared<nn::Linear>(1, 1, true, gen);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
    DataLoader data(std::make_shared<TensorDataset>(std::vector<Tensor>{x, y}), {.batch_size = 64, .shuffle = true});

    auto [net, opt, loader] = accelerator.prepare(model, optimizer, data);  // accel 3/5

    double loss_value = 0;
    for (int epoch = 0; epoch < 20; ++epoch) {
      for (const Batch& batch : loader) {
        opt->zero_grad();
        const Tensor loss = nn::mse_loss((*net)(to(batch[0], device)), to(batch[1], device));
        accelerator.backward(loss);  // accel 4/5
        opt->step();
        loss_value = loss.item();
      }
    }

    // The test's check: outputs that survive a round trip through the compute dtype unchanged.
    const Tensor out = to_dtype((*net)(x), DType::f32);
    const DType compute = accelerator.precision_policy().compute;
    const Tensor round_trip = to_dtype(to_dtype(out, compute == DType::f32 ? DType::bf16 : compute), DType::f32);
    const std::vector<float> a = out.to_vector<float>(), b = round_trip.to_vector<float>();
    int64_t exact = 0;
    for (size_t i = 0; i < a.size(); ++i) exact += a[i] == b[i];
    accelerator.print(fmt::format("final: weight={:.4f} bias={:.4f} loss={:.4f} compute={} outputs_in_compute_dtype={}/{}",  // accel 5/5
                                  net->weight().item(), net->bias().item(), loss_value, dtype_name(compute), exact,
                                  a.size()));
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
