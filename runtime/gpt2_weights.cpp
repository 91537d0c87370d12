// Telling the two GPT-2 weight formats apart by their first bytes, and dispatching to their readers.
#include "runtime/gpt2_weights.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/hf_gpt2.h"
#include "runtime/llmc/gpt2_model_weights.h"
#include "runtime/safetensors.h"

namespace accel {

namespace {

// GPT-2's head size in all four released sizes (768/12, 1024/16, 1280/20, 1600/25).
constexpr int64_t kGpt2HeadSize = 64;

// n_head from the config.json next to a safetensors file; the fields it shares with the weights must agree.
int64_t hf_n_head(const std::string& path, const nn::GPTConfig& from_shapes) {
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "config.json";
  if (!std::filesystem::exists(config)) {
    if (from_shapes.n_embd % kGpt2HeadSize != 0)
      throw Error(
          fmt::format("gpt2_config_of_file: {}: n_embd {} is not a multiple of GPT-2's head size 64, and no "
                      "{} gives n_head",
                      path, from_shapes.n_embd, config.string()));
    return from_shapes.n_embd / kGpt2HeadSize;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::ifstream(config));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("gpt2_config_of_file: {}: not JSON: {}", config.string(), e.what()));
  }
  if (!j.is_object() || !j.contains("n_head") || !j["n_head"].is_number_integer())
    throw Error(
        fmt::format("gpt2_config_of_file: {}: no integer n_head, as transformers' GPT2Config has", config.string()));
  const struct {
    const char* key;
    int64_t from_shapes;
  } shared[] = {{"n_embd", from_shapes.n_embd},
                {"n_layer", from_shapes.n_layer},
                {"n_positions", from_shapes.block_size},
                {"vocab_size", from_shapes.vocab_size}};
  for (const auto& f : shared)
    if (j.contains(f.key) && (!j[f.key].is_number_integer() || j[f.key].get<int64_t>() != f.from_shapes))
      throw Error(fmt::format("gpt2_config_of_file: {}: {} is {}, but {}'s shapes say {}", config.string(), f.key,
                              j[f.key].dump(), path, f.from_shapes));
  return j["n_head"].get<int64_t>();
}

}  // namespace

Gpt2WeightsFormat detect_gpt2_weights_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path))
    throw Error(fmt::format("load_gpt2_weights: {}: cannot be opened as a file", path));
  uint8_t head[9] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const size_t got = static_cast<size_t>(in.gcount());
  int32_t magic = 0;
  uint64_t header_length = 0;
  std::memcpy(&magic, head, 4);
  std::memcpy(&header_length, head, 8);
  if (got >= 4 && magic == llmc::kModelFileMagic) return Gpt2WeightsFormat::llmc;
  if (got == 9 && head[8] == '{' && header_length <= kSafetensorsMaxHeaderBytes)
    return Gpt2WeightsFormat::hf_safetensors;
  const std::string hint = got >= 4 && magic == 20240520 ? " (it is an llm.c token shard, magic 20240520)" : "";
  throw Error(
      fmt::format("load_gpt2_weights: {}: neither an llm.c GPT-2 model file (magic {}) nor a safetensors file "
                  "(an 8-byte header length, then '{{'){}",
                  path, llmc::kModelFileMagic, hint));
}

nn::GPTConfig gpt2_config_of_file(const std::string& path) {
  if (detect_gpt2_weights_format(path) == Gpt2WeightsFormat::llmc) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> header(llmc::kModelFileHeaderBytes);
    in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()));
    header.resize(static_cast<size_t>(in.gcount()));
    return llmc::gpt_config_of(llmc::parse_gpt2_model_header(header, std::filesystem::file_size(path), path));
  }
  const SafetensorsHeader header = load_safetensors_header(path);
  nn::GPTConfig config = hf_gpt2_config(header, path, 1);
  config.n_head = hf_n_head(path, config);
  return hf_gpt2_config(header, path, config.n_head);  // checks that n_head divides the width
}

void load_gpt2_weights(nn::GPT& model, const std::string& path) {
  if (detect_gpt2_weights_format(path) == Gpt2WeightsFormat::llmc)
    llmc::load_llmc_gpt2(model, path);
  else
    load_hf_gpt2(model, path);
}

}  // namespace accel
