// GPT-2 weights between an nn::GPT and llm.c's model file (runtime/llmc/gpt2_model_file.h). llm.c's
// tensors are the blocks' parameters stacked over layers, in the same [out, in] layout, so each layer
// is a slice; wte is the tied head.
#pragma once

#include <string>

#include "nn/gpt.h"
#include "runtime/llmc/gpt2_model_file.h"

namespace accel::llmc {

// The model a header describes: GPT-2's tied head, padded to padded_vocab_size when it exceeds the vocab.
nn::GPTConfig gpt_config_of(const Gpt2ModelHeader& header);

// Copies the file's parameters into model (cast to its dtype, onto its device). The model needs the file's
// max_seq_len, vocab_size, num_layers, num_heads and channels, or this throws naming the field; its padding
// may differ, as the padded rows take part in nothing (the model's own padded rows are zeroed). An untied
// head gets wte's real rows. name is the file, for errors.
void load_gpt2_model(nn::GPT& model, const Gpt2ModelFile& file, const std::string& name);
// model's weights in llm.c's layout, of dtype f32 (version 3) or bf16 (version 5, rounded to nearest
// even); the head must be tied, the one head llm.c's file holds.
Gpt2ModelFile gpt2_model_file_of(const nn::GPT& model, DType dtype = DType::f32);

// read_gpt2_model then load_gpt2_model; gpt2_model_file_of then write_gpt2_model.
void load_llmc_gpt2(nn::GPT& model, const std::string& path);
void save_llmc_gpt2(const nn::GPT& model, const std::string& path, DType dtype = DType::f32);

}  // namespace accel::llmc
