// Model shapes from published configurations: what a KV cache and a weights file cost.
//
// Each preset is copied from the model's config.json on the Hugging Face hub (the field
// names there are given beside each member) and its parameter count is the exact sum over
// that checkpoint's tensors (embeddings, attention, MLP, norms, biases; an untied output
// head counted once more).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab {

struct ModelShape {
  std::string name;              // "llama-3-8b"
  std::string source;            // the checkpoint the numbers come from
  std::uint64_t layers = 0;      // L    num_hidden_layers / n_layer
  std::uint64_t d_model = 0;     //      hidden_size / n_embd
  std::uint64_t heads = 0;       // H    num_attention_heads / n_head
  std::uint64_t kv_heads = 0;    // H_kv num_key_value_heads (= H without grouped-query attention)
  std::uint64_t head_dim = 0;    // d_head = d_k = d_v per head (hidden_size / H unless stated)
  std::uint64_t parameters = 0;  // every weight of the checkpoint (0 when unknown)
  std::string note;              // what the plain formula does not capture, or ""
};

// The built-in presets: gpt2, gpt2-xl, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b,
// qwen2.5-7b, gemma-2-9b.
const std::vector<ModelShape>& model_presets();

// The preset called `name`. Throws InputError naming `field` and listing the known names.
const ModelShape& find_model(std::string_view name, std::string_view field);

// "gpt2, gpt2-xl, ..." for messages and help.
std::string model_names();

}  // namespace attnlab
