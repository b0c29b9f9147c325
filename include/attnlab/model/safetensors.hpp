// Safetensors files, read and written: the format Hugging Face checkpoints use.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON, then the data: one
// flat byte range per tensor. The JSON maps each tensor's name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets into the data section) and may hold
// "__metadata__", a map of strings. attnlab maps the file into memory and checks the header
// before trusting anything in it: the length fits the file and is at most 100 MiB, the JSON
// is an object nested at most 8 deep, each tensor has a known dtype (F32, F16, BF16; others
// are refused by name), a shape of sizes whose product does not overflow, and offsets inside
// the data section, not overlapping, spanning exactly product × dtype size. No allocation
// is sized by a value that was not checked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/files.hpp"

namespace attnlab {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::size_t> shape;
  std::size_t begin = 0, end = 0;  // byte range in the data section

  std::size_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps `path` and validates its header; InputError naming the file (and the tensor) otherwise.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::size_t file_bytes() const { return file_.size(); }

  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  std::span<const std::byte> bytes(const TensorInfo& tensor) const;
  // The tensor's values as f32 (F16 and BF16 widened exactly).
  std::vector<float> to_f32(const TensorInfo& tensor) const;

 private:
  std::string path_;
  MappedFile file_;             // the whole file, read-only
  std::size_t data_start_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: f32 values, stored as `dtype` (rounded to nearest even for F16/BF16).
struct TensorToWrite {
  std::string name;
  std::vector<std::size_t> shape;
  std::span<const float> values;  // product(shape) values, row-major
  DType dtype = DType::f32;
};

// Writes a safetensors file (tensors in the order given, header padded to 8 bytes with
// spaces, as Hugging Face's writer does). Throws InputError naming `path` when it cannot be
// written; the file appears whole or not at all (written beside it, then renamed).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace attnlab
