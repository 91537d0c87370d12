// transformers' GPT-2 model.safetensors: a file written by hand in transformers' layout (Conv1D weights
// [in, out], the attention mask buffers, a tied lm_head, with and without the "transformer." prefix)
// loads with the right transposes; ours has transformers' keys, shapes and metadata and loads back
// bitwise; an untied head takes the file's lm_head or wte; hostile files are refused naming the key.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "../temp_dir.h"

using namespace accel;
using namespace accel::nn;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

std::vector<float> values(const Tensor& t) {
  return nograd::contiguous(nograd::to_dtype(t, DType::f32)).to_vector<float>();
}

Tensor param(const Module& m, const std::string& name) {
  for (const auto& [key, t] : m.named_parameters())
    if (key == name) return t;
  FAIL("no parameter " << name);
  return Tensor();
}

constexpr GPTConfig kTiny{.vocab_size = 11,
                          .block_size = 8,
                          .n_layer = 2,
                          .n_head = 2,
                          .n_embd = 8,
                          .dropout = 0.0,
                          .tie_weights = true,
                          .padded_vocab_size = 16};

std::shared_ptr<GPT> random_model(const GPTConfig& config, uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<GPT>(config, gen);
  for (const Tensor& p : m->parameters()) nograd::copy_(p, randn(p.shape(), gen));
  return m;
}

// [rows, cols] -> [cols, rows], by the test's own loop.
Tensor transposed_by_hand(const Tensor& w) {
  const std::vector<float> v = values(w);
  const int64_t rows = w.size(0), cols = w.size(1);
  std::vector<float> t(v.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = v[i * cols + j];
  return from_vector<float>(t, {cols, rows});
}

Tensor copy_of(const Tensor& t) { return from_vector<float>(values(t), t.shape()); }

struct HandFile {
  std::string prefix;
  bool mask_buffers = false;
  bool lm_head = false;
};

// The tensors as transformers' GPT2LMHeadModel (prefix "transformer.") or GPT2Model ("") holds them:
// nn.Linear's [out, in] weights as Conv1D's [in, out], wte unpadded.
NamedTensors hand_hf(const GPT& m, const HandFile& how) {
  const GPTConfig& c = m.config();
  const std::string& p = how.prefix;
  const Tensor wte = copy_of(nograd::narrow(param(m, "wte.weight"), 0, 0, c.vocab_size));
  NamedTensors out{{p + "wte.weight", wte}, {p + "wpe.weight", copy_of(param(m, "wpe.weight"))}};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = p + "h." + std::to_string(l) + ".", b = "blocks." + std::to_string(l) + ".";
    out.emplace_back(h + "ln_1.weight", copy_of(param(m, b + "ln_1.weight")));
    out.emplace_back(h + "ln_1.bias", copy_of(param(m, b + "ln_1.bias")));
    if (how.mask_buffers) {
      out.emplace_back(h + "attn.bias", ones({1, 1, c.block_size, c.block_size}));
      out.emplace_back(h + "attn.masked_bias", scalar_tensor(-1e4));
    }
    out.emplace_back(h + "attn.c_attn.weight", transposed_by_hand(param(m, b + "attn.qkv.weight")));
    out.emplace_back(h + "attn.c_attn.bias", copy_of(param(m, b + "attn.qkv.bias")));
    out.emplace_back(h + "attn.c_proj.weight", transposed_by_hand(param(m, b + "attn.proj.weight")));
    out.emplace_back(h + "attn.c_proj.bias", copy_of(param(m, b + "attn.proj.bias")));
    out.emplace_back(h + "ln_2.weight", copy_of(param(m, b + "ln_2.weight")));
    out.emplace_back(h + "ln_2.bias", copy_of(param(m, b + "ln_2.bias")));
    out.emplace_back(h + "mlp.c_fc.weight", transposed_by_hand(param(m, b + "mlp.fc.weight")));
    out.emplace_back(h + "mlp.c_fc.bias", copy_of(param(m, b + "mlp.fc.bias")));
    out.emplace_back(h + "mlp.c_proj.weight", transposed_by_hand(param(m, b + "mlp.proj.weight")));
    out.emplace_back(h + "mlp.c_proj.bias", copy_of(param(m, b + "mlp.proj.bias")));
  }
  out.emplace_back(p + "ln_f.weight", copy_of(param(m, "ln_f.weight")));
  out.emplace_back(p + "ln_f.bias", copy_of(param(m, "ln_f.bias")));
  if (how.lm_head) out.emplace_back("lm_head.weight", copy_of(wte));
  return out;
}

// dst holds src's weights; wte's padded rows (which a transformers file has not) are zero.
void check_loaded(const GPT& src, const GPT& dst) {
  const int64_t V = src.config().vocab_size;
  for (const auto& [name, p] : src.named_parameters()) {
    const Tensor q = param(dst, name);
    if (name != "wte.weight") {
      CHECK_MESSAGE(values(q) == values(p), name);
      continue;
    }
    CHECK(values(nograd::narrow(q, 0, 0, V)) == values(nograd::narrow(p, 0, 0, V)));
    for (float v : values(nograd::narrow(q, 0, V, q.size(0) - V))) CHECK(v == 0.0f);
  }
}

std::vector<float> logits_of(GPT& m) {
  return values(m(from_vector<int64_t>({1, 4, 2, 6, 0, 3, 10, 7, 5, 9, 8, 2}, {2, 6})));
}

NamedTensors without(NamedTensors t, const std::string& key) {
  std::erase_if(t, [&](const auto& kv) { return kv.first == key; });
  return t;
}

NamedTensors replaced(NamedTensors t, const std::string& key, const Tensor& value) {
  for (auto& [k, v] : t)
    if (k == key) v = value;
  return t;
}

}  // namespace

TEST_CASE(
    "a transformers GPT-2 file written by hand loads with the Conv1D weights transposed, with or without "
    "the transformer. prefix, mask buffers and a tied lm_head") {
  const TempDir dir("hf_gpt2");
  const auto src = random_model(kTiny, 1);
  for (const HandFile& how : {HandFile{"", false, false}, HandFile{"", true, false},
                              HandFile{"transformer.", true, true}, HandFile{"transformer.", false, true}}) {
    CAPTURE(how.prefix);
    CAPTURE(how.mask_buffers);
    CAPTURE(how.lm_head);
    save_safetensors(dir.file("model.safetensors"), hand_hf(*src, how), {{"format", "pt"}});
    const auto dst = random_model(kTiny, 2);
    load_hf_gpt2(*dst, dir.file("model.safetensors"));
    check_loaded(*src, *dst);
    CHECK(logits_of(*dst) == logits_of(*src));  // the padded rows take part in nothing
  }
}

TEST_CASE("our transformers file has GPT2Model's keys, shapes and Conv1D layout, format pt, and loads back") {
  const TempDir dir("hf_gpt2");
  const auto src = random_model(kTiny, 3);
  save_hf_gpt2(*src, dir.file("model.safetensors"));
  const SafetensorsContents ours = load_safetensors(dir.file("model.safetensors"));
  CHECK(ours.metadata == SafetensorsMetadata{{"format", "pt"}});
  const NamedTensors hand = hand_hf(*src, {});
  REQUIRE(ours.tensors.size() == hand.size());
  CHECK(ours.at("h.0.attn.c_attn.weight").shape() == Shape{8, 24});
  CHECK(ours.at("h.1.mlp.c_proj.weight").shape() == Shape{32, 8});
  CHECK(ours.at("wte.weight").shape() == Shape{11, 8});
  for (const auto& [key, t] : hand) {
    CHECK_MESSAGE(ours.at(key).shape() == t.shape(), key);
    CHECK_MESSAGE(values(ours.at(key)) == values(t), key);
  }
  const auto dst = random_model(kTiny, 4);
  load_hf_gpt2(*dst, dir.file("model.safetensors"));
  check_loaded(*src, *dst);

  // A model in bf16 is written in bf16 and read into f32 exactly.
  const auto half = random_model(kTiny, 5);
  half->to(DType::bf16);
  save_hf_gpt2(*half, dir.file("bf16.safetensors"));
  CHECK(load_safetensors(dir.file("bf16.safetensors")).at("ln_f.bias").dtype() == DType::bf16);
  const auto wide = random_model(kTiny, 6);
  load_hf_gpt2(*wide, dir.file("bf16.safetensors"));
  CHECK(values(param(*wide, "blocks.1.attn.qkv.weight")) == values(param(*half, "blocks.1.attn.qkv.weight")));
}

TEST_CASE("an untied model takes the file's lm_head.weight as its head, or wte without one; writing one is refused") {
  const TempDir dir("hf_gpt2");
  GPTConfig untied = kTiny;
  untied.tie_weights = false;
  const auto src = random_model(kTiny, 7);
  const NamedTensors with_head = hand_hf(*src, {"transformer.", false, true});
  Generator gen(8);
  const Tensor own_head = randn({11, 8}, gen);
  save_safetensors(dir.file("head.safetensors"), replaced(with_head, "lm_head.weight", own_head));
  const auto dst = random_model(untied, 9);
  load_hf_gpt2(*dst, dir.file("head.safetensors"));
  CHECK(values(param(*dst, "lm_head.weight")) == values(own_head));

  save_safetensors(dir.file("tied.safetensors"), hand_hf(*src, {}));
  load_hf_gpt2(*dst, dir.file("tied.safetensors"));
  CHECK(values(param(*dst, "lm_head.weight")) == values(nograd::narrow(param(*src, "wte.weight"), 0, 0, 11)));
  CHECK(logits_of(*dst) == logits_of(*src));
  CHECK_THROWS_WITH_AS(save_hf_gpt2(*dst, dir.file("untied.safetensors")),
                       doctest::Contains("the model's lm head is untied"), Error);
}

TEST_CASE("hostile transformers files are refused naming the file and the key") {
  const TempDir dir("hf_gpt2");
  const auto src = random_model(kTiny, 10);
  const NamedTensors good = hand_hf(*src, {"transformer.", true, true});
  const std::string f = dir.file("bad.safetensors");
  auto refused = [&](const NamedTensors& tensors, const std::string& what) {
    save_safetensors(f, tensors);
    const auto dst = random_model(kTiny, 11);
    const std::vector<float> before = values(param(*dst, "wpe.weight"));
    try {
      load_hf_gpt2(*dst, f);
      FAIL("accepted a file with " << what);
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(m.find("load_hf_gpt2: " + f + ": ") != std::string::npos, m);
      CHECK_MESSAGE(m.find(what) != std::string::npos, m);
    }
    CHECK(values(param(*dst, "wpe.weight")) == before);  // nothing loaded
  };
  refused(without(good, "transformer.h.1.mlp.c_fc.bias"), "no tensor 'transformer.h.1.mlp.c_fc.bias'");
  refused(without(good, "transformer.wte.weight"), "no tensor 'wte.weight'");  // then no prefix is seen either
  refused(replaced(good, "transformer.h.0.attn.c_attn.weight", copy_of(param(*src, "blocks.0.attn.qkv.weight"))),
          "'transformer.h.0.attn.c_attn.weight' is [24, 8], expected [8, 24]");
  refused(replaced(good, "transformer.wte.weight", zeros({12, 8})),
          "'transformer.wte.weight' is [12, 8], expected [11, 8]");
  refused(replaced(good, "transformer.h.1.ln_2.bias", zeros({8, 1})),
          "'transformer.h.1.ln_2.bias' is [8, 1], expected [8]");
  NamedTensors extra_layer = good;
  extra_layer.emplace_back("transformer.h.2.ln_1.weight", ones({8}));
  extra_layer.emplace_back("transformer.score.weight", ones({2, 8}));
  refused(extra_layer,
          "tensors a GPT-2 with n_layer 2 has no place for: transformer.h.2.ln_1.weight, "
          "transformer.score.weight");
  refused(replaced(good, "lm_head.weight", zeros({11, 8})),
          "lm_head.weight differs from transformer.wte.weight: the file's head is untied, the model's is tied");
  CHECK_THROWS_WITH_AS(load_hf_gpt2(*src, dir.file("missing.safetensors")), doctest::Contains("missing.safetensors"),
                       Error);
}

TEST_CASE("hf_gpt2_config reads the model off the shapes, but for n_head") {
  const TempDir dir("hf_gpt2");
  const auto src = random_model(kTiny, 12);
  save_hf_gpt2(*src, dir.file("model.safetensors"));
  const GPTConfig c = hf_gpt2_config(load_safetensors_header(dir.file("model.safetensors")), "m", 2);
  CHECK(c.vocab_size == 11);
  CHECK(c.block_size == 8);
  CHECK(c.n_layer == 2);
  CHECK(c.n_head == 2);
  CHECK(c.n_embd == 8);
  CHECK(c.tie_weights);
  CHECK(c.padded_vocab_size == 0);
  CHECK_THROWS_WITH_AS(hf_gpt2_config(load_safetensors_header(dir.file("model.safetensors")), "m", 3),
                       "hf_gpt2_config: m: n_head 3 does not divide the width 8", Error);
  save_safetensors(dir.file("none.safetensors"), {{"x", ones({2})}});
  CHECK_THROWS_WITH_AS(hf_gpt2_config(load_safetensors_header(dir.file("none.safetensors")), "n", 2),
                       "hf_gpt2_config: n: no tensor 'wte.weight', expected a 2-d tensor in a GPT-2 file", Error);
}
