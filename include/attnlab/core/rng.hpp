// attnlab's own seeded random numbers, identical on every machine and standard library.
//
// splitmix64 for the bits, Box–Muller for normals (std::normal_distribution differs
// between standard libraries, so it is never used). docs/scenario-format.md states the
// exact recipe so another implementation can reproduce a random head.
#pragma once
#include <cstdint>

namespace attnlab {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in (0, 1]: the top 53 bits of a draw, plus one, times 2^-53.
  double uniform();
  // Standard normal from two uniforms u1, u2: sqrt(-2 ln u1) · cos(2π u2).
  double normal();

 private:
  std::uint64_t state_;
};

}  // namespace attnlab
