// GGUF files, the format llama.cpp, Ollama and LM Studio keep models in, read and checked.
//
// A file (little-endian) is: the magic "GGUF", a version (u32: 2 or 3; version 1 wrote its
// counts as u32 and is refused by name), the tensor count and the metadata count (u64 each),
// the metadata (key: a string, u64 length + bytes; a value type u32; the value: u8, i8, u16,
// i16, u32, i32, u64, i64, f32, f64, bool, a string, or an array: element type u32, count u64,
// the elements, arrays of arrays included), then each tensor's info (name, the number of
// dimensions u32, each dimension u64 with the fastest-varying first as ggml writes them, the
// ggml type u32, the offset u64 into the data section), then padding to `general.alignment`
// (32 when absent) and the data section, each tensor at an aligned offset.
//
// attnlab maps the file and checks all of it before anything uses a value: the metadata and
// tensor infos fit in kMaxGgufHeaderBytes; every length, count and array is priced against
// the bytes left before it is read, the values in all against kMaxGgufMetadataValues; arrays nest at most
// kMaxGgufArrayDepth deep; a tensor has 1 to 4 dimensions whose product does not overflow, a type attnlab reads (F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K; others refused by name), a first dimension that is
// a whole number of the type's blocks, an aligned offset inside the data section, and bytes that overlap no other
// tensor's. Every broken file is refused naming the file, what is wrong and where.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/files.hpp"
#include "attnlab/model/ggml_type.hpp"

namespace attnlab {

inline constexpr std::uint64_t kMaxGgufHeaderBytes = 256ull << 20;  // a 262,144-token vocabulary takes ~10 MiB
inline constexpr std::size_t kMaxGgufTensors = 1 << 16, kMaxGgufArrayDepth = 4;
// Metadata values in all (each entry one, each array element one more): a 262,144-token
// vocabulary's tokens, scores, types and merges hold about 1.1 million.
inline constexpr std::uint64_t kMaxGgufMetadataValues = 1 << 23;

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // as the file writes them: dims[0] varies fastest (a row's length)
  GgmlType type = GgmlType::f32;
  std::uint64_t offset = 0;  // into the data section
  std::uint64_t bytes = 0;   // what its values take

  std::uint64_t elements() const;
};

class GgufFile {
 public:
  // Maps `path` and checks everything above; InputError naming the file otherwise.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::size_t file_bytes() const { return file_.size(); }
  std::uint64_t alignment() const { return alignment_; }
  // Every metadata value by key: numbers, booleans, strings and arrays as JSON holds them (a
  // string that is not UTF-8 is kept as its bytes); metadata_types() the file's type of each
  // ("u32", "string", "array[string]", ...).
  const nlohmann::json& metadata() const { return metadata_; }
  const std::map<std::string, std::string>& metadata_types() const { return types_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }  // in file order

  const GgufTensor* find(std::string_view name) const;  // nullptr when absent
  std::span<const std::byte> bytes(const GgufTensor& tensor) const;

  // Frees the metadata once a reader has taken what it needs: a model's file holds its
  // tokenizer's tables there (151,936 tokens and as many merges: some 50 MiB as JSON), which a
  // model viewing the tensors would otherwise keep for its whole life. The tensors stay readable.
  void drop_metadata();
  // The tensor's pages out of resident memory (MappedFile::release_pages), for a reader that
  // has copied its bytes elsewhere.
  void release_pages(const GgufTensor& tensor) const { file_.release_pages(bytes(tensor)); }

 private:
  std::string path_;
  MappedFile file_;  // the whole file, read-only
  std::size_t data_start_ = 0;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::map<std::string, std::string> types_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;  // index into tensors_
};

}  // namespace attnlab
