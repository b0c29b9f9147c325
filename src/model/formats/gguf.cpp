// GGUF files read and checked, and ggml's block types dequantized (attnlab/model/gguf.hpp).
#include "attnlab/model/gguf.hpp"

#include "attnlab/kernels/matvec.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"  // text_excerpt

namespace attnlab {

using nlohmann::json;

std::string_view ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::bf16: return "BF16";
    case GgmlType::q8_0: return "Q8_0";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::q4_1: return "Q4_1";
    case GgmlType::q5_0: return "Q5_0";
    case GgmlType::q5_1: return "Q5_1";
    case GgmlType::iq4_nl: return "IQ4_NL";
    case GgmlType::q4_k: return "Q4_K";
    case GgmlType::q5_k: return "Q5_K";
    case GgmlType::q6_k: return "Q6_K";
  }
  return "?";
}

std::size_t ggml_block_values(GgmlType type) {
  switch (type) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16: return 1;
    case GgmlType::q8_0:
    case GgmlType::q4_0:
    case GgmlType::q4_1:
    case GgmlType::q5_0:
    case GgmlType::q5_1:
    case GgmlType::iq4_nl: return 32;
    default: return 256;  // the K types' super-blocks
  }
}

std::size_t ggml_block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::f32: return 4;
    case GgmlType::f16:
    case GgmlType::bf16: return 2;
    case GgmlType::q8_0: return 2 + 32;                 // d (f16), 32 × int8
    case GgmlType::q4_0: return 2 + 16;                 // d (f16), 32 × 4 bits
    case GgmlType::q4_1: return 2 + 2 + 16;             // d, m (f16), 32 × 4 bits
    case GgmlType::q5_0: return 2 + 4 + 16;             // d, each value's fifth bit, 32 × 4 bits
    case GgmlType::q5_1: return 2 + 2 + 4 + 16;         // d, m, the fifth bits, 32 × 4 bits
    case GgmlType::iq4_nl: return 2 + 16;               // d, 32 × a 4-bit index into a fixed table
    case GgmlType::q4_k: return 2 + 2 + 12 + 128;       // d, dmin, 8 × (6-bit scale, 6-bit min), 256 × 4 bits
    case GgmlType::q5_k: return 2 + 2 + 12 + 32 + 128;  // as Q4_K, and each value's fifth bit
    case GgmlType::q6_k: return 128 + 64 + 16 + 2;      // low 4 bits, high 2 bits, 16 × int8 scales, d
  }
  return 0;
}

GgmlType ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return GgmlType::f32;
    case DType::f16: return GgmlType::f16;
    case DType::bf16: return GgmlType::bf16;
  }
  return GgmlType::f32;
}

std::uint64_t GgufTensor::elements() const {
  std::uint64_t product = 1;
  for (std::uint64_t d : dims)
    product *= d;
  return product;
}

namespace {

// The types a file may name, and llama.cpp's names for the ones attnlab does not read.
bool known_type(std::uint32_t t) {
  for (GgmlType k : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1,
                     GgmlType::q5_0, GgmlType::q5_1, GgmlType::iq4_nl, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k})
    if (static_cast<std::uint32_t>(k) == t) return true;
  return false;
}

std::string unread_type_name(std::uint32_t t) {
  static const char* names[] = {"F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
                                "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
                                "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16"};
  return t < std::size(names) ? names[t] : fmt::format("type {}", t);
}

// Reads the header from a cursor that never passes `end`: every read checks the bytes left
// first and names what it was reading when they run out.
class Reader {
 public:
  Reader(const std::byte* begin, const std::byte* end, const std::string& path)
      : at_(begin), begin_(begin), end_(end), path_(path) {}

  std::size_t left() const { return static_cast<std::size_t>(end_ - at_); }
  std::size_t offset() const { return static_cast<std::size_t>(at_ - begin_); }

  // Prices `count` more metadata values (an entry, or an array's elements) against
  // kMaxGgufMetadataValues before they are read: in memory a value takes far more than the
  // byte it may take in the file.
  void take_values(std::uint64_t count, std::string_view what) {
    if (count > values_left_)
      fail(path_, fmt::format("{}: the metadata holds more than {} values, the limit; the file is not a model's (or "
                              "it is damaged)",
                              what, kMaxGgufMetadataValues));
    values_left_ -= count;
  }

  template <class T>
  T number(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }

  std::string string(std::string_view what) {
    const std::uint64_t length = number<std::uint64_t>(what);
    if (length > left())
      fail(path_, fmt::format("{} at byte {}: a string of {} bytes runs past the end of the file", what, offset() - 8,
                              length));
    std::string s(reinterpret_cast<const char*>(at_), static_cast<std::size_t>(length));
    at_ += length;
    return s;
  }

  [[noreturn]] void truncated(std::string_view what) const {
    fail(path_,
         fmt::format("{} at byte {}: the file ends there (it is truncated, or not a GGUF file)", what, offset()));
  }

 private:
  void need(std::size_t bytes, std::string_view what) const {
    if (bytes > left()) truncated(what);
  }

  const std::byte* at_;
  const std::byte* begin_;
  const std::byte* end_;
  const std::string& path_;
  std::uint64_t values_left_ = kMaxGgufMetadataValues;
};

// Metadata value types, by their number in the file.
namespace value {  // named: the file may compile in a batch with others
enum Type : std::uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
}  // namespace value

const char* value_type_name(std::uint32_t t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return t < std::size(names) ? names[t] : "?";
}

// The smallest number of bytes one value of type t takes: what an array's count is priced by.
std::size_t least_bytes(std::uint32_t t) {
  switch (t) {
    case value::u8:
    case value::i8:
    case value::boolean: return 1;
    case value::u16:
    case value::i16: return 2;
    case value::u32:
    case value::i32:
    case value::f32: return 4;
    case value::string: return 8;     // its length
    case value::array: return 4 + 8;  // its element type and count
    default: return 8;
  }
}

// A string as JSON can hold it: itself when it is UTF-8, else a list of its bytes.
json text_value(const std::string& s) {
  try {
    (void)json(s).dump();
    return s;
  } catch (const json::exception&) {
    std::vector<int> bytes(s.begin(), s.end());
    for (int& b : bytes)
      b &= 0xFF;
    return bytes;
  }
}

json read_value(Reader& r, std::uint32_t type, std::size_t depth, const std::string& key, std::string& type_name,
                const std::string& path) {
  const std::string what = fmt::format("metadata \"{}\"", text_excerpt(key));
  switch (type) {
    case value::u8: return r.number<std::uint8_t>(what);
    case value::i8: return r.number<std::int8_t>(what);
    case value::u16: return r.number<std::uint16_t>(what);
    case value::i16: return r.number<std::int16_t>(what);
    case value::u32: return r.number<std::uint32_t>(what);
    case value::i32: return r.number<std::int32_t>(what);
    case value::u64: return r.number<std::uint64_t>(what);
    case value::i64: return r.number<std::int64_t>(what);
    case value::f32: return r.number<float>(what);
    case value::f64: return r.number<double>(what);
    case value::boolean: {
      const std::uint8_t b = r.number<std::uint8_t>(what);
      if (b > 1) fail(path, fmt::format("{}: a bool is 0 or 1, not {}", what, b));
      return b == 1;
    }
    case value::string: return text_value(r.string(what));
    case value::array: {
      if (depth >= kMaxGgufArrayDepth)
        fail(path, fmt::format("{}: arrays nest more than {} deep", what, kMaxGgufArrayDepth));
      const std::uint32_t element = r.number<std::uint32_t>(what);
      if (element > value::f64)
        fail(path, fmt::format("{}: array element type {} is not a GGUF value type (0 to 12)", what, element));
      const std::uint64_t count = r.number<std::uint64_t>(what);
      if (count > r.left() / least_bytes(element))
        fail(path, fmt::format("{}: an array of {} {} values cannot fit in the {} bytes left", what, count,
                               value_type_name(element), r.left()));
      r.take_values(count, what);
      std::string inner = value_type_name(element);
      json out = json::array();
      for (std::uint64_t i = 0; i < count; ++i)
        out.push_back(read_value(r, element, depth + 1, key, inner, path));
      type_name = fmt::format("array[{}]", inner);
      return out;
    }
    default: fail(path, fmt::format("{}: value type {} is not a GGUF value type (0 to 12)", what, type));
  }
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path), file_(path) {
  const std::byte* map = file_.data();
  const std::size_t size = file_.size();
  if (size < 24) fail(path, fmt::format("{} bytes is too short for a GGUF file (its header alone takes 24)", size));
  Reader r(map, map + std::min<std::size_t>(size, kMaxGgufHeaderBytes), path);
  if (std::memcmp(map, "GGUF", 4) != 0) fail(path, "the file does not start with \"GGUF\": it is not a GGUF file");
  (void)r.number<std::uint32_t>("the magic");
  version_ = r.number<std::uint32_t>("the version");
  if (version_ == 1)
    fail(path, "GGUF version 1 (counts written as u32) is not read; convert the model again with a current llama.cpp");
  if (version_ != 2 && version_ != 3)
    fail(path, fmt::format("GGUF version {} is not one attnlab reads (it reads 2 and 3)", version_));
  const std::uint64_t tensor_count = r.number<std::uint64_t>("the tensor count");
  const std::uint64_t metadata_count = r.number<std::uint64_t>("the metadata count");
  if (tensor_count > kMaxGgufTensors)
    fail(path, fmt::format("{} tensors is more than the limit of {}", tensor_count, kMaxGgufTensors));
  // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (metadata_count > r.left() / 13)
    fail(path, fmt::format("{} metadata entries cannot fit in the file's header", metadata_count));
  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    r.take_values(1, fmt::format("metadata entry {}", i));
    const std::string key = r.string(fmt::format("metadata entry {}'s key", i));
    if (valid_utf8(key) != key) fail(path, fmt::format("metadata entry {}'s key is not UTF-8", i));
    if (metadata_.contains(key)) fail(path, fmt::format("metadata \"{}\" appears twice", text_excerpt(key)));
    const std::uint32_t type = r.number<std::uint32_t>(fmt::format("metadata \"{}\"'s type", text_excerpt(key)));
    std::string type_name = value_type_name(type);
    metadata_[key] = read_value(r, type, 0, key, type_name, path);
    types_[key] = type_name;
  }
  if (metadata_.contains("general.alignment")) {
    const json& a = metadata_["general.alignment"];
    if (!a.is_number_unsigned() || a.get<std::uint64_t>() == 0 || a.get<std::uint64_t>() > 1 << 20 ||
        (a.get<std::uint64_t>() & (a.get<std::uint64_t>() - 1)) != 0)
      fail(path,
           fmt::format("\"general.alignment\" {} is not a power of two from 1 to 2^20", text_excerpt(a.dump(), 40)));
    alignment_ = a.get<std::uint64_t>();
  }
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = r.string(fmt::format("tensor {}'s name", i));
    if (valid_utf8(t.name) != t.name) fail(path, fmt::format("tensor {}'s name is not UTF-8", i));
    const std::string what = fmt::format("tensor \"{}\"", text_excerpt(t.name));
    const std::uint32_t dims = r.number<std::uint32_t>(what);
    if (dims < 1 || dims > 4) fail(path, fmt::format("{}: {} dimensions; a tensor has 1 to 4", what, dims));
    std::uint64_t product = 1;
    for (std::uint32_t k = 0; k < dims; ++k) {
      const std::uint64_t d = r.number<std::uint64_t>(what);
      if (d == 0 || product > (std::uint64_t{1} << 48) / d)
        fail(path, fmt::format("{}: dimension {} is {}; the sizes must be at least 1 and their product below 2^48",
                               what, k, d));
      product *= d;
      t.dims.push_back(d);
    }
    const std::uint32_t type = r.number<std::uint32_t>(what);
    if (!known_type(type))
      fail(path, fmt::format("{}: type {} is not one attnlab reads (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                             "Q5_1, IQ4_NL, Q4_K, Q5_K and Q6_K); re-quantize the model to one of them",
                             what, unread_type_name(type)));
    t.type = static_cast<GgmlType>(type);
    if (t.dims[0] % ggml_block_values(t.type) != 0)
      fail(path, fmt::format("{}: a row of {} values is not a whole number of {} blocks of {}", what, t.dims[0],
                             ggml_type_name(t.type), ggml_block_values(t.type)));
    t.bytes = product / ggml_block_values(t.type) * ggml_block_bytes(t.type);
    t.offset = r.number<std::uint64_t>(what);
    if (t.offset % alignment_ != 0)
      fail(path, fmt::format("{}: offset {} is not a multiple of the alignment {}", what, t.offset, alignment_));
    if (!by_name_.emplace(t.name, tensors_.size()).second) fail(path, fmt::format("{} appears twice", what));
    tensors_.push_back(std::move(t));
  }
  data_start_ = (r.offset() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start_ > size) r.truncated("the data section");
  const std::uint64_t data_bytes = size - data_start_;
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : tensors_) {
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(path, fmt::format("tensor \"{}\": its {} bytes at offset {} run past the end of the data section ({} "
                             "bytes): the file is truncated",
                             text_excerpt(t.name), t.bytes, t.offset, data_bytes));
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t k = 1; k < by_offset.size(); ++k)
    if (by_offset[k - 1]->offset + by_offset[k - 1]->bytes > by_offset[k]->offset)
      fail(path, fmt::format("tensors \"{}\" and \"{}\" overlap", text_excerpt(by_offset[k - 1]->name),
                             text_excerpt(by_offset[k]->name)));
}

const GgufTensor* GgufFile::find(std::string_view name) const {
  const auto at = by_name_.find(name);
  return at == by_name_.end() ? nullptr : &tensors_[at->second];
}

std::span<const std::byte> GgufFile::bytes(const GgufTensor& t) const {
  return {file_.data() + data_start_ + t.offset, static_cast<std::size_t>(t.bytes)};
}

void GgufFile::drop_metadata() {
  nlohmann::json().swap(metadata_);
  std::map<std::string, std::string>().swap(types_);
}

namespace {

float half_at(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

std::uint8_t byte_at(const std::byte* p, std::size_t i) { return std::to_integer<std::uint8_t>(p[i]); }

// The K types' 8 (scale, min) pairs, 6 bits each in 12 bytes (kernels/matvec.hpp reads them
// the same way in its Q4_K product).
void scale_and_min(const std::byte* scales, std::size_t j, float& scale, float& min) {
  k_scale_and_min(reinterpret_cast<const std::uint8_t*>(scales), j, scale, min);
}

}  // namespace

void dequantize(GgmlType type, const std::byte* blocks, std::size_t count, float* out) {
  const std::size_t per_block = ggml_block_values(type), block_bytes = ggml_block_bytes(type);
  if (count % per_block != 0) throw std::logic_error("dequantize: not a whole number of blocks");
  for (std::size_t b = 0; b < count / per_block; ++b) {
    const std::byte* x = blocks + b * block_bytes;
    float* y = out + b * per_block;
    switch (type) {
      case GgmlType::f32: std::memcpy(y, x, 4); break;
      case GgmlType::f16: *y = half_at(x); break;
      case GgmlType::bf16: {
        std::uint16_t h;
        std::memcpy(&h, x, 2);
        *y = bf16_to_f32(h);
        break;
      }
      case GgmlType::q8_0: {  // y = d · q, q an int8
        const float d = half_at(x);
        for (std::size_t i = 0; i < 32; ++i)
          y[i] = d * float(static_cast<std::int8_t>(byte_at(x + 2, i)));
        break;
      }
      case GgmlType::q4_0: {  // y_i = d · (q_i − 8): the low nibbles are values 0-15, the high ones 16-31
        const float d = half_at(x);
        for (std::size_t i = 0; i < 16; ++i) {
          y[i] = d * float((byte_at(x + 2, i) & 0xF) - 8);
          y[i + 16] = d * float((byte_at(x + 2, i) >> 4) - 8);
        }
        break;
      }
      case GgmlType::q4_1: {  // y_i = d · q_i + m
        const float d = half_at(x), m = half_at(x + 2);
        for (std::size_t i = 0; i < 16; ++i) {
          y[i] = d * float(byte_at(x + 4, i) & 0xF) + m;
          y[i + 16] = d * float(byte_at(x + 4, i) >> 4) + m;
        }
        break;
      }
      case GgmlType::q5_0:
      case GgmlType::q5_1: {
        // 5-bit q_i: the nibble, and bit i of the 32-bit qh as the fifth bit; Q5_0: y = d · (q − 16),
        // Q5_1: y = d · q + m.
        const bool one = type == GgmlType::q5_1;
        const float d = half_at(x), m = one ? half_at(x + 2) : 0.0f;
        const std::byte* qh_at = x + (one ? 4 : 2);
        const std::byte* qs = qh_at + 4;
        std::uint32_t qh = 0;
        for (std::size_t k = 0; k < 4; ++k)
          qh |= std::uint32_t(byte_at(qh_at, k)) << (8 * k);
        const int offset = one ? 0 : 16;
        for (std::size_t i = 0; i < 16; ++i) {
          const int q0 = int((byte_at(qs, i) & 0xF) | (((qh >> i) & 1) << 4)) - offset;
          const int q1 = int((byte_at(qs, i) >> 4) | (((qh >> (i + 16)) & 1) << 4)) - offset;
          y[i] = d * float(q0) + m;
          y[i + 16] = d * float(q1) + m;
        }
        break;
      }
      case GgmlType::iq4_nl: {  // y_i = d · table[q_i], ggml's non-linear 4-bit grid
        static constexpr std::int8_t table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                  1,    13,   25,  38,  53,  69,  89,  113};
        const float d = half_at(x);
        for (std::size_t i = 0; i < 16; ++i) {
          y[i] = d * float(table[byte_at(x + 2, i) & 0xF]);
          y[i + 16] = d * float(table[byte_at(x + 2, i) >> 4]);
        }
        break;
      }
      case GgmlType::q4_k:
      case GgmlType::q5_k: {
        // y = d · scale_j · q − dmin · min_j over 8 groups of 32; q the 4 bits (+ 16 for the fifth).
        const float d = half_at(x), dmin = half_at(x + 2);
        const std::byte* scales = x + 4;
        const bool five = type == GgmlType::q5_k;
        const std::byte* high = x + 16;                    // Q5_K: bit j/… of each value's fifth bits
        const std::byte* low = x + (five ? 48 : 16);       // the 4-bit values, two per byte
        for (std::size_t chunk = 0; chunk < 4; ++chunk) {  // 64 values: the low nibbles, then the high
          float s1, m1, s2, m2;
          scale_and_min(scales, 2 * chunk, s1, m1);
          scale_and_min(scales, 2 * chunk + 1, s2, m2);
          for (std::size_t l = 0; l < 32; ++l) {
            const std::uint8_t q = byte_at(low, chunk * 32 + l);
            const std::uint8_t h = five ? byte_at(high, l) : 0;
            const float fifth_1 = (h >> (2 * chunk)) & 1 ? 16.0f : 0.0f,
                        fifth_2 = (h >> (2 * chunk + 1)) & 1 ? 16.0f : 0.0f;
            y[chunk * 64 + l] = d * s1 * (float(q & 0xF) + fifth_1) - dmin * m1;
            y[chunk * 64 + 32 + l] = d * s2 * (float(q >> 4) + fifth_2) - dmin * m2;
          }
        }
        break;
      }
      case GgmlType::q6_k: {
        // y = d · scale · (q − 32), q 6 bits: 4 low in ql, 2 high in qh; 16 int8 scales of 16 values.
        const std::byte* ql = x;
        const std::byte* qh = x + 128;
        const std::byte* sc = x + 192;
        const float d = half_at(x + 208);
        for (std::size_t half = 0; half < 2; ++half) {  // 128 values each
          for (std::size_t l = 0; l < 32; ++l) {
            const std::size_t is = half * 8 + l / 16;
            const std::uint8_t h = byte_at(qh, half * 32 + l);
            const std::uint8_t a = byte_at(ql, half * 64 + l), b2 = byte_at(ql, half * 64 + l + 32);
            const int q1 = int((a & 0xF) | (((h >> 0) & 3) << 4)) - 32;
            const int q2 = int((b2 & 0xF) | (((h >> 2) & 3) << 4)) - 32;
            const int q3 = int((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
            const int q4 = int((b2 >> 4) | (((h >> 6) & 3) << 4)) - 32;
            const auto scale = [&](std::size_t i) { return float(static_cast<std::int8_t>(byte_at(sc, i))); };
            y[half * 128 + l] = d * scale(is) * float(q1);
            y[half * 128 + l + 32] = d * scale(is + 2) * float(q2);
            y[half * 128 + l + 64] = d * scale(is + 4) * float(q3);
            y[half * 128 + l + 96] = d * scale(is + 6) * float(q4);
          }
        }
        break;
      }
    }
  }
}

}  // namespace attnlab
