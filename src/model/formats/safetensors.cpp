// Safetensors read (memory-mapped, header validated before use) and written
// (attnlab/model/safetensors.hpp).
#include "attnlab/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

constexpr int kMaxHeaderDepth = 8;

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
  }
  return "F32";
}

// The header's JSON, parsed with its depth limited (a hostile header cannot recurse deeply).
json parse_header(std::string_view text, const std::string& path) {
  const auto limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxHeaderDepth)
      fail(path,
           fmt::format("the header nests deeper than {} levels; it is not a safetensors header", kMaxHeaderDepth));
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception&) {
    fail(path, "the header is not JSON; the file is not a safetensors file (or it is damaged)");
  }
}

std::size_t checked_product(const std::vector<std::size_t>& shape, const std::string& path, const std::string& name) {
  std::size_t product = 1;
  for (std::size_t size : shape)
    if (size != 0 && product > SIZE_MAX / size)
      fail(path, fmt::format("tensor \"{}\": its shape's product overflows", name));
    else
      product *= size;
  return product;
}

// One tensor's entry, checked against the data section's size.
TensorInfo read_entry(const std::string& name, const json& entry, std::size_t data_bytes, const std::string& path) {
  const auto bad = [&](std::string_view what) { fail(path, fmt::format("tensor \"{}\": {}", name, what)); };
  if (!entry.is_object()) bad("expected {\"dtype\", \"shape\", \"data_offsets\"}");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("missing \"dtype\"");
  if (!entry.contains("shape") || !entry["shape"].is_array()) bad("missing \"shape\" (a list of sizes)");
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
    bad("missing \"data_offsets\" ([begin, end])");
  TensorInfo t;
  t.name = name;
  const std::string dtype = entry["dtype"];
  if (dtype == "F32")
    t.dtype = DType::f32;
  else if (dtype == "F16")
    t.dtype = DType::f16;
  else if (dtype == "BF16")
    t.dtype = DType::bf16;
  else if (dtype.size() <= 16)
    bad(fmt::format("dtype {} is not supported; attnlab reads F32, F16 and BF16", dtype));
  else
    bad("dtype is not supported; attnlab reads F32, F16 and BF16");
  if (entry["shape"].size() > 8) bad("more than 8 dimensions");
  for (const json& size : entry["shape"]) {
    if (!size.is_number_unsigned()) bad("a shape size is not a whole number >= 0");
    t.shape.push_back(size.get<std::size_t>());
  }
  for (const json& offset : entry["data_offsets"])
    if (!offset.is_number_unsigned()) bad("data_offsets are not whole numbers >= 0");
  t.begin = entry["data_offsets"][0].get<std::size_t>();
  t.end = entry["data_offsets"][1].get<std::size_t>();
  if (t.begin > t.end || t.end > data_bytes)
    bad(fmt::format("data_offsets [{}, {}] are not inside the data section ({} bytes)", t.begin, t.end, data_bytes));
  const std::size_t elements = checked_product(t.shape, path, name);
  if (elements > SIZE_MAX / dtype_bytes(t.dtype) || elements * dtype_bytes(t.dtype) != t.end - t.begin)
    bad(fmt::format("its shape needs {} × {} bytes but data_offsets span {} bytes", elements, dtype_bytes(t.dtype),
                    t.end - t.begin));
  return t;
}

}  // namespace

std::size_t TensorInfo::elements() const {
  std::size_t product = 1;
  for (std::size_t size : shape)
    product *= size;
  return product;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(path) {
  const std::byte* map = file_.data();
  const std::size_t size = file_.size();
  if (size < 8)
    fail(path, fmt::format("{} bytes is too short for a safetensors file (at least 8 bytes of header length)", size));
  std::uint64_t header_bytes = 0;
  for (int b = 7; b >= 0; --b)
    header_bytes = header_bytes << 8 | std::to_integer<std::uint64_t>(map[b]);
  if (header_bytes > kMaxSafetensorsHeaderBytes)
    fail(path, fmt::format("the header length {} is more than the limit of {} bytes; the file is not a safetensors "
                           "file (or it is damaged)",
                           header_bytes, kMaxSafetensorsHeaderBytes));
  if (header_bytes > size - 8)
    fail(path, fmt::format("the header length {} runs past the end of the file ({} bytes): the file is truncated",
                           header_bytes, size));
  data_start_ = 8 + header_bytes;
  const std::string_view text(reinterpret_cast<const char*>(map + 8), header_bytes);
  const json header = parse_header(text, path);
  if (!header.is_object()) fail(path, "the header is not a JSON object");
  const std::size_t data_bytes = size - data_start_;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail(path, fmt::format("__metadata__ \"{}\" is not a string", key.substr(0, 64)));
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(read_entry(name, entry, data_bytes, path));
  }
  // No two tensors share bytes. An empty tensor (a 0 in its shape) holds none, so it
  // overlaps nothing, wherever its offsets point (write_safetensors gives it the offset of
  // the next tensor's first byte).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_)
    if (t.begin < t.end) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto a, auto b) { return a->begin < b->begin; });
  for (std::size_t k = 1; k < by_offset.size(); ++k)
    if (by_offset[k]->begin < by_offset[k - 1]->end)
      fail(path, fmt::format("tensors \"{}\" and \"{}\" overlap in the data section", by_offset[k - 1]->name,
                             by_offset[k]->name));
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  return {file_.data() + data_start_ + t.begin, t.end - t.begin};
}

std::vector<float> SafetensorsFile::to_f32(const TensorInfo& t) const {
  const std::span<const std::byte> raw = bytes(t);
  std::vector<float> out(t.elements());
  // An empty tensor (a size of 0 in its shape) has no bytes to copy; memcpy's pointers may
  // not be null even then.
  if (raw.empty()) return out;
  if (t.dtype == DType::f32) {
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
  }
  std::vector<std::uint16_t> halves(out.size());
  std::memcpy(halves.data(), raw.data(), raw.size());
  if (t.dtype == DType::f16)
    f16_to_f32(halves, out);
  else
    bf16_to_f32(halves, out);
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    std::size_t elements = 1;
    for (std::size_t size : t.shape)
      elements *= size;
    if (elements != t.values.size())
      fail(t.name, fmt::format("{} values for a shape of {} elements", t.values.size(), elements));
    const std::size_t bytes = elements * dtype_bytes(t.dtype);
    header[t.name] = {
        {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_whole(path, [&](std::FILE* f) {
    std::uint64_t length = text.size();
    unsigned char length_bytes[8];
    for (int b = 0; b < 8; ++b)
      length_bytes[b] = static_cast<unsigned char>(length >> (8 * b));
    bool ok = std::fwrite(length_bytes, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    for (const TensorToWrite& t : tensors) {
      if (t.dtype == DType::f32) {
        ok = ok && std::fwrite(t.values.data(), sizeof(float), t.values.size(), f) == t.values.size();
        continue;
      }
      std::vector<std::uint16_t> halves(t.values.size());
      if (t.dtype == DType::f16)
        f32_to_f16(t.values, halves);
      else
        f32_to_bf16(t.values, halves);
      ok = ok && std::fwrite(halves.data(), sizeof(std::uint16_t), halves.size(), f) == halves.size();
    }
    return ok;
  });
}

}  // namespace attnlab
