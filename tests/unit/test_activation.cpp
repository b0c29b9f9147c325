// The activations' vector kernel (attnlab/kernels/activation.hpp) against the formulas in
// double, on every instruction set this CPU runs: GELU and SiLU, alone and gated, rows whose
// width is not a whole vector, values from −100 to 100 (where e^(±a) would overflow f32 if
// taken whole), zeros of both signs; and the threads' split of the rows changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/activation.hpp"
#include "runnable_isas.hpp"

using attnlab::ActivationKind;

namespace {

double formula(ActivationKind f, double x) {
  if (f == ActivationKind::silu) return x / (1 + std::exp(-x));
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1 + std::tanh(u));
}

}  // namespace

TEST(Activation, VectorKernelIsTheFormulaOnEveryInstructionSetWidthAndRange) {
  attnlab::SplitMix64 rng(11);
  for (const attnlab::Isa isa : attnlab::test::runnable_isas())
    for (ActivationKind f : {ActivationKind::gelu, ActivationKind::silu})
      for (bool gated : {false, true})
        for (std::size_t cols : {1, 15, 16, 17, 100, 3072}) {
          const std::size_t rows = 3, ld_in = 2 * cols + 5, ld_out = cols + 2;
          std::vector<float> in(rows * ld_in), out(rows * ld_out, 7.0f);
          for (std::size_t k = 0; k < in.size(); ++k)
            in[k] = k % 97 == 0   ? 100.0f
                    : k % 89 == 0 ? -100.0f
                    : k % 83 == 0 ? -0.0f
                                  : static_cast<float>(rng.uniform() * 24 - 12);
          const float* up = gated ? in.data() + cols : nullptr;
          attnlab::activation_rows(f, in.data(), up, ld_in, rows, cols, out.data(), ld_out, 1, isa);
          for (std::size_t i = 0; i < rows; ++i) {
            for (std::size_t j = 0; j < cols; ++j) {
              // Within 2e-6 of |x · up| (both functions are smaller than |x|): f32's own
              // rounding of x³ and of e^(−a) at a ~ 10 is of that order.
              const double x = in[i * ld_in + j], scale = gated ? double(up[i * ld_in + j]) : 1.0;
              const double want = formula(f, x) * scale;
              ASSERT_NEAR(out[i * ld_out + j], want, 2e-6 * std::abs(x * scale) + 1e-30)
                  << to_string(isa) << (f == ActivationKind::gelu ? " gelu" : " silu") << (gated ? " gated" : "")
                  << ", width " << cols << ", value " << in[i * ld_in + j];
            }
            EXPECT_EQ(out[i * ld_out + cols], 7.0f) << "past the row's width, nothing is written";
          }
        }
}

TEST(Activation, RowsSplitOverThreadsGiveTheSameValues) {
  std::vector<float> in(64 * 1000), one(in.size()), four(in.size());
  for (std::size_t k = 0; k < in.size(); ++k)
    in[k] = static_cast<float>(std::sin(double(k))) * 6;
  attnlab::activation_rows(ActivationKind::gelu, in.data(), nullptr, 1000, 64, 1000, one.data(), 1000, 1);
  attnlab::activation_rows(ActivationKind::gelu, in.data(), nullptr, 1000, 64, 1000, four.data(), 1000, 4);
  EXPECT_EQ(one, four);
}
