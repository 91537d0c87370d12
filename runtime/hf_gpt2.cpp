// transformers' GPT-2 layout: each key named against the model's parameter it is, transposed where
// transformers' Conv1D stores [in, out], and every key of a file either used, skipped as a mask buffer,
// or refused.
#include "runtime/hf_gpt2.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels/error.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

constexpr const char* kPrefix = "transformer.";
constexpr const char* kHead = "lm_head.weight";

// A block's tensors: transformers' name, nn::GPT's, and whether it is a Conv1D weight ([in, out]).
struct LayerKey {
  const char* hf;
  const char* ours;
  bool conv1d;
};
constexpr LayerKey kLayerKeys[] = {{"ln_1.weight", "ln_1.weight", false},
                                   {"ln_1.bias", "ln_1.bias", false},
                                   {"attn.c_attn.weight", "attn.qkv.weight", true},
                                   {"attn.c_attn.bias", "attn.qkv.bias", false},
                                   {"attn.c_proj.weight", "attn.proj.weight", true},
                                   {"attn.c_proj.bias", "attn.proj.bias", false},
                                   {"ln_2.weight", "ln_2.weight", false},
                                   {"ln_2.bias", "ln_2.bias", false},
                                   {"mlp.c_fc.weight", "mlp.fc.weight", true},
                                   {"mlp.c_fc.bias", "mlp.fc.bias", false},
                                   {"mlp.c_proj.weight", "mlp.proj.weight", true},
                                   {"mlp.c_proj.bias", "mlp.proj.bias", false}};

struct KeyPair {
  std::string hf, ours;
  bool conv1d;
};

// Every tensor of the layout but wte (whose rows differ when padded) and the head, in GPT2Model's order.
std::vector<KeyPair> body_keys(int64_t n_layer) {
  std::vector<KeyPair> keys{{"wpe.weight", "wpe.weight", false}};
  for (int64_t l = 0; l < n_layer; ++l)
    for (const LayerKey& k : kLayerKeys)
      keys.push_back({fmt::format("h.{}.{}", l, k.hf), fmt::format("blocks.{}.{}", l, k.ours), k.conv1d});
  keys.push_back({"ln_f.weight", "ln_f.weight", false});
  keys.push_back({"ln_f.bias", "ln_f.bias", false});
  return keys;
}

Shape reversed(Shape s) {
  std::reverse(s.begin(), s.end());
  return s;
}

// The layer number of "h.N.rest" (after the prefix), or nullopt.
std::optional<int64_t> layer_of(const std::string& key, std::string* rest = nullptr) {
  if (key.rfind("h.", 0) != 0) return std::nullopt;
  const size_t dot = key.find('.', 2);
  if (dot == std::string::npos || dot == 2 || dot > 12) return std::nullopt;
  int64_t n = 0;
  for (size_t i = 2; i < dot; ++i) {
    if (key[i] < '0' || key[i] > '9') return std::nullopt;
    n = 10 * n + (key[i] - '0');
  }
  if (rest) *rest = key.substr(dot + 1);
  return n;
}

// The attention's causal mask buffers, which older transformers versions save and the model does not need.
bool is_mask_buffer(const std::string& key) {
  std::string rest;
  return layer_of(key, &rest) && (rest == "attn.bias" || rest == "attn.masked_bias");
}

// "transformer." when the file's keys carry it (GPT2LMHeadModel), else "" (GPT2Model).
template <class Has>
std::string prefix_of(Has&& has) {
  return has(std::string(kPrefix) + "wte.weight") ? kPrefix : "";
}

bool same_values(const Tensor& a, const Tensor& b) {
  const Tensor x = nograd::contiguous(a), y = nograd::contiguous(b);
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

std::string listed(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 6; ++i) out += (i ? ", " : "") + keys[i];
  if (keys.size() > 6) out += fmt::format(", ... ({} in all)", keys.size());
  return out;
}

}  // namespace

void load_hf_gpt2(nn::GPT& model, const SafetensorsContents& contents, const std::string& name) {
  const std::string where = "load_hf_gpt2: " + name;
  const nn::GPTConfig& c = model.config();
  std::map<std::string, Tensor> file;
  for (const auto& [key, t] : contents.tensors) file.emplace(key, t);
  const std::string prefix = prefix_of([&](const std::string& k) { return file.count(k) > 0; });
  std::set<std::string> used;
  auto take = [&](const std::string& key, const Shape& shape) -> const Tensor& {
    const std::string full = key == kHead ? key : prefix + key;
    const auto it = file.find(full);
    if (it == file.end())
      throw Error(fmt::format("{}: no tensor '{}' (a GPT-2 with n_layer {} has it)", where, full, c.n_layer));
    if (it->second.shape() != shape)
      throw Error(fmt::format(
          "{}: '{}' is {}, expected {} for the model's config (vocab_size {}, block_size {}, "
          "n_embd {})",
          where, full, shape_str(it->second.shape()), shape_str(shape), c.vocab_size, c.block_size, c.n_embd));
    used.insert(full);
    return it->second;
  };

  nn::StateDict own = model.state_dict();
  std::map<std::string, Shape> own_shapes;
  for (const auto& [key, t] : own) own_shapes.emplace(key, t.shape());
  nn::StateDict state;
  const Tensor& wte = take("wte.weight", {c.vocab_size, c.n_embd});
  if (c.embedding_rows() == c.vocab_size) {
    state.emplace_back("wte.weight", wte);
  } else {
    const Tensor table = zeros({c.embedding_rows(), c.n_embd}, wte.dtype());
    nograd::copy_(nograd::narrow(table, 0, 0, c.vocab_size), wte);
    state.emplace_back("wte.weight", table);
  }
  for (const KeyPair& k : body_keys(c.n_layer)) {
    const Shape& ours = own_shapes.at(k.ours);
    const Tensor& t = take(k.hf, k.conv1d ? reversed(ours) : ours);
    state.emplace_back(k.ours, k.conv1d ? nograd::transpose(t, 0, 1) : t);
  }
  if (file.count(kHead)) {
    const Tensor& head = take(kHead, {c.vocab_size, c.n_embd});
    if (c.tie_weights && !same_values(head, wte))
      throw Error(
          fmt::format("{}: lm_head.weight differs from {}wte.weight: the file's head is untied, the model's "
                      "is tied (GPTConfig::tie_weights)",
                      where, prefix));
    if (!c.tie_weights) state.emplace_back("lm_head.weight", head);
  } else if (!c.tie_weights) {
    state.emplace_back("lm_head.weight", wte);
  }

  std::vector<std::string> unexpected;
  for (const auto& [key, t] : file) {
    const bool mask = key.rfind(prefix, 0) == 0 && is_mask_buffer(key.substr(prefix.size()));
    if (!used.count(key) && !mask) unexpected.push_back(key);
  }
  if (!unexpected.empty())
    throw Error(
        fmt::format("{}: tensors a GPT-2 with n_layer {} has no place for: {}", where, c.n_layer, listed(unexpected)));
  model.load_state_dict(state, true);
}

void load_hf_gpt2(nn::GPT& model, const std::string& path) { load_hf_gpt2(model, load_safetensors(path), path); }

NamedTensors hf_gpt2_tensors(const nn::GPT& model) {
  const nn::GPTConfig& c = model.config();
  if (!c.tie_weights)
    throw Error(
        "hf_gpt2_tensors: the model's lm head is untied (GPTConfig::tie_weights is false), but transformers' "
        "GPT-2 ties it to wte");
  std::map<std::string, Tensor> params;
  for (const auto& [key, t] : model.state_dict()) params.emplace(key, t);
  auto host_copy = [](const Tensor& t) { return nograd::clone(nograd::to_device(t, Device::cpu())); };
  NamedTensors out;
  out.emplace_back("wte.weight", host_copy(nograd::narrow(params.at("wte.weight"), 0, 0, c.vocab_size)));
  for (const KeyPair& k : body_keys(c.n_layer)) {
    const Tensor& p = params.at(k.ours);
    out.emplace_back(k.hf, host_copy(k.conv1d ? nograd::transpose(p, 0, 1) : p));
  }
  return out;
}

void save_hf_gpt2(const nn::GPT& model, const std::string& path) {
  save_safetensors(path, hf_gpt2_tensors(model), {{"format", "pt"}});
}

nn::GPTConfig hf_gpt2_config(const SafetensorsHeader& header, const std::string& name, int64_t n_head) {
  const std::string where = "hf_gpt2_config: " + name;
  std::map<std::string, Shape> shapes;
  for (const SafetensorsEntry& e : header.tensors) shapes.emplace(e.name, e.shape);
  const std::string prefix = prefix_of([&](const std::string& k) { return shapes.count(k) > 0; });
  auto shape_of = [&](const std::string& key) {
    const auto it = shapes.find(prefix + key);
    if (it == shapes.end() || it->second.size() != 2)
      throw Error(fmt::format("{}: {} '{}{}', expected a 2-d tensor in a GPT-2 file", where,
                              it == shapes.end() ? "no tensor" : "a " + shape_str(it->second) + " tensor", prefix,
                              key));
    return it->second;
  };
  const Shape wte = shape_of("wte.weight"), wpe = shape_of("wpe.weight");
  if (wpe[1] != wte[1])
    throw Error(
        fmt::format("{}: wte.weight {} and wpe.weight {} differ in width", where, shape_str(wte), shape_str(wpe)));
  int64_t n_layer = 0;
  for (const auto& [key, shape] : shapes)
    if (key.rfind(prefix, 0) == 0)
      if (const std::optional<int64_t> l = layer_of(key.substr(prefix.size()))) n_layer = std::max(n_layer, *l + 1);
  if (n_layer == 0) throw Error(fmt::format("{}: no h.N.* tensors, expected GPT-2's blocks", where));
  if (n_head <= 0 || wte[1] % n_head != 0)
    throw Error(fmt::format("{}: n_head {} does not divide the width {}", where, n_head, wte[1]));
  return nn::GPTConfig{.vocab_size = wte[0],
                       .block_size = wpe[0],
                       .n_layer = n_layer,
                       .n_head = n_head,
                       .n_embd = wte[1],
                       .dropout = 0.0,
                       .tie_weights = true,
                       .padded_vocab_size = 0};
}

}  // namespace accel
