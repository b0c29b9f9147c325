// The transformer attnlab runs, one for every family: a family-neutral config that says each
// choice (norm, positions, attention, MLP, head tying), and the weights as one parameter set.
//
// What differs between GPT-2, Llama 2/3, SmolLM2, Mistral, Qwen2/3 and Gemma 3 is data here:
//
//   family   norm                  positions           attention                         MLP
//   gpt2     LayerNorm (w, b)      learned (wpe)       H = H_kv, q/k/v/o biases          GELU, biases
//   llama    RMSNorm (w)           rotary, llama3 ×    H_kv ≤ H (grouped-query)          SwiGLU
//   mistral  RMSNorm               rotary              grouped-query, sliding window     SwiGLU
//   qwen2    RMSNorm               rotary              grouped-query, q/k/v biases       SwiGLU
//   qwen3    RMSNorm               rotary              grouped-query, QK-norm, head_dim  SwiGLU
//   gemma3   RMSNorm (1 + w), four rotary (local θ     multi-query, QK-norm, scale       GeGLU
//            per block             on window layers)   (query_pre_attn_scalar), windows
//
// Every linear layer is stored in the row-vector convention, y = x · W + b, W [in × out]:
// GPT-2's Conv1D weights are that already; a Hugging Face [out, in] nn.Linear weight is
// transposed when it is read. The attention's projections are one matrix,
// W_qkv = [W_Q | W_K | W_V] of d_model × (H + 2·H_kv)·head_dim: query head h is columns
// h·head_dim.., KV head g is columns H·head_dim + g·head_dim.. (keys) and
// (H + H_kv)·head_dim + g·head_dim.. (values). A gated MLP's W_fc is [W_gate | W_up].
// Rotary pairs are split halves (x_i, x_{i + rot/2}), as transformers' rotate_half pairs them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/model/bpe.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/tensor.hpp"

namespace attnlab {

enum class Family { gpt2, llama, mistral, qwen2, qwen3, gemma3 };
enum class NormKind { layer_norm, rms_norm };  // (x − mean)/σ · w + b, or x / rms(x) · w
enum class MlpKind { gelu, swiglu, geglu };    // GELU(x·W_fc), or act(x·W_gate) ⊙ (x·W_up), act SiLU / GELU
enum class RopeScaling { none, linear, llama3 };

const char* family_name(Family family);  // "gpt2", "llama", ... (the config's model_type)

struct RopeConfig {
  double theta = 10000.0;   // frequencies θ^(−2i/rot)
  double local_theta = 0;   // θ of the sliding-window layers, unscaled (Gemma 3); 0: they rotate as the others
  std::size_t rotated = 0;  // the rotated width of each head (0: all of head_dim)
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;                                   // linear and llama3: frequencies ÷ factor
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  std::size_t original_positions = 8192;                 // llama3: original_max_position_embeddings
  // Frequency i divided by divisors[i] instead of a scaling's formula: a GGUF file's
  // rope_freqs (how llama.cpp stores Llama 3's scaling); empty: none.
  std::vector<double> divisors;
};

struct ModelConfig {
  std::size_t n_layer = 0, n_head = 0, n_embd = 0, n_positions = 0, vocab_size = 0;
  std::size_t n_inner = 0;  // the MLP's width; 4 · n_embd when the config says null
  double layer_norm_epsilon = 1e-5;
  // Family choices; the defaults are GPT-2's.
  Family family = Family::gpt2;
  std::size_t n_kv_head = 0;   // H_kv; 0: n_head (full multi-head attention)
  std::size_t head_width = 0;  // head_dim when the family sets it apart from n_embd / n_head; 0: n_embd / n_head
  NormKind norm = NormKind::layer_norm;
  bool norm_plus_one = false;   // Gemma: the norm's weight is stored as w − 1 (x / rms · (1 + w))
  bool sandwich_norms = false;  // Gemma: the attention's and the MLP's outputs are normed again before the residual
  bool rotary = false;          // rotary positions instead of learned ones (wpe)
  RopeConfig rope;
  bool qkv_bias = true, out_bias = true, mlp_bias = true;  // GPT-2 has them all; Qwen2 only q/k/v
  bool qk_norm = false;                                    // Qwen3, Gemma 3: RMSNorm of each q and k head
  double query_scale = 0;                   // scores × this; 0: 1/√head_dim (Gemma 3: query_pre_attn_scalar^-½)
  std::vector<std::size_t> sliding_window;  // per layer: a query sees its last w keys (itself included); 0: all
  MlpKind mlp = MlpKind::gelu;
  bool tied = true;              // the unembedding is wte (else lm_head)
  double embedding_scale = 1.0;  // Gemma: √d_model
  int bos_id = -1;               // the token a text starts with, when the family adds one (-1: none)

  std::size_t head_dim() const { return head_width ? head_width : n_embd / n_head; }
  std::size_t kv_heads() const { return n_kv_head ? n_kv_head : n_head; }
  std::size_t kv_head_of(std::size_t head) const { return head / (n_head / kv_heads()); }  // the KV head it reads
  std::size_t qkv_width() const { return (n_head + 2 * kv_heads()) * head_dim(); }
  std::size_t attention_width() const { return n_head * head_dim(); }  // z = the heads' outputs side by side
  std::size_t fc_width() const { return mlp == MlpKind::gelu ? n_inner : 2 * n_inner; }
  std::size_t window(std::size_t layer) const { return layer < sliding_window.size() ? sliding_window[layer] : 0; }
  std::size_t parameters() const;  // every weight and bias (the parameter table's), a tied LM head counted once
};

// The config in one line, as every face prints it: "llama: 2 layers × 4 query heads sharing
// 2 KV heads (grouped-query), d_model 32, head_dim 8, RMSNorm, rotary θ 100 (llama3 × 8),
// SwiGLU MLP 64, separate LM head, 64 positions, vocabulary 48".
std::string describe(const ModelConfig& config);

// The config as JSON, the same keys in every face: family, n_layer, n_head, n_kv_head,
// n_embd, head_dim, n_inner, n_positions, vocab_size, norm, positions, rope_theta,
// rope_scaling, mlp, tied, sliding_window, parameters.
nlohmann::json config_json(const ModelConfig& config);

// Limits a config must respect before anything is allocated (a checkpoint is untrusted).
inline constexpr std::size_t kMaxCheckpointLayers = 256, kMaxCheckpointHeads = 256, kMaxModelWidth = 16384,
                             kMaxModelPositions = 1 << 20, kMaxModelVocabulary = 1 << 20;
inline constexpr std::size_t kMaxModelParameters = 16'000'000'000;

// Reads and checks config.json; InputError naming the file and the key otherwise.
ModelConfig read_gpt2_config(const std::string& path);

// A config.json already parsed, of any family (its "model_type"; none means GPT-2), checked
// against the limits above; InputError naming `path` and the key otherwise.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& path);

// One block's weights, row-vector convention (shapes in comments). Each is a Tensor: f32
// values the model owns, or a view of the checkpoint it was loaded from (attnlab/model/tensor.hpp).
struct Block {
  Tensor ln_1_weight, ln_1_bias;                       // [d] the attention's input norm (no bias for RMSNorm)
  Tensor attn_weight, attn_bias;                       // [d × qkv_width] (Q | K | V), [qkv_width] or empty
  Tensor attn_proj_weight, attn_proj_bias;             // [H·head_dim × d], [d] or empty
  Tensor ln_2_weight, ln_2_bias;                       // [d] the MLP's input norm
  Tensor mlp_fc_weight, mlp_fc_bias;                   // [d × fc_width] (gated: gate | up), [fc_width] or empty
  Tensor mlp_proj_weight, mlp_proj_bias;               // [n_inner × d], [d] or empty
  Tensor q_norm_weight, k_norm_weight;                 // [head_dim], QK-norm only
  Tensor post_attn_norm_weight, post_mlp_norm_weight;  // [d], sandwich norms only
};

struct Model {
  ModelConfig config;
  Tensor wte;  // [vocab_size × d] token embeddings, also the LM head when tied
  Tensor wpe;  // [n_positions × d] learned position embeddings (empty when rotary)
  std::vector<Block> blocks;
  Tensor ln_f_weight, ln_f_bias;         // [d]
  DType stored_dtype = DType::f32;       // how the file stored the weights (the largest tensor's dtype)
  GgmlType stored_type = GgmlType::f32;  // the same for a GGUF file, quantized types included
  Tensor lm_head;                        // [vocab_size × d] when not tied

  std::size_t weight_bytes() const;  // what the tensors take in memory, owned or mapped
  // What generating one token reads of the weights: every tensor whole, but one row of a
  // table a token looks up (the position embedding; the token embedding where the LM head is
  // a tensor of its own, and so read whole in its place).
  struct Read {
    std::size_t bytes = 0, values = 0;
  };
  Read read_per_token() const;
};

// The one parameter table: every weight tensor a model of this config has, in checkpoint
// order, with attnlab's own name for it (GPT-2's names, which every family shares: a family
// without a tensor, RMSNorm's bias say, has no entry), its shape as attnlab holds it (the
// row-vector convention above) and where it lives in a Model. Counting, flattening for the
// optimiser, the training code's views and every reader and writer of weight files walk
// this table; tensor_names.hpp says what each slot is called in each kind of file.
enum class TensorSlot {
  wte,
  wpe,
  ln_f_weight,
  ln_f_bias,
  lm_head,  // the model's
  ln_1_weight,
  ln_1_bias,
  attn_weight,
  attn_bias,
  attn_proj_weight,
  attn_proj_bias,
  q_norm_weight,
  k_norm_weight,
  post_attn_norm_weight,
  ln_2_weight,
  ln_2_bias,
  mlp_fc_weight,
  mlp_fc_bias,
  mlp_proj_weight,
  mlp_proj_bias,
  post_mlp_norm_weight  // each block's
};
inline constexpr std::size_t kNotInABlock = static_cast<std::size_t>(-1);
struct ParameterTensor {
  std::string name;  // "wte.weight", "h.3.attn.c_attn.weight", "h.3.attn.q_norm.weight", "lm_head.weight"
  std::vector<std::size_t> shape;
  std::size_t offset = 0, size = 0;  // in the flat parameter vector (tensor after tensor)
  TensorSlot slot = TensorSlot::wte;
  std::size_t layer = kNotInABlock;  // the block, for a block's tensor
};
std::vector<ParameterTensor> parameter_tensors(const ModelConfig& config);

// The tensor `t` names in `model`: a Model, or anything with its field names (the training
// code's views of a flat vector of parameters or gradients, whose fields are pointers).
template <class M>
auto& tensor_of(M& model, const ParameterTensor& t) {
  switch (t.slot) {
    case TensorSlot::wte: return model.wte;
    case TensorSlot::wpe: return model.wpe;
    case TensorSlot::ln_f_weight: return model.ln_f_weight;
    case TensorSlot::ln_f_bias: return model.ln_f_bias;
    case TensorSlot::lm_head: return model.lm_head;
    default: break;
  }
  auto& b = model.blocks[t.layer];
  switch (t.slot) {
    case TensorSlot::ln_1_weight: return b.ln_1_weight;
    case TensorSlot::ln_1_bias: return b.ln_1_bias;
    case TensorSlot::attn_weight: return b.attn_weight;
    case TensorSlot::attn_bias: return b.attn_bias;
    case TensorSlot::attn_proj_weight: return b.attn_proj_weight;
    case TensorSlot::attn_proj_bias: return b.attn_proj_bias;
    case TensorSlot::q_norm_weight: return b.q_norm_weight;
    case TensorSlot::k_norm_weight: return b.k_norm_weight;
    case TensorSlot::post_attn_norm_weight: return b.post_attn_norm_weight;
    case TensorSlot::ln_2_weight: return b.ln_2_weight;
    case TensorSlot::ln_2_bias: return b.ln_2_bias;
    case TensorSlot::mlp_fc_weight: return b.mlp_fc_weight;
    case TensorSlot::mlp_fc_bias: return b.mlp_fc_bias;
    case TensorSlot::mlp_proj_weight: return b.mlp_proj_weight;
    case TensorSlot::mlp_proj_bias: return b.mlp_proj_bias;
    default: return b.post_mlp_norm_weight;
  }
}

// Loads a model directory of any family (config.json's model_type says which): GPT-2's
// (load_gpt2) or a Hugging Face Llama-family folder (load_hf_family: model.safetensors or
// shards with model.safetensors.index.json), or a GGUF file (load_gguf). The weight files are mapped and the matrices
// read where they lie, in their dtype (norms and biases, small, are widened to f32); a
// missing or misshapen tensor, an unknown model_type or option is refused naming it.
struct LoadOptions {
  bool f32 = false;  // widen every 16-bit weight to f32 in memory (twice the memory; the same results)
};
// `spec` is a path or an Ollama name (resolve_model_path).
Model load_model(const std::string& spec, const LoadOptions& options = {});

// Every tensor of `model` that is a view of its checkpoint copied into f32 values it owns.
void widen_to_f32(Model& model);

// Whether `path` names a GGUF file (a regular file whose name ends in .gguf, or that starts
// with "GGUF": Ollama's blobs have no extension) rather than a model directory.
bool is_gguf_path(const std::string& path);

// Where a model named on the command line or in a request lies: "ollama:NAME[:TAG]" is the
// model blob that the manifest of Ollama's local store names ($OLLAMA_MODELS, else
// ~/.ollama/models; the tag "latest" when none is given); anything else is a path, returned
// as it is. InputError naming the model when the store, the tag or the blob is missing.
std::string resolve_model_path(const std::string& spec);

// What a model's weight files hold: a folder's model.safetensors, or every shard that
// model.safetensors.index.json names, or one GGUF file (bytes of all files, every tensor in
// file order).
struct CheckpointTensor {
  std::string name;
  GgmlType type = GgmlType::f32;   // F32, F16, BF16, or a GGUF file's quantized type
  std::vector<std::size_t> shape;  // row-major, as safetensors writes it ([out, in] for nn.Linear)
  std::size_t bytes = 0;
};
struct CheckpointSummary {
  std::string format;        // "safetensors", "GGUF v3"
  std::string architecture;  // a GGUF file's general.architecture ("llama"); empty for a folder
  std::size_t files = 0, bytes = 0;
  std::vector<CheckpointTensor> tensors;
};
CheckpointSummary checkpoint_summary(const std::string& path);
CheckpointSummary gguf_summary(const std::string& path);
Model load_gpt2(const std::string& dir);
Model load_hf_family(const std::string& dir);
// A GGUF file of architecture llama, qwen2, qwen3, gemma3 or gpt2 (Mistral's is llama), its weights viewed in their
// types, and the tokenizer its metadata carries (nothing when it carries none).
Model load_gguf(const std::string& path, std::optional<BpeTokenizer>* tokenizer = nullptr);

// Writes DIR/config.json and DIR/model.safetensors (names with the "transformer." prefix
// when `prefix`, tensors stored as `dtype`), a checkpoint any GPT-2 reader loads.
void save_gpt2(const std::string& dir, const Model& model, DType dtype = DType::f32, bool prefix = true);

// Writes a Llama-family model (Family::llama: RMSNorm, rotary, no QK-norm or sandwich
// norms) as transformers writes one: config.json (model_type "llama") and
// model.safetensors with the names and [out, in] weights load_hf_family reads.
void save_hf_family(const std::string& dir, const Model& model, DType dtype = DType::f32);

// Writes a GPT-2, Llama, Qwen2 or Qwen3 model as the GGUF file llama.cpp's converter would
// write (src/model/formats/gguf_write.cpp says how): the matrices as `type` (F32, F16 or Q8_0; a
// matrix whose rows are not whole Q8_0 blocks as F16), norms and biases as F32, and the
// tokenizer of `tokenizer_source` as tokenizer.ggml.*: a folder's tokenizer.json or vocab.json +
// merges.txt (with the eos_token_id its generation_config.json or config.json names), or a
// GGUF file's own tokenizer.* entries copied; "" for none. InputError naming the file for a
// model of another kind.
struct GgufExport {
  std::size_t tensors = 0, bytes = 0;
  std::size_t kept_f16 = 0;  // Q8_0 asked for, rows not whole blocks: written F16
  std::string tokenizer;     // what the tokenizer was written as; empty: none
};
GgufExport save_gguf(const std::string& path, const Model& model, GgmlType type, const std::string& tokenizer_source);

// A model in the layout of its family: save_gpt2 or save_hf_family.
void save_model(const std::string& dir, const Model& model, DType dtype = DType::f32);

}  // namespace attnlab
