// llm.c's GPT-2 model file (gpt2_124M.bin): our bytes against a writer of the test's own that follows
// train_gpt2.py's write_model (header, then the tensors in llm.c's order), byte for byte in f32 and in
// bf16 (rounded to nearest even); hand-written files load every parameter bitwise; other paddings and an
// untied head load; and hostile files are refused with an Error naming the file and the field.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "../temp_dir.h"

using namespace accel;
using namespace accel::nn;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

// A model whose every value (biases, LayerNorms and wte's padded rows included) is drawn, so that a
// tensor read into the wrong place cannot go unseen.
std::shared_ptr<GPT> random_model(const GPTConfig& config, uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<GPT>(config, gen);
  for (const Tensor& p : m->parameters()) nograd::copy_(p, randn(p.shape(), gen));
  return m;
}

// bf16's bits for f, rounded to nearest even (no NaN here).
uint16_t bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_value(float f) {
  const uint32_t u = static_cast<uint32_t>(bf16_bits(f)) << 16;
  float out = 0;
  std::memcpy(&out, &u, 4);
  return out;
}

// The file as train_gpt2.py's write_model lays it out: 256 int32 (magic, version, maxT, V, L, NH, C, Vp,
// zeros), then wte, wpe, and each per-layer tensor for every layer in turn, then ln_f; little-endian.
std::vector<uint8_t> independent_file(const GPT& m, bool bf16) {
  const GPTConfig& c = m.config();
  std::vector<uint8_t> out;
  auto put32 = [&](uint32_t v) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
  };
  for (int64_t v : {int64_t{20240326}, int64_t{bf16 ? 5 : 3}, c.block_size, c.vocab_size, c.n_layer, c.n_head, c.n_embd,
                    c.embedding_rows()})
    put32(static_cast<uint32_t>(v));
  for (int i = 8; i < 256; ++i) put32(0);
  auto put = [&](const std::string& name) {
    for (const float f : values(param(m, name))) {
      if (bf16) {
        const uint16_t h = bf16_bits(f);
        out.push_back(static_cast<uint8_t>(h & 0xff));
        out.push_back(static_cast<uint8_t>(h >> 8));
      } else {
        uint32_t u = 0;
        std::memcpy(&u, &f, 4);
        put32(u);
      }
    }
  };
  put("wte.weight");
  put("wpe.weight");
  // ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb: GPT-2's
  // ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, all as nn.Linear's [out, in].
  for (const char* leaf :
       {"ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
        "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"})
    for (int64_t l = 0; l < c.n_layer; ++l) put("blocks." + std::to_string(l) + "." + leaf);
  put("ln_f.weight");
  put("ln_f.bias");
  return out;
}

void check_same_parameters(const GPT& a, const GPT& b) {
  const StateDict pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CHECK(pa[i].first == pb[i].first);
    CHECK_MESSAGE(values(pa[i].second) == values(pb[i].second), pa[i].first);
  }
}

std::vector<float> logits_of(GPT& m) {
  return values(m(from_vector<int64_t>({1, 4, 2, 6, 0, 3, 10, 7, 5, 9, 8, 2}, {2, 6})));
}

// Overwrites header int i of an llm.c file.
std::vector<uint8_t> with_header_int(std::vector<uint8_t> bytes, size_t i, int32_t v) {
  std::memcpy(bytes.data() + 4 * i, &v, 4);
  return bytes;
}

}  // namespace

TEST_CASE(
    "llm.c f32 model file: our bytes are write_model's byte for byte, and a hand-written file loads "
    "every parameter bitwise") {
  const TempDir dir("llmc_model");
  const auto src = random_model(kTiny, 1);
  const std::vector<uint8_t> expected = independent_file(*src, false);
  CHECK(expected.size() == 1024 + 4 * 1952);  // wte 16 x 8, wpe 8 x 8, 2 layers of 872, ln_f 2 x 8 floats
  CHECK(llmc::gpt2_model_bytes(llmc::gpt2_model_file_of(*src)) == expected);

  write_bytes(dir.file("by_hand.bin"), expected);
  const llmc::Gpt2ModelFile file = llmc::read_gpt2_model(dir.file("by_hand.bin"));
  CHECK(file.header.dtype == DType::f32);
  CHECK(file.header.version() == 3);
  CHECK(file.header.max_seq_len == 8);
  CHECK(file.header.vocab_size == 11);
  CHECK(file.header.padded_vocab_size == 16);
  CHECK(file.tensors.size() == 16);
  CHECK(file.tensors[4].first == "qkvw");
  CHECK(file.at("qkvw").shape() == Shape{2, 24, 8});
  CHECK(file.at("fcprojw").shape() == Shape{2, 8, 32});
  CHECK(file.at("lnfb").shape() == Shape{8});

  const auto dst = random_model(kTiny, 2);
  llmc::load_llmc_gpt2(*dst, dir.file("by_hand.bin"));
  check_same_parameters(*src, *dst);
  CHECK(logits_of(*src) == logits_of(*dst));
  llmc::save_llmc_gpt2(*dst, dir.file("again.bin"));
  CHECK(read_bytes(dir.file("again.bin")) == expected);
  CHECK_FALSE(fs::exists(dir.file("again.bin.tmp")));

  // The model the header describes.
  const GPTConfig described = llmc::gpt_config_of(file.header);
  CHECK(described.n_layer == 2);
  CHECK(described.n_head == 2);
  CHECK(described.n_embd == 8);
  CHECK(described.block_size == 8);
  CHECK(described.tie_weights);
  CHECK(described.embedding_rows() == 16);
}

TEST_CASE(
    "llm.c bf16 model file (version 5): values round to nearest even, byte for byte as by hand; they load "
    "as those bf16 values and write back the same bytes") {
  const TempDir dir("llmc_model");
  const auto src = random_model(kTiny, 3);
  {
    // Ties between two bf16 neighbours: 1 + 2^-8 rounds down to 1, 1 + 3 x 2^-8 up to 1 + 2^-6 (the even one).
    const Tensor wte = param(*src, "wte.weight");
    nograd::copy_(nograd::narrow(nograd::select(wte, 0, 0), 0, 0, 2), from_vector<float>({1.00390625f, 1.01171875f}));
    CHECK(bf16_value(1.00390625f) == 1.0f);
    CHECK(bf16_value(1.01171875f) == 1.015625f);
  }
  const std::vector<uint8_t> expected = independent_file(*src, true);
  CHECK(expected.size() == 1024 + 2 * 1952);
  CHECK(llmc::gpt2_model_bytes(llmc::gpt2_model_file_of(*src, DType::bf16)) == expected);
  write_bytes(dir.file("bf16.bin"), expected);
  CHECK(llmc::read_gpt2_model(dir.file("bf16.bin")).header.dtype == DType::bf16);

  const auto dst = random_model(kTiny, 4);
  llmc::load_llmc_gpt2(*dst, dir.file("bf16.bin"));
  for (const auto& [name, p] : src->named_parameters()) {
    std::vector<float> rounded = values(p);
    for (float& f : rounded) f = bf16_value(f);
    CHECK_MESSAGE(values(param(*dst, name)) == rounded, name);
  }
  llmc::save_llmc_gpt2(*dst, dir.file("again.bin"), DType::bf16);
  CHECK(read_bytes(dir.file("again.bin")) == expected);
  CHECK_THROWS_WITH_AS(llmc::gpt2_model_file_of(*dst, DType::f16), doctest::Contains("llm.c's files hold f32"), Error);
}

TEST_CASE(
    "an llm.c file loads into a model of another padding, and into an untied head; an untied model is not "
    "written") {
  const TempDir dir("llmc_model");
  GPTConfig unpadded = kTiny;
  unpadded.padded_vocab_size = 0;
  const auto src = random_model(unpadded, 5);
  llmc::save_llmc_gpt2(*src, dir.file("unpadded.bin"));
  CHECK(llmc::read_gpt2_model(dir.file("unpadded.bin")).header.padded_vocab_size == 11);
  CHECK(llmc::gpt_config_of(llmc::read_gpt2_model(dir.file("unpadded.bin")).header).padded_vocab_size == 0);

  const auto padded = random_model(kTiny, 6);
  llmc::load_llmc_gpt2(*padded, dir.file("unpadded.bin"));
  const Tensor wte = param(*padded, "wte.weight");
  CHECK(values(nograd::narrow(wte, 0, 0, 11)) == values(param(*src, "wte.weight")));
  for (float v : values(nograd::narrow(wte, 0, 11, 5))) CHECK(v == 0.0f);
  CHECK(logits_of(*padded) == logits_of(*src));

  // Back to an unpadded model through a padded file: the same weights again.
  llmc::save_llmc_gpt2(*padded, dir.file("padded.bin"));
  const auto unpadded_again = random_model(unpadded, 7);
  llmc::load_llmc_gpt2(*unpadded_again, dir.file("padded.bin"));
  check_same_parameters(*src, *unpadded_again);

  GPTConfig untied = kTiny;
  untied.tie_weights = false;
  const auto head = random_model(untied, 8);
  llmc::load_llmc_gpt2(*head, dir.file("padded.bin"));
  CHECK(values(param(*head, "lm_head.weight")) == values(param(*src, "wte.weight")));
  CHECK(logits_of(*head) == logits_of(*src));
  CHECK_THROWS_WITH_AS(llmc::save_llmc_gpt2(*head, dir.file("untied.bin")),
                       doctest::Contains("the model's lm head is untied"), Error);
  CHECK_FALSE(fs::exists(dir.file("untied.bin")));
}

TEST_CASE("hostile llm.c model files are refused with the file and the field named") {
  const TempDir dir("llmc_model");
  const auto src = random_model(kTiny, 9);
  const std::vector<uint8_t> good = independent_file(*src, false);
  const std::string f = dir.file("bad.bin");
  auto refused = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    write_bytes(f, bytes);
    for (const bool from_path : {true, false}) {
      try {
        if (from_path) {
          llmc::read_gpt2_model(f);
        } else {
          llmc::parse_gpt2_model(bytes, f);
        }
        FAIL("accepted a model file with " << what);
      } catch (const Error& e) {
        const std::string m = e.what();
        CHECK_MESSAGE(m.find("read_gpt2_model: " + f) != std::string::npos, m);
        CHECK_MESSAGE(m.find(what) != std::string::npos, m);
      }
    }
  };
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 100), "the header is truncated (100 bytes, expected 1024)");
  refused({}, "the header is truncated (0 bytes, expected 1024)");
  refused(with_header_int(good, 0, 20240520),
          "magic is 20240520, expected 20240326 (an llm.c GPT-2 model file); 20240520 is an llm.c token shard's");
  refused(with_header_int(good, 1, 4), "version is 4, expected 3 (f32) or 5 (bf16)");
  refused(with_header_int(good, 1, 1), "version is 1, expected 3 (f32) or 5 (bf16)");
  refused(with_header_int(good, 2, 0), "max_seq_len is 0, expected > 0");
  refused(with_header_int(good, 3, 0), "vocab_size is 0, expected > 0");
  refused(with_header_int(good, 4, -2), "num_layers is -2, expected > 0");
  refused(with_header_int(good, 5, 0), "num_heads is 0, expected > 0");
  refused(with_header_int(good, 6, -8), "channels is -8, expected > 0");
  refused(with_header_int(good, 7, 0), "padded_vocab_size is 0, expected > 0");
  refused(with_header_int(good, 7, 10), "padded_vocab_size 10 is less than vocab_size 11");
  refused(with_header_int(good, 5, 3), "channels 8 is not a multiple of num_heads 3");
  // wte and wpe of one element each, but qkvw [2^20, 3 x 2^20, 2^20] floats: more bytes than int64 counts.
  std::vector<uint8_t> huge = with_header_int(with_header_int(with_header_int(good, 2, 1), 3, 1), 7, 1);
  huge = with_header_int(with_header_int(with_header_int(huge, 4, 1 << 20), 5, 1), 6, 1 << 20);
  refused(huge, "the sizes overflow: qkvw [1048576, 3145728, 1048576] has more bytes than int64 counts");
  // Sizes that fit int64 (qkvw is 2 x 3 x 2^40 floats) but not this file.
  refused(with_header_int(with_header_int(good, 6, 1 << 20), 5, 1), "but 7808 bytes do (the file is truncated)");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1),
          "the header says 7808 bytes of f32 parameters follow it, but 7807 bytes do (the file is truncated)");
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  refused(longer, "but 7809 bytes do (the file is longer than its header says)");
  refused(with_header_int(good, 1, 5), "the header says 3904 bytes of bf16 parameters follow it, but 7808 bytes do");
  CHECK_THROWS_WITH_AS(llmc::read_gpt2_model(dir.file("missing.bin")),
                       doctest::Contains("missing.bin: cannot be opened"), Error);

  // A well-formed file of another model: the field that differs is named.
  write_bytes(f, good);
  GPTConfig one_layer = kTiny;
  one_layer.n_layer = 1;
  Generator gen(10);
  GPT other(one_layer, gen);
  CHECK_THROWS_WITH_AS(llmc::load_llmc_gpt2(other, f),
                       ("load_gpt2_model: " + f + ": the file's num_layers is 2, but the model's n_layer is 1").c_str(),
                       Error);
  GPTConfig wider_vocab = kTiny;
  wider_vocab.vocab_size = 12;
  GPT wider(wider_vocab, gen);
  CHECK_THROWS_WITH_AS(llmc::load_llmc_gpt2(wider, f),
                       doctest::Contains("the file's vocab_size is 11, but the model's vocab_size is 12"), Error);
}
