// Writes and reads the packed reply (include/attnlab/packed_reply.hpp has the layout).
#include "attnlab/packed_reply.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "attnlab/error.hpp"

namespace attnlab {

using nlohmann::json;

static_assert(std::endian::native == std::endian::little, "the packed reply is written as the machine's bytes");

namespace {

constexpr std::size_t kFixedHeaderBytes = 16;

void put_u32(std::string& out, std::size_t at, std::uint32_t x) { std::memcpy(out.data() + at, &x, sizeof x); }

std::uint32_t get_u32(std::string_view in, std::size_t at) {
  std::uint32_t x;
  std::memcpy(&x, in.data() + at, sizeof x);
  return x;
}

[[noreturn]] void bad(std::string_view what) { throw InputError(fmt::format("packed reply: {}", what)); }

bool is_reference(const json& j) { return j.is_object() && j.size() == 2 && j.contains("f64") && j.contains("shape"); }

// Replaces every reference inside j by its rows, read from values[0 .. count).
void expand(json& j, const char* values, std::size_t count) {
  if (is_reference(j)) {
    const json& shape = j["shape"];
    if (!j["f64"].is_number_unsigned() || !shape.is_array() || shape.size() != 2 || !shape[0].is_number_unsigned() ||
        !shape[1].is_number_unsigned())
      bad(fmt::format("{} is not a reference {{\"f64\": OFFSET, \"shape\": [ROWS, COLS]}}", j.dump()));
    const std::size_t offset = j["f64"], rows = shape[0], cols = shape[1];
    if (offset > count || rows * cols > count - offset)
      bad(fmt::format("{} reaches past the {} values that follow the header", j.dump(), count));
    json matrix = json::array();
    for (std::size_t i = 0; i < rows; ++i) {
      json row = json::array();
      for (std::size_t c = 0; c < cols; ++c) {
        double x;
        std::memcpy(&x, values + (offset + i * cols + c) * sizeof(double), sizeof x);
        row.push_back(std::isfinite(x) ? json(x) : json(nullptr));
      }
      matrix.push_back(std::move(row));
    }
    j = std::move(matrix);
    return;
  }
  if (j.is_structured())
    for (json& child : j) expand(child, values, count);
}

}  // namespace

json PackedArrays::add(const Matrix& m) {
  const std::size_t offset = values_.size();
  values_.insert(values_.end(), m.data.begin(), m.data.end());
  return {{"f64", offset}, {"shape", {m.rows, m.cols}}};
}

std::string pack_reply(const json& header, const PackedArrays& arrays) {
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the values start on an 8-byte boundary
  const std::vector<double>& values = arrays.values();
  std::string out(kFixedHeaderBytes, '\0');
  out.reserve(kFixedHeaderBytes + text.size() + values.size() * sizeof(double));
  std::memcpy(out.data(), kPackedMagic, sizeof kPackedMagic);
  put_u32(out, 4, kPackedVersion);
  put_u32(out, 8, static_cast<std::uint32_t>(text.size()));
  put_u32(out, 12, static_cast<std::uint32_t>(values.size()));
  out += text;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  return out;
}

json unpack_reply(std::string_view bytes) {
  if (bytes.size() < kFixedHeaderBytes || std::memcmp(bytes.data(), kPackedMagic, sizeof kPackedMagic) != 0)
    bad("does not start with \"ATLP\"");
  if (get_u32(bytes, 4) != kPackedVersion) bad(fmt::format("version {} is not {}", get_u32(bytes, 4), kPackedVersion));
  const std::size_t header = get_u32(bytes, 8), count = get_u32(bytes, 12);
  if (bytes.size() != kFixedHeaderBytes + header + count * sizeof(double))
    bad(fmt::format("{} bytes, but the header says {} + {} + {}·8", bytes.size(), kFixedHeaderBytes, header, count));
  json doc = json::parse(bytes.substr(kFixedHeaderBytes, header), nullptr, false);
  if (doc.is_discarded()) bad("the header is not JSON");
  expand(doc, bytes.data() + kFixedHeaderBytes + header, count);
  return doc;
}

}  // namespace attnlab
