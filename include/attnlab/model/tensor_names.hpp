// How each weight of the parameter table (model.hpp's TensorSlot) is named and stored in the
// files attnlab reads and writes: one row per slot, walked by the Hugging Face reader and
// writer and the GGUF reader and writer (llama.cpp keeps such a table too, LLM_TENSOR_NAMES).
// A family whose tensors are named differently adds a column or a row here, not a reader.
//
// In a name, `#` is the block's number, and braces list the tensors one slot is split into,
// in the order the slot holds them side by side: "blk.#.attn_{q,k,v}.weight" is blk.3.attn_q,
// blk.3.attn_k and blk.3.attn_v for block 3, which attnlab holds as one [d × qkv] matrix.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/model.hpp"

namespace attnlab {

struct TensorNames {
  TensorSlot slot;
  std::string_view attnlab;      // attnlab's own name, which is GPT-2's in its checkpoints (parameter_tensors)
  std::string_view hf;           // transformers' name in a Llama-style folder (Llama, Mistral, Qwen2/3, Gemma 3)
  std::string_view hf_sandwich;  // ... where it differs in a block with four norms (Gemma 3)
  std::string_view gguf;         // llama.cpp's name in a GGUF file
  std::string_view gguf_gpt2;    // ... where it differs for GPT-2 (its q|k|v fused, its MLP ungated)
};
const std::vector<TensorNames>& tensor_names();
const TensorNames& tensor_names(TensorSlot slot);

// The files attnlab reads and writes; kHuggingFace is GPT-2's or a Llama-style folder as the
// model's family says.
enum class WeightFormat { kHuggingFace, kGguf };

// One tensor in a file, the whole of a slot or one of its parts.
struct StoredTensor {
  std::string name;              // with its block's number: "model.layers.3.self_attn.k_proj.weight"
  std::size_t width = 0;         // its share of the slot's last dimension (all of it when whole)
  std::size_t first = 0;         // where that share starts
  std::size_t rotary_heads = 0;  // q's and k's heads, whose rows llama.cpp's `llama` files reorder; else 0
};

// The tensors `t` is stored as in `format`, for a model of `config`; InputError when the
// format has no name for it (a slot of a family that format does not hold).
std::vector<StoredTensor> stored_tensors(const ParameterTensor& t, const ModelConfig& config, WeightFormat format);

// Whether the slot is stored with a row per input token or position as attnlab holds it
// (the embeddings, the LM head), rather than as a linear layer's weight, which every format
// but GPT-2's Conv1D stores transposed (nn.Linear's [out, in]).
bool stored_as_rows(TensorSlot slot);

}  // namespace attnlab
