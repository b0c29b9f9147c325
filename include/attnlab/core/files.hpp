// Reading a file someone else gave: the one bounded reader every face and layer uses.
#pragma once
#include <cstdint>
#include <filesystem>
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

}  // namespace attnlab
