// GPT-2 weights from a file recognised by content (a trainer's --init_from): the same weights saved as
// llm.c's file and as transformers' give models with identical logits; the config each file describes
// builds the model it loads into (n_head from config.json beside a safetensors file, or n_embd / 64);
// anything else is refused with the file named.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "../temp_dir.h"

using namespace accel;
using namespace accel::nn;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<float> values(const Tensor& t) {
  return nograd::contiguous(nograd::to_dtype(t, DType::f32)).to_vector<float>();
}

std::shared_ptr<GPT> random_model(const GPTConfig& config, uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<GPT>(config, gen);
  for (const Tensor& p : m->parameters()) nograd::copy_(p, randn(p.shape(), gen));
  return m;
}

// What --init_from does: the model the file describes, then its weights.
std::shared_ptr<GPT> model_from(const std::string& path) {
  Generator gen(99);
  auto m = std::make_shared<GPT>(gpt2_config_of_file(path), gen);
  load_gpt2_weights(*m, path);
  return m;
}

std::vector<float> logits_of(GPT& m) {
  return values(m(from_vector<int64_t>({1, 4, 2, 6, 0, 3, 10, 7, 5, 9, 8, 2}, {2, 6})));
}

constexpr GPTConfig kTiny{.vocab_size = 11,
                          .block_size = 8,
                          .n_layer = 2,
                          .n_head = 2,
                          .n_embd = 8,
                          .dropout = 0.0,
                          .tie_weights = true,
                          .padded_vocab_size = 16};

}  // namespace

TEST_CASE("the same weights from an llm.c file and from a transformers file give identical logits") {
  const TempDir dir("gpt2_weights");
  const auto src = random_model(kTiny, 1);
  llmc::save_llmc_gpt2(*src, dir.file("gpt2.bin"));
  fs::create_directories(dir.path / "hf");
  save_hf_gpt2(*src, dir.file("hf/model.safetensors"));
  write_text(dir.file("hf/config.json"), R"({"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 2,
    "n_positions": 8, "vocab_size": 11})");
  CHECK(detect_gpt2_weights_format(dir.file("gpt2.bin")) == Gpt2WeightsFormat::llmc);
  CHECK(detect_gpt2_weights_format(dir.file("hf/model.safetensors")) == Gpt2WeightsFormat::hf_safetensors);

  const auto from_llmc = model_from(dir.file("gpt2.bin"));
  const auto from_hf = model_from(dir.file("hf/model.safetensors"));
  CHECK(from_llmc->config().padded_vocab_size == 16);  // llm.c's header keeps the padding
  CHECK(from_hf->config().padded_vocab_size == 0);     // transformers' files have none
  CHECK(from_hf->config().n_head == 2);
  const std::vector<float> expected = logits_of(*src);
  CHECK(logits_of(*from_llmc) == expected);
  CHECK(logits_of(*from_hf) == expected);

  // Into a model built some other way too: the transformers file into a padded one.
  Generator gen(2);
  GPT padded(kTiny, gen);
  load_gpt2_weights(padded, dir.file("hf/model.safetensors"));
  CHECK(logits_of(padded) == expected);
}

TEST_CASE("a safetensors file's n_head comes from config.json beside it, or is n_embd / 64 without one") {
  const TempDir dir("gpt2_weights");
  GPTConfig wide = kTiny;
  wide.n_embd = 128;
  const auto src = random_model(wide, 3);
  save_hf_gpt2(*src, dir.file("model.safetensors"));
  CHECK(gpt2_config_of_file(dir.file("model.safetensors")).n_head == 2);  // 128 / 64
  CHECK(logits_of(*model_from(dir.file("model.safetensors"))) == logits_of(*src));

  write_text(dir.file("config.json"), R"({"n_head": 4, "n_layer": 2})");
  CHECK(gpt2_config_of_file(dir.file("model.safetensors")).n_head == 4);
  write_text(dir.file("config.json"), R"({"n_head": 4, "n_layer": 3})");
  CHECK_THROWS_WITH_AS(
      gpt2_config_of_file(dir.file("model.safetensors")),
      doctest::Contains(
          ("config.json: n_layer is 3, but " + dir.file("model.safetensors") + "'s shapes say 2").c_str()),
      Error);
  write_text(dir.file("config.json"), R"({"n_layer": 2})");
  CHECK_THROWS_WITH_AS(gpt2_config_of_file(dir.file("model.safetensors")), doctest::Contains("no integer n_head"),
                       Error);
  write_text(dir.file("config.json"), "{");
  CHECK_THROWS_WITH_AS(gpt2_config_of_file(dir.file("model.safetensors")), doctest::Contains("config.json: not JSON"),
                       Error);

  const auto narrow = random_model(kTiny, 4);
  fs::create_directories(dir.path / "narrow");
  save_hf_gpt2(*narrow, dir.file("narrow/model.safetensors"));
  CHECK_THROWS_WITH_AS(gpt2_config_of_file(dir.file("narrow/model.safetensors")),
                       doctest::Contains("n_embd 8 is not a multiple of GPT-2's head size 64"), Error);
}

TEST_CASE("a file that is neither format is refused with its name") {
  const TempDir dir("gpt2_weights");
  llmc::write_token_shard(dir.file("train_000.bin"), {1, 2, 3});
  write_text(dir.file("notes.txt"), "GPT-2 weights are elsewhere");
  write_text(dir.file("short"), "{");
  for (const char* name : {"train_000.bin", "notes.txt", "short"}) {
    Generator gen(5);
    GPT model(kTiny, gen);
    const std::string path = dir.file(name);
    CHECK_THROWS_WITH_AS(load_gpt2_weights(model, path),
                         doctest::Contains(("load_gpt2_weights: " + path +
                                            ": neither an llm.c GPT-2 model file (magic 20240326) nor a safetensors")
                                               .c_str()),
                         Error);
    CHECK_THROWS_AS(gpt2_config_of_file(path), Error);
  }
  CHECK_THROWS_WITH_AS(detect_gpt2_weights_format(dir.file("train_000.bin")),
                       doctest::Contains("(it is an llm.c token shard, magic 20240520)"), Error);
  CHECK_THROWS_WITH_AS(detect_gpt2_weights_format(dir.file("missing.bin")), doctest::Contains("cannot be opened"),
                       Error);
  CHECK_THROWS_WITH_AS(detect_gpt2_weights_format(dir.path.string()), doctest::Contains("cannot be opened"), Error);
}
