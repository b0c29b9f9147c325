// Reading a file someone else gave: the one bounded reader every face and layer uses; and
// writing one whole or not at all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace attnlab {

// The bytes of `path`, at most `limit` of them. A regular file's size is checked before
// anything is read; anything else (a pipe, /dev/zero) is read only until it passes the
// limit. Errors are about `field` (a flag such as "--task", a file name such as
// "vocab.json", or the path itself) and name the path, its size and the limit; `hint`, when
// given, follows a failure to open ("a model directory holds config.json ...").
std::string read_file_within(const std::filesystem::path& path, std::uintmax_t limit, std::string_view field,
                             std::string_view hint = "");

// Writes `path` whole or not at all: `write` fills PATH.partial through the FILE* it is
// given (returning false when a write came short), which is then renamed over `path`. On
// any failure (a short write, a full disk, an exception from `write`) the partial file is
// removed and `path` left as it was; InputError naming `path` unless `write` threw.
void write_file_whole(const std::string& path, const std::function<bool(std::FILE*)>& write);

// A regular file mapped whole and read-only: what the checkpoint readers (safetensors,
// GGUF) view tensors in, so that a weight is read where it lies rather than copied. The
// bytes stay valid while the MappedFile lives (it moves; it does not copy). An empty file
// maps to no bytes (data() is null, size() 0).
class MappedFile {
 public:
  MappedFile() = default;
  // InputError about `path` when it cannot be opened, is not a regular file, or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

  // Gives back the pages that lie wholly inside `range` (a part of this mapping): bytes a
  // reader has copied and will not read again then leave the process's resident memory. Read
  // again, they come back from the file. Advice only: nothing changes where the system refuses.
  void release_pages(std::span<const std::byte> range) const;

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace attnlab
