// splitmix64 (Steele, Lea, Flood 2014) and a Box–Muller normal on top of it.
#include "attnlab/core/rng.hpp"

#include <cmath>
#include <numbers>

namespace attnlab {

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }

double SplitMix64::normal() {
  const double u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace attnlab
