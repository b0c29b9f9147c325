// Counts and byte sizes as people write them, and 64-bit arithmetic that refuses to wrap.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attnlab {

// a · b, or nothing when the product does not fit in 64 bits.
std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b);
// a + b, or nothing when the sum does not fit in 64 bits.
std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b);

// "10,000,000,000": the exact integer with a comma every three digits.
std::string format_count(std::uint64_t n);

// Throws InputError naming `field` unless 1 <= value <= limit.
void require_in_range(std::string_view field, std::uint64_t value, std::uint64_t limit);

// A byte count in the largest binary unit it reaches, to 2 decimals without trailing
// zeros: "18 B", "2.25 KiB", "512 MiB", "1 GiB", "14.96 GiB".
std::string format_bytes(std::uint64_t bytes);

// Parses a byte size: a number >= 0 with an optional fraction, then a unit, with or
// without a space: B, kB/KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), case-insensitive; no unit means bytes. "24GiB" = 24·2^30, "512MiB", "1.5GB" =
// 1.5e9. A fraction of a byte rounds down. Throws InputError naming `field`, the text, and
// examples of accepted sizes, for anything else (empty, negative, unknown unit, 0 bytes,
// more than 2^64 - 1 bytes).
std::uint64_t parse_byte_size(std::string_view text, std::string_view field);

}  // namespace attnlab
