// Head detectors (attnlab/model/detectors.hpp).
#include "attnlab/model/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnlab/core/json.hpp"
#include "attnlab/core/rng.hpp"

namespace attnlab {

std::vector<float> detector_pattern(Detector detector, std::span<const int> ids) {
  const std::size_t n = ids.size();
  std::vector<float> p(n * n, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      bool on = false;
      switch (detector) {
        case Detector::previous_token: on = j + 1 == i; break;
        case Detector::duplicate_token: on = j < i && ids[j] == ids[i]; break;
        case Detector::induction: on = j >= 1 && j - 1 < i && ids[j - 1] == ids[i]; break;
        case Detector::sink: on = j == 0 && i > 0; break;
      }
      p[i * n + j] = on ? 1.0f : 0.0f;
    }
  return p;
}

double detector_score(std::span<const float> a, std::span<const float> pattern, std::size_t n) {
  double total = 0;
  std::size_t rows = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double on_pattern = 0;
    bool has_key = false;
    for (std::size_t j = 0; j < n; ++j)
      if (pattern[i * n + j] != 0) has_key = true, on_pattern += a[i * n + j];
    if (has_key) total += on_pattern, ++rows;
  }
  return rows ? total / static_cast<double>(rows) : std::numeric_limits<double>::quiet_NaN();
}

std::vector<int> repeated_random_tokens(std::uint64_t seed, std::size_t k, std::size_t vocab, int bos) {
  SplitMix64 rng(seed);
  std::vector<int> half(k);
  for (int& t : half) {
    do
      t = static_cast<int>(rng.next() % vocab);
    while (t == bos && vocab > 1);
  }
  std::vector<int> ids{bos};
  ids.insert(ids.end(), half.begin(), half.end());
  ids.insert(ids.end(), half.begin(), half.end());
  return ids;
}

std::vector<std::vector<int>> default_detector_sequences(const ModelConfig& config, std::uint64_t seed,
                                                         std::size_t count) {
  // k from the longest repeat the positions allow (at most 32) down to half of it, so that
  // a head looking a fixed distance back cannot pass for an induction head.
  const std::size_t longest = std::max<std::size_t>(1, std::min<std::size_t>(32, (config.n_positions - 1) / 2));
  const std::size_t shortest = std::max<std::size_t>(1, longest / 2);
  std::vector<std::vector<int>> out;
  for (std::size_t s = 0; s < count; ++s) {
    const std::size_t k = longest - s * (longest - shortest) / std::max<std::size_t>(count - 1, 1);
    out.push_back(repeated_random_tokens(seed + s, k, config.vocab_size, static_cast<int>(config.vocab_size - 1)));
  }
  return out;
}

std::vector<HeadScores> score_heads(const ForwardResult& run, std::span<const int> ids) {
  const std::size_t n = ids.size();
  const std::vector<float> p_prev = detector_pattern(Detector::previous_token, ids),
                           p_dup = detector_pattern(Detector::duplicate_token, ids),
                           p_ind = detector_pattern(Detector::induction, ids),
                           p_sink = detector_pattern(Detector::sink, ids);
  std::vector<HeadScores> scores;
  for (std::size_t l = 0; l < run.attention.size(); ++l)
    for (std::size_t h = 0; h < run.attention[l].size() / (n * n); ++h) {
      const std::span<const float> a(run.attention[l].data() + h * n * n, n * n);
      scores.push_back({{l, h},
                        detector_score(a, p_prev, n),
                        detector_score(a, p_dup, n),
                        detector_score(a, p_ind, n),
                        detector_score(a, p_sink, n)});
    }
  return scores;
}

std::vector<HeadScores> head_scores_of(const SparseAttention& sparse, std::size_t heads) {
  std::vector<HeadScores> scores;
  for (std::size_t l = 0; l < sparse.detectors.size(); ++l)
    for (std::size_t h = 0; h < heads; ++h) {
      const double* d = sparse.detectors[l].data() + h * 4;  // previous, duplicate, induction, sink
      scores.push_back({{l, h}, d[0], d[1], d[2], d[3]});
    }
  return scores;
}

std::vector<HeadScores> detect_heads(const Model& model, const std::vector<std::vector<int>>& sequences) {
  const std::size_t layers = model.config.n_layer, heads = model.config.n_head;
  struct Sum {
    double total = 0;
    std::size_t count = 0;
    void add(double x) {
      if (!std::isnan(x)) total += x, ++count;
    }
    double mean() const { return count ? total / static_cast<double>(count) : 0.0; }
  };
  std::vector<Sum> previous(layers * heads), duplicate(layers * heads), induction(layers * heads), sink(layers * heads);
  for (const std::vector<int>& ids : sequences) {
    // The detectors from the forward's pass over each row's scores (SparseAttention): no n × n
    // weights kept, so a sequence may be as long as the model's positions.
    const ForwardResult r = model_forward(model, ids, {.logits = LogitRows::none, .sparse_top = 1});
    for (const HeadScores& s : head_scores_of(r.sparse, heads)) {
      const std::size_t k = s.head.layer * heads + s.head.head;
      previous[k].add(s.previous_token);
      duplicate[k].add(s.duplicate_token);
      induction[k].add(s.induction);
      sink[k].add(s.sink);
    }
  }
  std::vector<HeadScores> scores(layers * heads);
  for (std::size_t k = 0; k < scores.size(); ++k)
    scores[k] = {{k / heads, k % heads}, previous[k].mean(), duplicate[k].mean(), induction[k].mean(), sink[k].mean()};
  return scores;
}

nlohmann::json head_scores_json(const std::vector<HeadScores>& scores) {
  nlohmann::json list = nlohmann::json::array();
  for (const HeadScores& s : scores)
    list.push_back({{"layer", s.head.layer},
                    {"head", s.head.head},
                    {"previous_token", number_or_null(s.previous_token)},
                    {"duplicate_token", number_or_null(s.duplicate_token)},
                    {"induction", number_or_null(s.induction)},
                    {"sink", number_or_null(s.sink)}});
  return {{"heads", std::move(list)}};
}

}  // namespace attnlab
