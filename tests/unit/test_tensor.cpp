// Tensors viewed where a checkpoint holds them (attnlab/model/tensor.hpp): every layout and
// dtype a view can have multiplies like its values widened to f32 and multiplied by the
// reference product (a plain triple loop in double); a 16-bit checkpoint loads without a
// copy and stays 16-bit; a tensor whose bytes sit misaligned in the file still loads; and
// LoadOptions::f32 widens every weight without changing a logit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/ggml_type.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/tensor.hpp"
#include "compare.hpp"
#include "model_fixtures.hpp"
#include "random_inputs.hpp"
#include "runnable_isas.hpp"

using namespace attnlab;
using attnlab::test::all_close;
using attnlab::test::random_floats;
using attnlab::test::widened;
namespace fs = std::filesystem;

namespace tensor_test {  // named: the unit tests compile as unity batches

const fs::path kFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

// `values` [rows × cols] stored as `dtype`, transposed or not: the bytes a file would hold.
std::vector<std::byte> stored(const std::vector<float>& values, std::size_t rows, std::size_t cols, DType dtype,
                              bool transposed) {
  std::vector<std::byte> out(rows * cols * dtype_bytes(dtype));
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t at = transposed ? c * rows + r : r * cols + c;
      const float x = values[r * cols + c];
      if (dtype == DType::f32) {
        std::memcpy(out.data() + at * 4, &x, 4);
      } else {
        const std::uint16_t h = dtype == DType::f16 ? f32_to_f16(x) : f32_to_bf16(x);
        std::memcpy(out.data() + at * 2, &h, 2);
      }
    }
  return out;
}

// The values a dtype holds for `values`: what the view must multiply by.
std::vector<float> rounded(std::vector<float> values, DType dtype) {
  for (float& x : values)
    x = dtype == DType::f32 ? x : dtype == DType::f16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
  return values;
}

// y = x · W in double, W [in × out] row-major.
std::vector<double> reference_product(const std::vector<float>& x, std::size_t n, const std::vector<float>& w,
                                      std::size_t in, std::size_t out) {
  std::vector<double> y(n * out, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < in; ++k)
      for (std::size_t j = 0; j < out; ++j)
        y[i * out + j] += double(x[i * in + k]) * w[k * out + j];
  return y;
}

struct Layout {
  DType dtype;
  bool transposed;
};

class TensorView : public ::testing::TestWithParam<Layout> {};

// Three pieces side by side (as W_Q | W_K | W_V are), 700 rows so that a 16-bit piece is
// widened in more than one block; one token (decoding) and five (a prompt); accumulating onto
// y (beta = 1) as the forward adds a bias.
TEST_P(TensorView, MultipliesLikeItsValuesAndReadsBackThem) {
  const auto [dtype, transposed] = GetParam();
  const std::size_t in = 700, widths[] = {384, 64, 64}, out = 512;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<Tensor::Piece> pieces;
  std::vector<float> logical(in * out);
  std::size_t first = 0;
  for (std::size_t p = 0; p < 3; ++p) {
    const std::vector<float> part = rounded(random_floats(in * widths[p], 10 + unsigned(p)), dtype);
    for (std::size_t r = 0; r < in; ++r)
      std::copy_n(part.data() + r * widths[p], widths[p], logical.data() + r * out + first);
    bytes.push_back(stored(part, in, widths[p], dtype, transposed));
    pieces.push_back({widths[p], ggml_type_of(dtype), transposed, bytes.back().data()});
    first += widths[p];
  }
  const Tensor view = Tensor::view(in, out, pieces, nullptr);
  EXPECT_FALSE(view.owned());
  EXPECT_EQ(view.type(), ggml_type_of(dtype));
  EXPECT_EQ(view.bytes(), in * out * dtype_bytes(dtype));
  EXPECT_EQ(view.to_f32(), logical);
  std::vector<float> row(out);
  view.row(123, out, row.data());
  EXPECT_EQ(row, std::vector<float>(logical.begin() + 123 * out, logical.begin() + 124 * out));
  const std::vector<float> block = view.columns(in, out, 400, 32);
  for (std::size_t r = 0; r < in; ++r)
    for (std::size_t c = 0; c < 32; ++c)
      ASSERT_EQ(block[r * 32 + c], logical[r * out + 400 + c]) << r << ", " << c;
  for (std::size_t n : {1u, 5u}) {
    const std::vector<float> x = random_floats(n * in, 7);
    std::vector<float> y(n * out, 1.0f);
    multiply(x.data(), n, in, view, out, y.data(), 1.0f);
    std::vector<double> expected = reference_product(x, n, logical, in, out);
    for (double& e : expected)
      e += 1.0;
    // f32 sums of 700 products of N(0,1) values (|y| ~ 26): within 1e-4 relative.
    EXPECT_TRUE(all_close(widened(y), expected, {1e-3, 1e-4})) << n << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLayout, TensorView,
                         ::testing::Values(Layout{DType::f32, false}, Layout{DType::f32, true},
                                           Layout{DType::f16, false}, Layout{DType::f16, true},
                                           Layout{DType::bf16, false}, Layout{DType::bf16, true}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) +
                                  (info.param.transposed ? "_transposed" : "_as_is");
                         });

// A quantized matrix as GGUF stores a linear layer ([out, in] rows of blocks: a transposed
// piece) and an embedding ([vocab, d]: as it is): products, rows and columns are those of its
// dequantized values (dequantize() itself is checked against NumPy in test_gguf.cpp).
TEST(TensorViewQuantized, MultipliesReadsRowsAndColumnsLikeItsDequantizedValues) {
  for (GgmlType type : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
    const std::size_t in = 512, out = 40, row_bytes = ggml_row_bytes(type, in);
    std::mt19937 rng{static_cast<unsigned>(type)};
    std::vector<std::byte> bytes(out * row_bytes);
    for (std::byte& b : bytes)
      b = std::byte(rng() & 0xFF);
    // Every block's scales finite: d (and dmin) an f16 of 0.01, where the type keeps them.
    const std::size_t block = ggml_block_bytes(type), d_at = type == GgmlType::q6_k ? 208 : 0;
    const bool has_min = type == GgmlType::q4_k || type == GgmlType::q5_k;
    for (std::size_t at = 0; at < bytes.size(); at += block) {
      const std::uint16_t d = f32_to_f16(0.01f);
      std::memcpy(bytes.data() + at + d_at, &d, 2);
      if (has_min) std::memcpy(bytes.data() + at + 2, &d, 2);
    }
    std::vector<float> stored(out * in);  // [out × in], each row dequantized
    dequantize(type, bytes.data(), stored.size(), stored.data());
    std::vector<float> logical(in * out);  // W [in × out]
    for (std::size_t o = 0; o < out; ++o)
      for (std::size_t i = 0; i < in; ++i)
        logical[i * out + o] = stored[o * in + i];
    const Tensor linear = Tensor::view(in, out, {{out, type, true, bytes.data()}}, nullptr);
    EXPECT_EQ(linear.type(), type);
    EXPECT_EQ(linear.bytes(), bytes.size());
    EXPECT_EQ(linear.to_f32(), logical);
    EXPECT_EQ(linear.columns(in, out, 7, 3), Tensor(logical).columns(in, out, 7, 3));
    const std::vector<float> x = random_floats(2 * in, 5);
    std::vector<float> y(2 * out);
    multiply(x.data(), 2, in, linear, out, y.data());
    // Within 1e-6 of Σ |x·w|, the scale of a dot product's rounding (the sums cancel: a
    // bound relative to the result would ask more than an f32 loop over the values gives),
    // and the int8 dot products' own bound where the CPU takes them (Q4_K's and Q5_K's with
    // AVX2 or AVX-512 VNNI, Q8_0's and Q6_K's with AVX-512 VNNI).
    const std::vector<double> expected = reference_product(x, 2, logical, in, out);
    const bool k = type == GgmlType::q4_k || type == GgmlType::q5_k;
    const bool int8 = (k && (best_isa() == Isa::avx2 || best_isa() == Isa::avx512_bf16)) ||
                      ((type == GgmlType::q8_0 || type == GgmlType::q6_k) && best_isa() == Isa::avx512_bf16);
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        double scale = 0;
        for (std::size_t i = 0; i < in; ++i)
          scale += std::abs(double(x[r * in + i]) * logical[i * out + o]);
        const double int8_bound = int8 ? test::int8_parts_bound(&x[r * in], &logical[o], in, out) : 0.0;
        EXPECT_NEAR(y[r * out + o], expected[r * out + o], 1e-6 * scale + int8_bound)
            << ggml_type_name(type) << " column " << o;
      }
    const Tensor embedding = Tensor::view(out, in, {{in, type, false, bytes.data()}}, nullptr);  // [40 × 512]
    std::vector<float> row(in);
    embedding.row(13, in, row.data());
    EXPECT_EQ(row, std::vector<float>(stored.begin() + 13 * in, stored.begin() + 14 * in));
  }
}

// The unembedding (logits = x · Eᵀ) by a 16-bit [vocab × d] view, in blocks of rows.
TEST(TensorViewUnembedding, MultipliesByTheTransposeLikeItsValues) {
  const std::size_t vocab = 3000, d = 96, n = 3;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::vector<float> e = rounded(random_floats(vocab * d, 3), dtype);
    const std::vector<std::byte> bytes = stored(e, vocab, d, dtype, false);
    const Tensor view = Tensor::view(vocab, d, {{d, ggml_type_of(dtype), false, bytes.data()}}, nullptr);
    const std::vector<float> x = random_floats(n * d, 4);
    std::vector<float> y(n * vocab);
    multiply_by_transpose(x.data(), n, d, view, vocab, y.data());
    std::vector<double> expected(n * vocab, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t v = 0; v < vocab; ++v)
        for (std::size_t k = 0; k < d; ++k)
          expected[i * vocab + v] += double(x[i * d + k]) * e[v * d + k];
    EXPECT_TRUE(all_close(widened(y), expected, {1e-4, 1e-4})) << dtype_name(dtype);
  }
}

// A 16-bit checkpoint's matrices are views of the file, in its dtype: the model takes the
// file's bytes (not twice them); LoadOptions::f32 widens them and no logit changes beyond f32
// rounding of the products' order.
TEST(TensorLoading, SixteenBitCheckpointsStaySixteenBitUnlessF32IsAsked) {
  for (const char* dir : {"tiny-bf16", "smollm-bf16", "qwen2-f16"}) {
    const std::string path = (kFixtures / dir).string();
    const Model mapped = load_model(path);
    EXPECT_FALSE(mapped.blocks[0].attn_weight.owned()) << dir;
    EXPECT_FALSE(mapped.wte.owned()) << dir;
    EXPECT_EQ(mapped.blocks[0].attn_weight.type(), ggml_type_of(mapped.stored_dtype)) << dir;
    const std::size_t parameters = mapped.config.parameters();
    // Matrices at 2 bytes a value, the small vectors widened to 4.
    EXPECT_LT(mapped.weight_bytes(), parameters * 2 + parameters / 4) << dir;
    const Model wide = load_model(path, {.f32 = true});
    EXPECT_TRUE(wide.blocks[0].attn_weight.owned()) << dir;
    EXPECT_EQ(wide.weight_bytes(), parameters * 4) << dir;
    const std::vector<int> ids = {1, 5, 2, 7, 3};
    const ForwardResult a = model_forward(mapped, ids, {.keep_attention = true});
    const ForwardResult b = model_forward(wide, ids, {.keep_attention = true});
    EXPECT_TRUE(all_close(widened(a.logits), widened(b.logits), {1e-5, 1e-5})) << dir;
  }
}

// A tensor whose bytes start at an odd offset (an F16 tensor of one value before it) is copied
// once into aligned memory and reads back exactly.
TEST(TensorLoading, MisalignedTensorsAreRealignedOnce) {
  const fs::path src = kFixtures / "tiny-f32";
  const fs::path dir = fs::temp_directory_path() / ("attnlab-misaligned-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(src / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  const SafetensorsFile original((src / "model.safetensors").string());
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  const std::vector<float> one = {0.5f};
  tensors.push_back({"padding", {1}, one, DType::f16});  // 2 bytes: every tensor after it starts misaligned
  for (const TensorInfo& t : original.tensors())
    values.push_back(original.to_f32(t));
  for (std::size_t i = 0; i < original.tensors().size(); ++i)
    tensors.push_back({original.tensors()[i].name, original.tensors()[i].shape, values[i], DType::f32});
  write_safetensors((dir / "model.safetensors").string(), tensors);
  const Model model = load_model(dir.string()), reference = load_model(src.string());
  EXPECT_FALSE(model.wte.owned());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(model.wte.pieces()[0].data) % 4, 0u);
  EXPECT_EQ(model.wte.to_f32(), reference.wte.to_f32());
  EXPECT_EQ(model_forward(model, std::vector<int>{1, 2, 3}).logits,
            model_forward(reference, std::vector<int>{1, 2, 3}).logits);
  fs::remove_all(dir);
}

}  // namespace tensor_test

// The types whose prompts multiply in int8 are int8_gemm's, where the CPU has AVX-512 VNNI.
TEST(TensorViewQuantized, Int8PromptProductsAreQ8_0AndTheKQuantsWithVnni) {
  const bool vnni = best_isa() == Isa::avx512_bf16;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k})
    EXPECT_EQ(int8_prompt_products(type), vnni) << ggml_type_name(type);
  for (const GgmlType type : {GgmlType::f32, GgmlType::f16, GgmlType::bf16, GgmlType::q4_0})
    EXPECT_FALSE(int8_prompt_products(type)) << ggml_type_name(type);
}
