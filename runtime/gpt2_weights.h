// GPT-2 weights from a file in either format people have, told apart by content rather than by name:
// llm.c's model file (runtime/llmc/gpt2_model_weights.h) or transformers' model.safetensors
// (runtime/hf_gpt2.h). What a trainer's --init_from FILE reads.
#pragma once

#include <string>

#include "nn/gpt.h"

namespace accel {

enum class Gpt2WeightsFormat { llmc, hf_safetensors };

// By the first bytes: llm.c's magic 20240326, or a safetensors header (an 8-byte little-endian length
// then '{'). Throws naming the file for anything else.
Gpt2WeightsFormat detect_gpt2_weights_format(const std::string& path);

// The model the file describes, to build before loading it. llm.c's header says everything; a
// safetensors file's shapes say all but n_head, which is read from the config.json transformers writes
// beside it, or else taken as n_embd / 64 (GPT-2's head size at every size).
nn::GPTConfig gpt2_config_of_file(const std::string& path);

// Loads the file's weights into model, whichever format it is in (see load_llmc_gpt2, load_hf_gpt2).
void load_gpt2_weights(nn::GPT& model, const std::string& path);

}  // namespace accel
