// Every head's QK and OV circuits and the composition between heads (attnlab/analysis/circuits.hpp).
//
// A factored matrix here is L · R with L [d × r] and R [r × d]. Its Frobenius norm and its
// products with another are taken through r × r matrices: with L = Q P (QR, P upper
// triangular [r × r]) and Rᵀ = Q' P', ‖L R‖ = ‖P R‖ = ‖L P'ᵀ‖, and
//   ‖L_a R_a · L_b R_b‖_F = ‖(P_a R_a) · (L_b P'_bᵀ)‖_F = ‖X_a Y_b‖_F,
// X_a [r × d] and Y_b [d × r], so every pair of heads in two layers is one product of the
// layers' stacked X and Y. LAPACK (OpenBLAS's) gives the QR factors, singular values and
// eigenvalues; CBLAS the products.
#include "attnlab/analysis/circuits.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>

#include "attnlab/core/matrix.hpp"
#include "attnlab/core/rng.hpp"

extern "C" {
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* info);
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda, double* wr, double* wi,
            double* vl, const int* ldvl, double* vr, const int* ldvr, double* work, const int* lwork, int* info);
}

namespace attnlab {

namespace {

// A [rows × cols] product a · b of row-major matrices.
Matrix product(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows, b.cols);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(a.rows), int(b.cols), int(a.cols), 1.0, a.data.data(),
              int(a.cols), b.data.data(), int(b.cols), 0.0, out.data.data(), int(out.cols));
  return out;
}

Matrix transposed(const Matrix& a) {
  Matrix out(a.cols, a.rows);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < a.cols; ++j)
      out(j, i) = a(i, j);
  return out;
}

double frobenius(const Matrix& a) {
  double sum = 0;
  for (double x : a.data)
    sum += x * x;
  return std::sqrt(sum);
}

void check(int info, const char* routine) {
  if (info != 0) throw std::runtime_error(std::string(routine) + " failed");
}

// P [r × r], upper triangular, with Pᵀ P = Lᵀ L, for L [d × r] (d ≥ r): QR's R factor.
Matrix r_factor(const Matrix& l) {
  const int m = int(l.rows), n = int(l.cols);
  std::vector<double> a(l.rows * l.cols), tau(l.cols);
  for (std::size_t i = 0; i < l.rows; ++i)  // column-major, as LAPACK reads it
    for (std::size_t j = 0; j < l.cols; ++j)
      a[j * l.rows + i] = l(i, j);
  int lwork = -1, info = 0;
  double size = 0;
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), &size, &lwork, &info);
  std::vector<double> work(std::size_t(size) + 1);
  lwork = int(work.size());
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  check(info, "dgeqrf");
  Matrix p(l.cols, l.cols);
  for (std::size_t i = 0; i < l.cols; ++i)
    for (std::size_t j = i; j < l.cols; ++j)
      p(i, j) = a[j * l.rows + i];
  return p;
}

// The singular values of a square matrix, largest first.
std::vector<double> singular_values(const Matrix& m) {
  const int n = int(m.rows);
  std::vector<double> a = transposed(m).data, s(m.rows);  // column-major
  int lwork = -1, info = 0, one = 1;
  double size = 0, none = 0;
  dgesvd_("N", "N", &n, &n, a.data(), &n, s.data(), &none, &one, &none, &one, &size, &lwork, &info);
  std::vector<double> work(std::size_t(size) + 1);
  lwork = int(work.size());
  dgesvd_("N", "N", &n, &n, a.data(), &n, s.data(), &none, &one, &none, &one, work.data(), &lwork, &info);
  check(info, "dgesvd");
  return s;
}

// Σλ / Σ|λ| over a square matrix's eigenvalues (0 for the zero matrix).
double copying_score(const Matrix& m) {
  const int n = int(m.rows);
  std::vector<double> a = transposed(m).data, wr(m.rows), wi(m.rows);
  int lwork = -1, info = 0, one = 1;
  double size = 0, none = 0;
  dgeev_("N", "N", &n, a.data(), &n, wr.data(), wi.data(), &none, &one, &none, &one, &size, &lwork, &info);
  std::vector<double> work(std::size_t(size) + 1);
  lwork = int(work.size());
  dgeev_("N", "N", &n, a.data(), &n, wr.data(), wi.data(), &none, &one, &none, &one, work.data(), &lwork, &info);
  check(info, "dgeev");
  double sum = 0, moduli = 0;
  for (std::size_t i = 0; i < m.rows; ++i) {
    sum += wr[i];
    moduli += std::abs(std::complex<double>(wr[i], wi[i]));
  }
  return moduli > 0 ? sum / moduli : 0.0;
}

// One head's factors, its input norm folded in: W̃_Q, W̃_K, W̃_V [d × r], W_O [r × d].
struct HeadFactors {
  Matrix q, k, v, o;
};

// The norm a layer's heads read through, as a [d] scale and whether it centres (LayerNorm).
std::vector<double> norm_scale(const ModelConfig& c, const Tensor& weight) {
  std::vector<double> g(weight.begin(), weight.end());
  if (c.norm_plus_one)
    for (double& x : g)
      x += 1.0;
  return g;
}

// (I − 11ᵀ/d) · m: each column less its mean, LayerNorm's centring applied on the left.
void centre_columns(Matrix& m) {
  for (std::size_t j = 0; j < m.cols; ++j) {
    double mean = 0;
    for (std::size_t i = 0; i < m.rows; ++i)
      mean += m(i, j) / double(m.rows);
    for (std::size_t i = 0; i < m.rows; ++i)
      m(i, j) -= mean;
  }
}

// F · W for W [d × r] given as float rows: each row k scaled by γ_k, then (LayerNorm) each
// column centred: (I − 11ᵀ/d) diag(γ) W.
Matrix folded(const std::vector<float>& w, std::size_t d, std::size_t r, const std::vector<double>& gamma,
              bool centre) {
  Matrix out(d, r);
  for (std::size_t k = 0; k < d; ++k)
    for (std::size_t t = 0; t < r; ++t)
      out(k, t) = gamma[k] * double(w[k * r + t]);
  if (centre) centre_columns(out);
  return out;
}

std::vector<std::vector<HeadFactors>> head_factors(const Model& model) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd, r = c.head_dim(), H = c.n_head, G = c.kv_heads(), width = c.qkv_width();
  const bool centre = c.norm == NormKind::layer_norm;
  std::vector<std::vector<HeadFactors>> out(c.n_layer);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const Block& b = model.blocks[l];
    const std::vector<double> gamma = norm_scale(c, b.ln_1_weight);
    std::vector<double> post;  // Gemma 3: the attention output's norm γ, folded into W_O's columns
    if (c.sandwich_norms) post = norm_scale(c, b.post_attn_norm_weight);
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t g = h / (H / G);
      HeadFactors f;
      f.q = folded(b.attn_weight.columns(d, width, h * r, r), d, r, gamma, centre);
      f.k = folded(b.attn_weight.columns(d, width, (H + g) * r, r), d, r, gamma, centre);
      f.v = folded(b.attn_weight.columns(d, width, (H + G + g) * r, r), d, r, gamma, centre);
      f.o = Matrix(r, d);
      std::vector<float> row(d);
      for (std::size_t t = 0; t < r; ++t) {
        b.attn_proj_weight.row(h * r + t, d, row.data());
        for (std::size_t k = 0; k < d; ++k)
          f.o(t, k) = double(row[k]) * (post.empty() ? 1.0 : post[k]);
      }
      out[l].push_back(std::move(f));
    }
  }
  return out;
}

// Rows of `blocks` stacked: [Σ rows × cols].
Matrix stacked_rows(const std::vector<Matrix>& blocks) {
  Matrix out(0, blocks.front().cols);
  for (const Matrix& m : blocks) {
    out.data.insert(out.data.end(), m.data.begin(), m.data.end());
    out.rows += m.rows;
  }
  return out;
}

// Columns of `blocks` side by side: [rows × Σ cols].
Matrix side_by_side(const std::vector<Matrix>& blocks) {
  std::size_t cols = 0;
  for (const Matrix& m : blocks)
    cols += m.cols;
  Matrix out(blocks.front().rows, cols);
  std::size_t first = 0;
  for (const Matrix& m : blocks) {
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j)
        out(i, first + j) = m(i, j);
    first += m.cols;
  }
  return out;
}

// Every composition score of the heads whose X [r × d] and Y [d × r] are given: one product.
std::vector<std::vector<double>> scores(const std::vector<Matrix>& x, const std::vector<Matrix>& y) {
  const Matrix all = product(stacked_rows(x), side_by_side(y));
  std::vector<std::vector<double>> out(x.size(), std::vector<double>(y.size()));
  for (std::size_t a = 0; a < x.size(); ++a) {
    const double norm_a = frobenius(x[a]);
    for (std::size_t b = 0; b < y.size(); ++b) {
      const std::size_t r = x[a].rows, s = y[b].cols;
      double sum = 0;
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < s; ++j) {
          const double v = all(a * r + i, b * s + j);
          sum += v * v;
        }
      const double denominator = norm_a * frobenius(y[b]);
      out[a][b] = denominator > 0 ? std::sqrt(sum) / denominator : 0.0;
    }
  }
  return out;
}

Matrix gaussian(std::size_t rows, std::size_t cols, SplitMix64& rng) {
  Matrix m(rows, cols);
  for (double& x : m.data)
    x = rng.normal();
  return m;
}

// W_E [V × d] in double, the embedding's scale (Gemma's √d) applied as the forward applies it.
Matrix embedding_matrix(const Model& model) {
  const std::size_t d = model.config.n_embd, V = model.config.vocab_size;
  Matrix e(V, d);
  std::vector<float> row(d);
  for (std::size_t t = 0; t < V; ++t) {
    model.wte.row(t, d, row.data());
    for (std::size_t k = 0; k < d; ++k)
      e(t, k) = double(row[k]) * model.config.embedding_scale;
  }
  return e;
}

// The `count` largest entries of a · bᵀ [V × V] (a, b [V × r]), the largest first, without
// holding it: a block of rows at a time, a bounded heap of the best so far.
std::vector<TokenPair> largest_entries(const Matrix& a, const Matrix& b, std::size_t count) {
  const std::size_t V = a.rows, r = a.cols;
  constexpr std::size_t kRows = 256;
  const auto smaller = [](const TokenPair& x, const TokenPair& y) { return x.score > y.score; };  // a min-heap
  std::vector<TokenPair> best;
  Matrix block(kRows, V);
  for (std::size_t first = 0; first < V; first += kRows) {
    const std::size_t rows = std::min(kRows, V - first);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(V), int(r), 1.0, a.data.data() + first * r,
                int(r), b.data.data(), int(r), 0.0, block.data.data(), int(V));
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < V; ++j) {
        const double x = block(i, j);
        if (best.size() < count) {
          best.push_back({int(first + i), int(j), x});
          std::push_heap(best.begin(), best.end(), smaller);
        } else if (x > best.front().score) {
          std::pop_heap(best.begin(), best.end(), smaller);
          best.back() = {int(first + i), int(j), x};
          std::push_heap(best.begin(), best.end(), smaller);
        }
      }
  }
  std::sort_heap(best.begin(), best.end(), smaller);  // the largest first
  return best;
}

}  // namespace

double circuits_work(const ModelConfig& c, std::size_t token_pairs) {
  const double d = double(c.n_embd), r = double(c.head_dim()), H = double(c.n_head), L = double(c.n_layer),
               V = double(c.vocab_size);
  const double layer_pairs = L * (L - 1) / 2;
  const double tokens = token_pairs ? L * H * (V * V * r + 2 * V * d * r) : 0;
  return 3 * layer_pairs * (H * r) * (H * r) * d + V * d * d + L * H * 8 * d * r * r + tokens;
}

double circuits_bytes(const ModelConfig& c) {
  return double(c.n_layer) * double(c.n_head) * 8 * double(c.n_embd) * double(c.head_dim()) * sizeof(double) +
         double(c.n_embd) * double(c.n_embd) * sizeof(double);
}

Circuits model_circuits(const Model& model, std::uint64_t seed, std::size_t token_pairs,
                        const std::function<void(std::size_t, std::size_t)>& progress) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd, r = c.head_dim(), L = c.n_layer, H = c.n_head, V = c.vocab_size;
  const std::vector<std::vector<HeadFactors>> heads = head_factors(model);

  // Per head: X = P_V W_O for its OV circuit as the writer; Y for each way a later head reads.
  std::vector<std::vector<Matrix>> writes(L), reads_q(L), reads_k(L), reads_v(L);
  Circuits out;
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t h = 0; h < H; ++h) {
      const HeadFactors& f = heads[l][h];
      const Matrix p_q = r_factor(f.q), p_k = r_factor(f.k), p_v = r_factor(f.v), p_o = r_factor(transposed(f.o));
      out.heads.push_back({l, h});
      out.qk_singular.push_back(singular_values(product(p_q, transposed(p_k))));
      out.ov_singular.push_back(singular_values(product(p_v, transposed(p_o))));
      writes[l].push_back(product(p_v, f.o));               // OV_a = W̃_V W_O
      reads_q[l].push_back(product(f.q, transposed(p_k)));  // W_QK = W̃_Q W̃_Kᵀ
      reads_k[l].push_back(product(f.k, transposed(p_q)));  // W_QKᵀ = W̃_K W̃_Qᵀ
      reads_v[l].push_back(product(f.v, transposed(p_o)));  // W_OV = W̃_V W_O
    }

  // The compositions, a pair of layers at a time.
  const std::size_t n = L * H;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.q.assign(n, std::vector<double>(n, nan));
  out.k = out.q;
  out.v = out.q;
  const std::size_t total = L * (L - 1) / 2;
  std::size_t done = 0;
  for (std::size_t la = 0; la < L; ++la)
    for (std::size_t lb = la + 1; lb < L; ++lb) {
      const auto fill = [&](std::vector<std::vector<double>>& into, const std::vector<Matrix>& reads) {
        const std::vector<std::vector<double>> s = scores(writes[la], reads);
        for (std::size_t a = 0; a < H; ++a)
          for (std::size_t b = 0; b < H; ++b)
            into[la * H + a][lb * H + b] = s[a][b];
      };
      fill(out.q, reads_q[lb]);
      fill(out.k, reads_k[lb]);
      fill(out.v, reads_v[lb]);
      if (progress) progress(++done, total);
    }

  // The baseline: the same scores for Gaussian factors of the same shapes.
  SplitMix64 rng(seed);
  const auto baseline = [&] {
    constexpr int kDraws = 8;
    double sum = 0;
    for (int k = 0; k < kDraws; ++k) {
      const Matrix l_a = gaussian(d, r, rng), r_a = gaussian(r, d, rng), l_b = gaussian(d, r, rng),
                   r_b = gaussian(r, d, rng);
      sum += scores({product(r_factor(l_a), r_a)}, {product(l_b, transposed(r_factor(transposed(r_b))))})[0][0];
    }
    return sum / kDraws;
  };
  out.baseline_q = baseline();
  out.baseline_k = baseline();
  out.baseline_v = baseline();

  // The OV circuits on tokens: eig(W_O · G · W̃_V) with G = F_final W_Uᵀ W_E [d × d], summed
  // over the vocabulary a block of rows at a time.
  Matrix g(d, d);
  const Tensor& unembedding = c.tied ? model.wte : model.lm_head;
  constexpr std::size_t kBlock = 1024;
  std::vector<float> row(d);
  for (std::size_t first = 0; first < V; first += kBlock) {
    const std::size_t rows = std::min(kBlock, V - first);
    Matrix u(rows, d), e(rows, d);
    for (std::size_t t = 0; t < rows; ++t) {
      unembedding.row(first + t, d, row.data());
      std::copy(row.begin(), row.end(), u.data.begin() + std::ptrdiff_t(t * d));
      model.wte.row(first + t, d, row.data());
      std::copy(row.begin(), row.end(), e.data.begin() + std::ptrdiff_t(t * d));
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(d), int(d), int(rows), 1.0, u.data.data(), int(d),
                e.data.data(), int(d), 1.0, g.data.data(), int(d));
  }
  const std::vector<double> final_gamma = norm_scale(c, model.ln_f_weight);
  for (std::size_t k = 0; k < d; ++k)
    for (std::size_t l = 0; l < d; ++l)
      g(k, l) *= final_gamma[k];
  if (c.norm == NormKind::layer_norm) centre_columns(g);  // the final LayerNorm's centring
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t h = 0; h < H; ++h)
      out.ov_copying.push_back(copying_score(product(product(heads[l][h].o, g), heads[l][h].v)));

  if (token_pairs) {
    const Matrix embedding = embedding_matrix(model);
    for (std::size_t l = 0; l < L; ++l)
      for (std::size_t h = 0; h < H; ++h)
        out.qk_token_pairs.push_back(
            largest_entries(product(embedding, heads[l][h].q), product(embedding, heads[l][h].k), token_pairs));
  }
  return out;
}

}  // namespace attnlab
