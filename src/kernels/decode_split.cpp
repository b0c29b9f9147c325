// Split-K decoding: work items are (KV head, chunk of the cache); each leaves, for every
// query of its KV head's group, a partial state (max m_c, sum s_c, unnormalised output o_c).
// The merge: M = max_c m_c, out = Σ_c o_c·2^(m_c - M) / Σ_c s_c·2^(m_c - M).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "attnlab/kernels/flash_decode.hpp"
#include "attnlab/kernels/team.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

namespace {

// The new tokens' queries against keys [first_key, end_key) of the cache, the first new
// token at position `position` (each later one a position further).
void decode_keys(const KVCache& cache, std::size_t layer, std::size_t heads, std::span<const float> queries,
                 std::size_t n_new, std::size_t position, std::size_t first_key, std::size_t end_key,
                 std::span<float> out, const DecodeOptions& options) {
  const std::size_t d = cache.head_dim(), kv_heads = cache.kv_heads();
  const std::size_t group = heads / kv_heads, count = n_new * group,
                    d_pad = (d + kernels::kDecodeRowPad - 1) / kernels::kDecodeRowPad * kernels::kDecodeRowPad;
  const std::size_t chunk = std::max<std::size_t>(options.chunk, 1), chunks = (end_key - first_key + chunk - 1) / chunk;
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const float log2_scale = static_cast<float>(scale / options.temperature * M_LOG2E);
  const Isa isa = usable_isa(options.isa);
  const auto run_kernel = [isa](const kernels::DecodeRun& run) {
    switch (isa) {
      case Isa::generic: return kernels::generic::decode_run(run);
      case Isa::avx2: return kernels::avx2::decode_run(run);
      default: return kernels::avx512::decode_run(run);
    }
  };

  // Each KV head's queries gathered contiguously: query i = (token t, head g·group + k),
  // i = t·group + k; token t sees keys up to m - n_new + t.
  // Buffers kept between calls (decoding calls this once per token): see decode_tiles.cpp.
  thread_local std::vector<float> grouped, part_max, part_sum, part_out;
  thread_local std::vector<std::size_t> last_visible;
  grouped.resize(kv_heads * count * d);
  last_visible.resize(count);
  for (std::size_t g = 0; g < kv_heads; ++g)
    for (std::size_t t = 0; t < n_new; ++t)
      for (std::size_t k = 0; k < group; ++k)
        std::copy_n(queries.data() + (t * heads + g * group + k) * d, d,
                    grouped.data() + (g * count + t * group + k) * d);
  for (std::size_t i = 0; i < count; ++i)
    last_visible[i] = position + i / group;

  // Partial states per (KV head, chunk): max and sum per query, output per query.
  const std::size_t items = kv_heads * chunks;
  part_max.resize(items * count);
  part_sum.resize(items * count);
  part_out.resize(items * count * d_pad);
  // The worker threads reach these buffers through plain pointers: a thread_local named
  // inside the parallel loop would be the worker's own (empty) one.
  const float* grouped_rows = grouped.data();
  const std::size_t* last_rows = last_visible.data();
  float *max_rows = part_max.data(), *sum_rows = part_sum.data(), *out_rows = part_out.data();
  share_items(items, options.threads, [&](std::size_t item) {
    const std::size_t g = item / chunks, c = item % chunks;
    kernels::DecodeRun run;
    run.d = d;
    run.queries = grouped_rows + g * count * d;
    run.count = count;
    run.log2_scale = log2_scale;
    run.last_visible = last_rows;
    run.first = first_key + c * chunk;
    run.end = std::min(end_key, run.first + chunk);
    if (cache.type() == CacheType::q8_0) {
      // The kernels read f32, f16 and bf16 in place; a q8_0 chunk is read back as f32 into the
      // worker's own scratch first (a chunk of rows: it stays in L2).
      thread_local std::vector<float> keys, values;
      const std::size_t rows = run.end - run.first;
      keys.resize(rows * d);
      values.resize(rows * d);
      cache.load_keys(layer, g, run.first, rows, keys);
      cache.load_values(layer, g, run.first, rows, values);
      run.keys = keys.data();
      run.values = values.data();
      run.dtype = DType::f32;
    } else {
      const std::size_t offset = run.first * cache.row_bytes();
      run.keys = static_cast<const char*>(cache.keys(layer, g)) + offset;
      run.values = static_cast<const char*>(cache.values(layer, g)) + offset;
      run.dtype = stored_dtype(cache.type());
    }
    run.max = max_rows + item * count;
    run.sum = sum_rows + item * count;
    run.out = out_rows + item * count * d_pad;
    run_kernel(run);
  });

  // Merge the chunks of each KV head, query by query.
  for (std::size_t g = 0; g < kv_heads; ++g)
    for (std::size_t i = 0; i < count; ++i) {
      float top = -std::numeric_limits<float>::infinity();
      for (std::size_t c = 0; c < chunks; ++c)
        top = std::max(top, part_max[(g * chunks + c) * count + i]);
      float* dst = out.data() + ((i / group) * heads + g * group + i % group) * d;
      std::fill(dst, dst + d, 0.0f);
      if (top == -std::numeric_limits<float>::infinity()) continue;
      float total = 0.0f;
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t item = g * chunks + c;
        if (part_max[item * count + i] == -std::numeric_limits<float>::infinity()) continue;
        const float weight = std::exp2(part_max[item * count + i] - top);
        total += part_sum[item * count + i] * weight;
        const float* o = part_out.data() + (item * count + i) * d_pad;
        for (std::size_t col = 0; col < d; ++col)
          dst[col] += o[col] * weight;
      }
      for (std::size_t col = 0; col < d; ++col)
        dst[col] /= total;
    }
}

}  // namespace

void flash_decode(const KVCache& cache, std::size_t layer, std::size_t heads, std::span<const float> queries,
                  std::size_t n_new, std::span<float> out, const DecodeOptions& options) {
  const std::size_t d = cache.head_dim(), m = cache.length(layer);
  assert(heads % cache.kv_heads() == 0 && n_new >= 1 && n_new <= m);
  assert(queries.size() == n_new * heads * d && out.size() == n_new * heads * d);
  assert(!options.window || *options.window >= 1);
  const std::size_t row = heads * d;
  if (!options.window) {
    // Many new tokens (a prompt through the cache) go a block at a time: a block's partial
    // states, a max, a sum and a padded output row for each of its queries and each chunk of
    // keys, stay within options.partial_bytes (all n_new at once held n_new × m / chunk rows:
    // 0.9 GiB for 16,384 tokens of a 7-to-1 grouped model), and a block reads only the keys its
    // last token sees.
    const std::size_t group = heads / cache.kv_heads(), chunk = std::max<std::size_t>(options.chunk, 1),
                      chunks = (m + chunk - 1) / chunk,
                      d_pad = (d + kernels::kDecodeRowPad - 1) / kernels::kDecodeRowPad * kernels::kDecodeRowPad;
    const std::size_t per_token = cache.kv_heads() * chunks * group * (d_pad + 2) * sizeof(float);
    const std::size_t block = std::max<std::size_t>(1, options.partial_bytes / per_token);
    for (std::size_t t = 0; t < n_new; t += block) {
      const std::size_t count = std::min(block, n_new - t), position = m - n_new + t;
      decode_keys(cache, layer, heads, queries.subspan(t * row, count * row), count, position, 0, position + count,
                  out.subspan(t * row, count * row), options);
    }
    return;
  }
  // A sliding window: each new token sees its own last w keys, so each runs on its own.
  const std::size_t w = *options.window;
  for (std::size_t t = 0; t < n_new; ++t) {
    const std::size_t position = m - n_new + t, first_key = position + 1 > w ? position + 1 - w : 0;
    decode_keys(cache, layer, heads, queries.subspan(t * row, row), 1, position, first_key, position + 1,
                out.subspan(t * row, row), options);
  }
}

}  // namespace attnlab
