// llm.c's model file into and out of an nn::GPT: the config compared field by field, each llm.c tensor
// split into (or stacked from) the blocks' parameters by name.
#include "runtime/llmc/gpt2_model_weights.h"

#include <fmt/format.h>

#include <map>

#include "kernels/error.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel::llmc {

namespace {

// llm.c's per-layer tensors and the block parameter each layer's slice is.
constexpr std::pair<const char*, const char*> kLayerTensors[] = {
    {"ln1w", "ln_1.weight"},          {"ln1b", "ln_1.bias"},
    {"qkvw", "attn.qkv.weight"},      {"qkvb", "attn.qkv.bias"},
    {"attprojw", "attn.proj.weight"}, {"attprojb", "attn.proj.bias"},
    {"ln2w", "ln_2.weight"},          {"ln2b", "ln_2.bias"},
    {"fcw", "mlp.fc.weight"},         {"fcb", "mlp.fc.bias"},
    {"fcprojw", "mlp.proj.weight"},   {"fcprojb", "mlp.proj.bias"}};

std::string block_param(int64_t layer, const char* leaf) { return fmt::format("blocks.{}.{}", layer, leaf); }

void check_config_matches(const nn::GPTConfig& c, const Gpt2ModelHeader& h, const std::string& where) {
  const struct {
    const char* file_field;
    int64_t file_value;
    const char* model_field;
    int64_t model_value;
  } pairs[] = {{"max_seq_len", h.max_seq_len, "block_size", c.block_size},
               {"vocab_size", h.vocab_size, "vocab_size", c.vocab_size},
               {"num_layers", h.num_layers, "n_layer", c.n_layer},
               {"num_heads", h.num_heads, "n_head", c.n_head},
               {"channels", h.channels, "n_embd", c.n_embd}};
  for (const auto& p : pairs)
    if (p.file_value != p.model_value)
      throw Error(fmt::format("{}: the file's {} is {}, but the model's {} is {}", where, p.file_field, p.file_value,
                              p.model_field, p.model_value));
}

// The file's tensors must have the header's shapes (a Gpt2ModelFile built by hand need not).
void check_file_shapes(const Gpt2ModelFile& file, const std::string& where) {
  for (const auto& [key, shape] : file.header.tensor_shapes())
    if (const Tensor& t = file.at(key); t.shape() != shape)
      throw Error(
          fmt::format("{}: {} is {}, but the header implies {}", where, key, shape_str(t.shape()), shape_str(shape)));
}

// A host tensor of dtype owning its values (never a model parameter's own storage).
Tensor owned_host(const Tensor& t, DType dtype) {
  Tensor out = nograd::contiguous(nograd::to_dtype(nograd::to_device(t, Device::cpu()), dtype));
  return out.storage() == t.storage() ? nograd::clone(out) : out;
}

}  // namespace

nn::GPTConfig gpt_config_of(const Gpt2ModelHeader& header) {
  return nn::GPTConfig{
      .vocab_size = header.vocab_size,
      .block_size = header.max_seq_len,
      .n_layer = header.num_layers,
      .n_head = header.num_heads,
      .n_embd = header.channels,
      .dropout = 0.0,
      .tie_weights = true,
      .padded_vocab_size = header.padded_vocab_size > header.vocab_size ? header.padded_vocab_size : 0};
}

void load_gpt2_model(nn::GPT& model, const Gpt2ModelFile& file, const std::string& name) {
  const std::string where = "load_gpt2_model: " + name;
  const nn::GPTConfig& c = model.config();
  check_config_matches(c, file.header, where);
  check_file_shapes(file, where);
  const Tensor& wte = file.at("wte");
  const Tensor real_rows = nograd::narrow(wte, 0, 0, c.vocab_size);
  nn::StateDict state;
  if (c.embedding_rows() == wte.size(0)) {
    state.emplace_back("wte.weight", wte);
  } else {
    const Tensor table = zeros({c.embedding_rows(), c.n_embd}, wte.dtype());
    nograd::copy_(nograd::narrow(table, 0, 0, c.vocab_size), real_rows);
    state.emplace_back("wte.weight", table);
  }
  state.emplace_back("wpe.weight", file.at("wpe"));
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const auto& [key, leaf] : kLayerTensors)
      state.emplace_back(block_param(l, leaf), nograd::select(file.at(key), 0, l));
  state.emplace_back("ln_f.weight", file.at("lnfw"));
  state.emplace_back("ln_f.bias", file.at("lnfb"));
  if (!c.tie_weights) state.emplace_back("lm_head.weight", real_rows);
  model.load_state_dict(state, true);
}

Gpt2ModelFile gpt2_model_file_of(const nn::GPT& model, DType dtype) {
  const nn::GPTConfig& c = model.config();
  if (!c.tie_weights)
    throw Error(
        "gpt2_model_file_of: the model's lm head is untied (GPTConfig::tie_weights is false), but llm.c's "
        "files hold GPT-2's tied head only");
  Gpt2ModelFile file;
  file.header = Gpt2ModelHeader{.dtype = dtype,
                                .max_seq_len = c.block_size,
                                .vocab_size = c.vocab_size,
                                .num_layers = c.n_layer,
                                .num_heads = c.n_head,
                                .channels = c.n_embd,
                                .padded_vocab_size = c.embedding_rows()};
  (void)file.header.version();  // throws for a dtype other than f32 and bf16
  std::map<std::string, Tensor> params;
  for (const auto& [key, t] : model.state_dict()) params.emplace(key, t);
  auto param = [&](const std::string& key) -> const Tensor& {
    const auto it = params.find(key);
    if (it == params.end()) throw Error(fmt::format("gpt2_model_file_of: the model has no parameter '{}'", key));
    return it->second;
  };
  file.tensors.emplace_back("wte", owned_host(param("wte.weight"), dtype));
  file.tensors.emplace_back("wpe", owned_host(param("wpe.weight"), dtype));
  for (const auto& [key, leaf] : kLayerTensors) {
    std::vector<Tensor> layers;
    for (int64_t l = 0; l < c.n_layer; ++l)
      layers.push_back(nograd::to_device(param(block_param(l, leaf)), Device::cpu()));
    file.tensors.emplace_back(key, owned_host(nograd::stack(layers, 0), dtype));
  }
  file.tensors.emplace_back("lnfw", owned_host(param("ln_f.weight"), dtype));
  file.tensors.emplace_back("lnfb", owned_host(param("ln_f.bias"), dtype));
  return file;
}

void load_llmc_gpt2(nn::GPT& model, const std::string& path) { load_gpt2_model(model, read_gpt2_model(path), path); }

void save_llmc_gpt2(const nn::GPT& model, const std::string& path, DType dtype) {
  write_gpt2_model(path, gpt2_model_file_of(model, dtype));
}

}  // namespace accel::llmc
