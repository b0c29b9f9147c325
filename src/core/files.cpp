// The bounded file reader (attnlab/core/files.hpp).
#include "attnlab/core/files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace fs = std::filesystem;

std::string read_file_within(const fs::path& path, std::uintmax_t limit, std::string_view field,
                             std::string_view hint) {
  const std::string name = path.string();
  const bool field_is_path = field == name;  // then the message need not repeat the path
  const std::string limit_text =
      limit >= (1u << 20) ? fmt::format("{} bytes ({} MiB)", limit, limit >> 20) : fmt::format("{} bytes", limit);
  const std::string then = hint.empty() ? "" : fmt::format("; {}", hint);
  std::error_code error;
  if (fs::is_directory(path, error))
    fail(field, fmt::format("{} is a directory, not a file{}", field_is_path ? "the path" : name, then));
  std::string bytes;
  if (fs::is_regular_file(path, error)) {
    const std::uintmax_t size = fs::file_size(path, error);
    if (!error && size > limit)
      fail(field, fmt::format("{} is {} bytes, more than the limit of {}", field_is_path ? "the file" : name, size,
                              limit_text));
    if (!error) bytes.reserve(size);  // read into place, not copied as the string grows
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(field, fmt::format("cannot open {}: {}{}", field_is_path ? "the file" : name, std::strerror(errno), then));
  char block[1 << 16];
  while (in.read(block, sizeof block) || in.gcount() > 0) {
    bytes.append(block, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > limit)
      fail(field, fmt::format("{} holds more than the limit of {}", field_is_path ? "it" : name, limit_text));
  }
  if (in.bad()) fail(field, fmt::format("cannot read all of {}", field_is_path ? "the file" : name));
  return bytes;
}

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, fmt::format("cannot open the file: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      fail(path, fmt::format("cannot map the file: {}", std::strerror(error)));
    }
    data_ = static_cast<const std::byte*>(map);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release_pages(std::span<const std::byte> range) const {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(range.data()), end = begin + range.size();
  const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  const auto mapped = reinterpret_cast<std::uintptr_t>(data_);
  if (begin < mapped || end > mapped + size_ || first >= last) return;  // not this mapping's, or no whole page
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void write_file_whole(const std::string& path, const std::function<bool(std::FILE*)>& write) {
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) fail(path, fmt::format("cannot write the file: {}", std::strerror(errno)));
  bool ok = false;
  try {
    ok = write(f);
  } catch (...) {  // out of memory, say: no half-written file left behind
    std::fclose(f);
    std::remove(partial.c_str());
    throw;
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    fail(path, "could not write the whole file (disk full, or the directory is not writable)");
  }
}

}  // namespace attnlab
