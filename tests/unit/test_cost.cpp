// The grid counts of cost.hpp: the seed's 9, 36 and 10^10, FLOPs 4·n²·d_k per head, causal
// and sliding-window counts checked against the engine's own mask, the strided pattern
// against its definition, and overflow refused with the largest n that fits.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "attnlab/analysis/cost.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/mask.hpp"

using namespace attnlab;

namespace {

// Counted cell by cell with the engine's Mask (causal, optionally a window).
std::uint64_t visible_cells(std::uint64_t n, std::optional<std::size_t> window) {
  MaskSpec spec;
  spec.causal = true;
  spec.window = window;
  const Mask mask(spec, n, n);
  std::uint64_t cells = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      cells += mask.visible(i, j);
  return cells;
}

// Child et al.'s strided pattern by its definition: A1(i) ∪ A2(i), stride l.
std::uint64_t strided_by_definition(std::uint64_t n, std::uint64_t l) {
  std::uint64_t cells = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t j = i >= l ? i - l : 0; j <= i; ++j)
      seen.insert(j);
    for (std::uint64_t j = 0; j <= i; ++j)
      if ((i - j) % l == 0) seen.insert(j);
    cells += seen.size();
  }
  return cells;
}

std::string refusal(std::uint64_t n, const CostShape& shape) {
  try {
    grid_cost(n, shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST(Cost, TheWorkedExamplesGridCountsNineThirtySixAndTenToTheTen) {
  const CostShape shape;
  EXPECT_EQ(grid_cost(3, shape).dense_cells, 9u);
  EXPECT_EQ(grid_cost(6, shape).dense_cells, 36u);
  EXPECT_EQ(grid_cost(100'000, shape).dense_cells, 10'000'000'000u);
}

TEST(Cost, FlopsAreFourTimesCellsTimesDkPerHeadAndCausalCountsTheVisibleHalf) {
  const CostShape shape{4096, 32, 32, DType::f16, 4096};  // d_k = 128
  const GridCost c = grid_cost(3, shape);
  EXPECT_EQ(c.flops_layer_dense, 4u * 9 * 128 * 32);  // 147,456
  EXPECT_EQ(c.causal_cells, 6u);
  EXPECT_EQ(c.flops_layer_causal, 4u * 6 * 128 * 32);
  EXPECT_EQ(c.flops_model_dense, c.flops_layer_dense * 32);
  const GridCost big = grid_cost(100'000, shape);
  EXPECT_EQ(big.flops_layer_dense, 4ull * 10'000'000'000ull * 4096);
  EXPECT_NEAR(static_cast<double>(big.flops_layer_causal) / static_cast<double>(big.flops_layer_dense), 0.5, 1e-4);
}

TEST(Cost, GridBytesAreCellsTimesTheDtypePerHeadAndTimesHPerLayer) {
  CostShape shape;
  shape.dtype = DType::f16;
  EXPECT_EQ(grid_cost(3, shape).grid_bytes_head, 18u);
  EXPECT_EQ(grid_cost(3, shape).grid_bytes_layer, 18u * 32);
  EXPECT_EQ(grid_cost(100'000, shape).grid_bytes_head, 20'000'000'000u);
  shape.dtype = DType::f32;
  EXPECT_EQ(grid_cost(100'000, shape).grid_bytes_head, 40'000'000'000u);
}

TEST(Cost, CausalAndWindowCountsEqualTheEnginesMaskCellByCell) {
  for (std::uint64_t w : {1u, 2u, 5u, 64u}) {
    CostShape shape;
    shape.window = w;
    for (std::uint64_t n : {1u, 2u, 3u, 7u, 64u, 65u, 200u}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " w " << w);
      const GridCost c = grid_cost(n, shape);
      EXPECT_EQ(c.causal_cells, visible_cells(n, std::nullopt));
      EXPECT_EQ(c.window_cells, visible_cells(n, w));
    }
  }
}

TEST(Cost, StridedCountsEqualThePatternsDefinition) {
  const CostShape shape;
  for (std::uint64_t n = 1; n <= 300; n += (n < 40 ? 1 : 17)) {
    const GridCost c = grid_cost(n, shape);
    EXPECT_EQ(c.strided_stride, static_cast<std::uint64_t>(std::ceil(std::sqrt(static_cast<double>(n))))) << n;
    EXPECT_EQ(c.strided_cells, strided_by_definition(n, c.strided_stride)) << n;
  }
}

TEST(Cost, AStrideGivenIsThePatternsStrideAtEveryLength) {
  for (const std::uint64_t stride : {1u, 2u, 7u, 64u, 500u}) {
    const CostShape shape{.stride = stride};
    for (std::uint64_t n = 1; n <= 300; n += (n < 40 ? 1 : 17)) {
      const GridCost c = grid_cost(n, shape);
      EXPECT_EQ(c.strided_stride, stride) << n;
      EXPECT_EQ(c.strided_cells, strided_by_definition(n, stride)) << "n " << n << ", l " << stride;
    }
  }
  EXPECT_EQ(grid_cost(300, CostShape{.stride = 1}).strided_cells, grid_cost(300, CostShape{}).causal_cells)
      << "a stride of 1 sees every earlier key";
}

TEST(Cost, StridedGrowsAsNRootNAndCutsTheGridAtLongContext) {
  const GridCost c = grid_cost(100'000, CostShape{});
  const double n_root_n = 100'000.0 * std::sqrt(100'000.0);
  EXPECT_GT(static_cast<double>(c.strided_cells) / n_root_n, 1.3);
  EXPECT_LT(static_cast<double>(c.strided_cells) / n_root_n, 1.7);
  EXPECT_LT(c.strided_cells * 100, c.dense_cells) << "under 1% of the dense grid at 100k tokens";
}

TEST(Cost, OverflowIsRefusedNamingTokensAndTheLargestNThatFits) {
  const CostShape shape;
  const std::uint64_t largest = largest_costable_tokens(shape);
  EXPECT_NO_THROW(grid_cost(largest, shape));
  const std::string message = refusal(largest + 1, shape);
  EXPECT_EQ(message.rfind("tokens: ", 0), 0u) << message;
  EXPECT_NE(message.find("overflow 64 bits"), std::string::npos) << message;
  EXPECT_NE(message.find("the largest n with this shape is"), std::string::npos) << message;
  EXPECT_NE(refusal(std::uint64_t{1} << 40, shape).find("overflow"), std::string::npos);
  EXPECT_NE(refusal(UINT64_MAX, shape).find("overflow"), std::string::npos);
  // 4·n²·d_model·L must fit: here 4·4096·32 = 2^19, so n² < 2^45, n < 2^22.5.
  EXPECT_EQ(largest, static_cast<std::uint64_t>(std::sqrt(std::ldexp(1.0, 64) / (4.0 * 4096 * 32))));
}

TEST(Cost, ZeroAndBadShapesAreRefusedNamingTheField) {
  EXPECT_EQ(refusal(0, CostShape{}), "tokens: 0 tokens has no grid; give lengths >= 1");
  CostShape shape;
  shape.d_model = 0;
  EXPECT_EQ(refusal(3, shape).rfind("d_model: 0 is outside 1..1,048,576", 0), 0u);
  shape = CostShape{};
  shape.heads = 3;
  EXPECT_EQ(refusal(3, shape).rfind("heads: 3 heads do not divide d_model 4096", 0), 0u);
  shape = CostShape{};
  shape.window = 0;
  EXPECT_EQ(refusal(3, shape).rfind("window: 0 is outside", 0), 0u);
}
