// The packed reply: a JSON document whose matrices travel as raw doubles after it, so that
// a page receives a trace without printing and parsing hundreds of thousands of numbers
// (docs/api.md, "encoding": "packed"). The doubles are the engine's, bit for bit.
//
// Layout, little-endian:
//   bytes 0..3    "ATLP"
//   bytes 4..7    u32 format version (1)
//   bytes 8..11   u32 H, the header's length in bytes (a multiple of 8)
//   bytes 12..15  u32 N, how many doubles follow the header
//   16 .. 16+H    the header: UTF-8 JSON, padded with spaces
//   16+H ..       N IEEE-754 binary64 values
// In the header, a matrix is {"f64": OFFSET, "shape": [ROWS, COLS]}: its rows, one after
// another, start at value OFFSET (counted in doubles). Non-finite values (masked logits,
// -inf) are stored as they are; the JSON encoding writes them as null.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

inline constexpr char kPackedMagic[4] = {'A', 'T', 'L', 'P'};
inline constexpr std::uint32_t kPackedVersion = 1;

// Collects the matrices of one reply.
class PackedArrays {
 public:
  // Appends the matrix's values and returns the header's reference to them.
  nlohmann::json add(const Matrix& m);
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> values_;
};

// The reply's bytes: the fixed header, the JSON header, the values.
std::string pack_reply(const nlohmann::json& header, const PackedArrays& arrays);

// A packed document read back: its header, and its matrices on request.
struct PackedDocument {
  nlohmann::json header;
  std::vector<double> values;

  // The matrix a reference {"f64", "shape"} names; a JSON list of rows is read as it is.
  // `field` names it in the error a bad reference raises.
  Matrix matrix(const nlohmann::json& reference, std::string_view field) const;
};

// Reads the layout above; raises InputError naming what is wrong when the bytes are not
// a packed document.
PackedDocument read_packed(std::string_view bytes);

// For tests and tools: the header with every reference replaced by the matrix as a list
// of rows (non-finite values as null, as in JSON).
nlohmann::json unpack_reply(std::string_view bytes);

}  // namespace attnlab
