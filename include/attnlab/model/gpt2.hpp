// GPT-2 checkpoints in Hugging Face's layout, and the model they hold.
//
// A checkpoint directory has config.json (n_layer, n_head, n_embd, n_positions,
// vocab_size, layer_norm_epsilon, activation_function) and model.safetensors; vocab.json
// and merges.txt (the tokenizer, attnlab/model/bpe.hpp) sit beside them. Tensor names are
// taken with or without the "transformer." prefix; the attn.bias / attn.masked_bias buffers
// are ignored; the LM head is tied to wte. Conv1D weights are stored [in, out], so every
// linear layer is y = x · W + b in the row-vector convention attnlab uses throughout, and
// c_attn's 3·d_model columns are Q | K | V, each split into heads of d_model / n_head.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "attnlab/core/dtype.hpp"

namespace attnlab {

struct Gpt2Config {
  std::size_t n_layer = 0, n_head = 0, n_embd = 0, n_positions = 0, vocab_size = 0;
  std::size_t n_inner = 0;  // the MLP's width; 4 · n_embd when the config says null
  double layer_norm_epsilon = 1e-5;

  std::size_t head_dim() const { return n_embd / n_head; }
  std::size_t parameters() const;  // every weight and bias, the tied LM head counted once
};

// Limits a config must respect before anything is allocated (a checkpoint is untrusted).
inline constexpr std::size_t kMaxCheckpointLayers = 256, kMaxCheckpointHeads = 256, kMaxModelWidth = 16384,
                             kMaxModelPositions = 1 << 20, kMaxModelVocabulary = 1 << 20;
inline constexpr std::size_t kMaxModelParameters = 16'000'000'000;

// Reads and checks config.json; InputError naming the file and the key otherwise.
Gpt2Config read_gpt2_config(const std::string& path);

// One block's weights, f32, row-vector convention (shapes in comments).
struct Gpt2Block {
  std::vector<float> ln_1_weight, ln_1_bias;            // [d]
  std::vector<float> attn_weight, attn_bias;            // [d × 3d] (Q | K | V), [3d]
  std::vector<float> attn_proj_weight, attn_proj_bias;  // [d × d], [d]
  std::vector<float> ln_2_weight, ln_2_bias;            // [d]
  std::vector<float> mlp_fc_weight, mlp_fc_bias;        // [d × n_inner], [n_inner]
  std::vector<float> mlp_proj_weight, mlp_proj_bias;    // [n_inner × d], [d]
};

struct Gpt2Model {
  Gpt2Config config;
  std::vector<float> wte;  // [vocab_size × d] token embeddings, also the LM head (tied)
  std::vector<float> wpe;  // [n_positions × d] learned position embeddings
  std::vector<Gpt2Block> blocks;
  std::vector<float> ln_f_weight, ln_f_bias;  // [d]
  DType stored_dtype = DType::f32;            // how the file stored the weights (the largest tensor's dtype)
};

// Loads DIR/config.json and DIR/model.safetensors (weights widened to f32). A missing or
// misshapen tensor is refused by name.
Gpt2Model load_gpt2(const std::string& dir);

// Writes DIR/config.json and DIR/model.safetensors (names with the "transformer." prefix
// when `prefix`, tensors stored as `dtype`), a checkpoint any GPT-2 reader loads.
void save_gpt2(const std::string& dir, const Gpt2Model& model, DType dtype = DType::f32, bool prefix = true);

}  // namespace attnlab
