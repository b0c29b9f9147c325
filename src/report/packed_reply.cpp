// Writes and reads the packed reply (include/attnlab/report/packed_reply.hpp has the layout).
// The page's WebAssembly engine shares this file, so errors go through fail() (attnlab/core/error.hpp).
#include "attnlab/report/packed_reply.hpp"

#include <fmt/format.h>
#include <bit>
#include <cmath>
#include <cstring>

#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/report/trace_json.hpp"

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

[[noreturn]] void bad(std::string_view what) { fail("packed document", what); }

bool is_reference(const json& j) { return j.is_object() && j.size() == 2 && j.contains("f64") && j.contains("shape"); }

void expand(json& j, const PackedDocument& doc) {
  if (is_reference(j)) {
    j = matrix_to_json(doc.matrix(j, "a matrix"));
    return;
  }
  if (j.is_structured())
    for (json& child : j)
      expand(child, doc);
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

Matrix PackedDocument::matrix(const json& reference, std::string_view field) const {
  if (reference.is_array()) {  // a list of rows, as JSON writes a matrix
    Matrix m(reference.size(), reference.empty() || !reference[0].is_array() ? 0 : reference[0].size());
    for (std::size_t i = 0; i < m.rows; ++i) {
      const json& row = reference[i];
      if (!row.is_array() || row.size() != m.cols)
        bad(fmt::format("{}: row {} is not a list of {} numbers", field, i, m.cols));
      for (std::size_t c = 0; c < m.cols; ++c) {
        if (!row[c].is_number()) bad(fmt::format("{}: row {} holds {}, not a number", field, i, describe_json(row[c])));
        m(i, c) = row[c].get<double>();
      }
    }
    return m;
  }
  const auto well_formed = [&] {
    if (!is_reference(reference) || !reference["f64"].is_number_unsigned()) return false;
    const json& shape = reference["shape"];
    return shape.is_array() && shape.size() == 2 && shape[0].is_number_unsigned() && shape[1].is_number_unsigned();
  };
  if (!well_formed())
    bad(fmt::format("{}: {} is not a reference {{\"f64\": OFFSET, \"shape\": [ROWS, COLS]}}", field,
                    describe_json(reference)));
  const json& shape = reference["shape"];
  const std::size_t offset = reference["f64"], rows = shape[0], cols = shape[1];
  if (offset > values.size() || (cols != 0 && rows > (values.size() - offset) / cols))
    bad(fmt::format("{}: {} reaches past the {} values that follow the header", field, describe_json(reference),
                    values.size()));
  Matrix m(rows, cols);
  std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(offset), rows * cols, m.data.begin());
  return m;
}

PackedDocument read_packed(std::string_view bytes) {
  if (bytes.size() < kFixedHeaderBytes || std::memcmp(bytes.data(), kPackedMagic, sizeof kPackedMagic) != 0)
    bad("does not start with \"ATLP\"");
  if (get_u32(bytes, 4) != kPackedVersion) bad(fmt::format("version {} is not {}", get_u32(bytes, 4), kPackedVersion));
  const std::size_t header = get_u32(bytes, 8), count = get_u32(bytes, 12);
  if (bytes.size() != kFixedHeaderBytes + header + count * sizeof(double))
    bad(fmt::format("{} bytes, but the header says {} + {} + {}·8", bytes.size(), kFixedHeaderBytes, header, count));
  PackedDocument doc;
  const JsonShape shape = json_shape(bytes.substr(kFixedHeaderBytes, header));
  if (shape.depth > kMaxJsonDepth) bad(fmt::format("the header is nested more than {} levels deep", kMaxJsonDepth));
  if (shape.values > kMaxJsonValues)
    bad(fmt::format("the header holds {} JSON values, more than the limit of {}", shape.values, kMaxJsonValues));
  doc.header = json::parse(bytes.substr(kFixedHeaderBytes, header), nullptr, false);
  if (doc.header.is_discarded()) bad("the header is not JSON");
  doc.values.resize(count);
  if (count > 0)  // an empty vector's data() may be null, which memcpy may not be given
    std::memcpy(doc.values.data(), bytes.data() + kFixedHeaderBytes + header, count * sizeof(double));
  return doc;
}

json unpack_reply(std::string_view bytes) {
  const PackedDocument doc = read_packed(bytes);
  json out = doc.header;
  expand(out, doc);
  return out;
}

}  // namespace attnlab
