// One head's weights at any length, pooled (ForwardOptions::head_map, forward.hpp's HeadMap; the
// `model map` operation): each cell the largest weight of its block that the queries see, and
// where it is, equal to what the dense weights of the same text give; a window at one weight a
// cell equal to those weights; the forward stopped at the head's layer giving the same map.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/training.hpp"
#include "attnlab/operations/model.hpp"
#include "model_fixtures.hpp"

namespace {

using namespace attnlab;

// A model of 256 positions (the fixtures have 64: one block of the score products), of the
// family and sliding window asked for, with grouped-query heads.
Model made_model(const char* family, std::size_t window) { return test::seeded_model(family, 256, window, 5); }

std::vector<int> text_of(std::size_t n) {
  std::vector<int> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = int((i * 13 + 5) % 64);
  return ids;
}

// The map a window of the dense weights gives: per cell, the largest weight of a query and key
// it covers that the query sees (j ≤ i, within the layer's window), or none.
void expect_dense_map(const ModelConfig& c, const ForwardResult& dense, const HeadMap& map) {
  const HeadMapWindow& w = map.window;
  const std::size_t n = dense.n, across = w.cells_across(), window = c.window(w.head.layer);
  const float* weights = dense.attention[w.head.layer].data() + w.head.head * n * n;
  ASSERT_EQ(map.weights.size(), w.cells_down() * across);
  for (std::size_t a = 0; a < w.cells_down(); ++a)
    for (std::size_t b = 0; b < across; ++b) {
      float best = -1;
      for (std::size_t i = w.row0 + a * w.tile; i < std::min(w.row0 + w.rows, w.row0 + (a + 1) * w.tile); ++i)
        for (std::size_t j = w.col0 + b * w.tile; j < std::min(w.col0 + w.cols, w.col0 + (b + 1) * w.tile); ++j)
          if (j <= i && (window == 0 || i - j < window)) best = std::max(best, weights[i * n + j]);
      const std::size_t cell = a * across + b;
      if (best < 0) {
        EXPECT_TRUE(std::isnan(map.weights[cell])) << "cell " << a << ", " << b << " is seen by none";
        EXPECT_EQ(map.query[cell], HeadMap::none);
        continue;
      }
      ASSERT_NEAR(map.weights[cell], best, 1e-5) << "cell " << a << ", " << b;
      ASSERT_NEAR(weights[map.query[cell] * n + map.key[cell]], best, 1e-5) << "where the cell's weight is";
      EXPECT_EQ((map.query[cell] - w.row0) / w.tile, a);
      EXPECT_EQ((map.key[cell] - w.col0) / w.tile, b);
    }
}

TEST(HeadMap, IsTheDenseWeightsLargestPerBlock) {
  for (const auto& [family, window] : {std::pair{"llama", std::size_t{0}}, {"mistral", std::size_t{40}}}) {
    SCOPED_TRACE(family);
    const Model model = made_model(family, window);
    const std::size_t n = 150;  // three blocks of 64 queries, the last short
    const std::vector<int> ids = text_of(n);
    const ForwardResult dense = model_forward(model, ids, {.logits = LogitRows::none, .keep_attention = true});
    for (const HeadRef head : {HeadRef{0, 1}, HeadRef{1, 3}})
      for (const HeadMapWindow& w : {
               HeadMapWindow{head, 0, 0, n, n, 7},      // the whole head in blocks of 7 (a short last one)
               HeadMapWindow{head, 0, 0, n, n, 150},    // one cell: the head's largest weight
               HeadMapWindow{head, 60, 20, 48, 48, 1},  // a window across a block's edge, a weight a cell
               HeadMapWindow{head, 100, 0, 50, 130, 9},
           }) {
        SCOPED_TRACE(to_string(head) + " from " + std::to_string(w.row0) + ", " + std::to_string(w.col0) + " tile " +
                     std::to_string(w.tile));
        const ForwardResult r = model_forward(model, ids, {.logits = LogitRows::none, .head_map = w});
        EXPECT_TRUE(r.attention.empty()) << "no n × n weights kept";
        expect_dense_map(model.config, dense, r.head_map);
        // stopped at the head's layer: the same map, from the same stream
        const ForwardResult stopped =
            model_forward(model, ids, {.logits = LogitRows::none, .head_map = w, .last_layer = head.layer});
        EXPECT_EQ(stopped.head_map.query, r.head_map.query);
        EXPECT_EQ(stopped.head_map.key, r.head_map.key);
      }
  }
}

TEST(HeadMap, RefusesWhatIsNotAWindowOrStopsWithLogits) {
  const Model model = made_model("llama", 0);
  const std::vector<int> ids = text_of(20);
  const auto refused = [&](const ForwardOptions& options, const std::string& field) {
    try {
      (void)model_forward(model, ids, options);
      ADD_FAILURE() << "not refused";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  };
  refused({.logits = LogitRows::none, .head_map = HeadMapWindow{{0, 0}, 10, 0, 11, 5, 1}}, "head_map");
  refused({.logits = LogitRows::none, .head_map = HeadMapWindow{{2, 0}, 0, 0, 20, 20, 1}}, "head_map");
  refused({.logits = LogitRows::none, .head_map = HeadMapWindow{{0, 0}, 0, 0, 20, 20, 0}}, "head_map");
  refused({.logits = LogitRows::last, .last_layer = 0}, "last_layer");
  refused({.logits = LogitRows::none, .head_map = HeadMapWindow{{1, 0}, 0, 0, 20, 20, 1}, .last_layer = 0},
          "last_layer");
}

// The operation: the whole head in ⌈n / cells⌉ blocks, or a window from query and key cut at
// the text's end; a position past the text refused naming its field.
TEST(HeadMap, TheOperationPricesTheWindow) {
  const ModelDir dir{"made", made_model("llama", 0), std::nullopt};
  MapRequest request;
  request.text.ids = text_of(100);
  request.head = {HeadRef{1, 2}};
  request.cells = 30;
  MapResult whole = price_map(dir, request);
  EXPECT_EQ(whole.options.head_map->tile, 4u);
  EXPECT_EQ(whole.options.head_map->cells_down(), 25u);
  EXPECT_EQ(whole.options.last_layer, 1u);
  request.query = 90;
  request.key = 5;
  const MapResult window = price_map(dir, request);
  EXPECT_EQ(window.options.head_map->tile, 1u);
  EXPECT_EQ(window.options.head_map->rows, 10u) << "cut at the text's end";
  EXPECT_EQ(window.options.head_map->cols, 30u);
  run_map(dir, whole);
  const nlohmann::json reply = map_json(dir, whole);
  EXPECT_EQ(reply["head"], "1.2");
  EXPECT_EQ(reply["kv_head"], 1);
  ASSERT_EQ(reply["weights"].size(), 25u);
  EXPECT_TRUE(reply["weights"][0][1].is_null()) << "above the diagonal";
  EXPECT_TRUE(reply["weights"][24][0].is_number());
  request.key = 100;
  try {
    (void)price_map(dir, request);
    ADD_FAILURE() << "a key past the text was not refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "key");
  }
}

}  // namespace
