// Which keys each query may see: causal, a sliding window, and keys hidden from everyone.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

namespace attnlab {

struct MaskSpec {
  bool causal = false;                  // query i sees keys j <= i
  std::optional<std::size_t> window;    // w: |i - j| < w (with causal: i - w < j <= i)
  std::vector<std::size_t> hidden_keys; // keys no query may see ("knocked out")

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
  std::vector<bool> hidden_;  // m entries
};

}  // namespace attnlab
