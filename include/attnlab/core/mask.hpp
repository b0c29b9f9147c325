// Which keys each query may see: causal, a sliding window, and keys hidden from everyone.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

namespace attnlab {

// Query i stands at position p_i = i + (m - n) among the m keys: the last query is level
// with the last key (as when new tokens are appended after a KV cache). In
// self-attention m = n and p_i = i.
struct MaskSpec {
  bool causal = false;                   // query i sees keys j <= p_i
  std::optional<std::size_t> window;     // w: |p_i - j| < w (with causal: p_i - w < j <= p_i)
  std::vector<std::size_t> hidden_keys;  // keys no query may see ("knocked out")

  bool operator==(const MaskSpec&) const = default;
};

// The mask for n queries and m keys, ready to answer visible(i, j) in O(1).
class Mask {
 public:
  Mask(const MaskSpec& spec, std::size_t n, std::size_t m);

  // Whether key j takes part in query i's softmax.
  bool visible(std::size_t i, std::size_t j) const;

 private:
  MaskSpec spec_;
  long offset_;               // m - n
  std::vector<bool> hidden_;  // m entries
};

}  // namespace attnlab
