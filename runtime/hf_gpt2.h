// Hugging Face transformers' GPT-2 weights (model.safetensors as GPT2Model or GPT2LMHeadModel saves it)
// into and out of an nn::GPT. transformers' keys are wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj,
// ln_2, mlp.c_fc, mlp.c_proj}, ln_f, optionally under "transformer."; its Conv1D weights are [in, out],
// the transpose of nn::Linear's [out, in]; its wte is never padded.
#pragma once

#include <string>

#include "nn/gpt.h"
#include "runtime/safetensors.h"

namespace accel {

// Copies the file's weights into model (transposing the Conv1D weights, cast to the model's dtype, onto its
// device); a padded model's extra wte rows are zeroed. The attention mask buffers (h.N.attn.bias,
// h.N.attn.masked_bias) are skipped. An lm_head.weight in the file must equal wte.weight when the model
// is tied, and is the head of an untied one; without it, an untied head gets wte. Throws naming the file
// (name) and the key for a tensor that is missing, mis-shaped, or one the model has no place for.
void load_hf_gpt2(nn::GPT& model, const SafetensorsContents& contents, const std::string& name);
void load_hf_gpt2(nn::GPT& model, const std::string& path);

// model's weights under transformers' GPT2Model keys (no prefix, Conv1D layout, wte's real rows), in the
// model's dtype, on the host; the head must be tied, as GPT-2's is.
NamedTensors hf_gpt2_tensors(const nn::GPT& model);
// Those tensors as a safetensors file with {"format": "pt"}, the metadata transformers asks for.
void save_hf_gpt2(const nn::GPT& model, const std::string& path);

// The model a file's shapes describe: vocab and channels from wte, block_size from wpe, n_layer from the
// h.N keys; tied and unpadded. n_head is not in the weights (config.json holds it), so it is given.
nn::GPTConfig hf_gpt2_config(const SafetensorsHeader& header, const std::string& name, int64_t n_head);

}  // namespace accel
