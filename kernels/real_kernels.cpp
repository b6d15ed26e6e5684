// The host kernels (see real_kernels.hpp). Loops take __restrict pointers and keep their bodies
// branch-free so that GCC vectorises them at -O2; reductions run in kLanes independent partial
// sums (as a GPU's tree reduction does) so that they vectorise without -ffast-math.
#include "kernels/real_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

// The compute-heavy kernels (exp, tanh, sqrt per element) are also compiled for AVX2 with FMA
// (x86-64-v3), picked at load time when the CPU has it: in baseline SSE2 code GELU and softmax
// would be two to three times slower, compute-bound where the workload's are memory-bound.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define EXASIM_HOST_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EXASIM_HOST_CLONES
#endif

namespace exasim {
namespace {

constexpr int kLanes = 8;

// sum over j < n of term(j), in kLanes partial sums.
template <class T, class Term>
inline T lane_sum(std::int64_t n, Term term) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  T s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += term(j);
  return s;
}

template <class T>
inline T row_max(const T* __restrict x, std::int64_t n) {
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = x[0];
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
  T m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// exp(-y) for y >= 0 (+inf gives 0), without the C library's scalar exp and without branches:
// exp(-y) = (1 / P(y / 2^s))^(2^s), P the Taylor polynomial of exp. P is positive and increasing,
// so large y underflow to 0 instead of blowing up. Absolute error about 1e-7 (float), 1e-14 (double).
template <class T>
struct ExpParams;
template <>
struct ExpParams<float> {
  static constexpr int squarings = 4, degree = 9;
};
template <>
struct ExpParams<double> {
  static constexpr int squarings = 6, degree = 15;
};

constexpr double inverse_factorial(int i) { return i == 0 ? 1.0 : inverse_factorial(i - 1) / i; }

template <class T, int I, int N>
inline T taylor_exp(T t) {  // sum over i in [I, N] of t^(i - I) / i!, by Horner
  if constexpr (I == N) {
    return T(inverse_factorial(N));
  } else {
    return T(inverse_factorial(I)) + t * taylor_exp<T, I + 1, N>(t);
  }
}

template <class T, int N>
inline T square_times(T z) {
  if constexpr (N == 0) {
    return z;
  } else {
    const T q = square_times<T, N - 1>(z);
    return q * q;
  }
}

template <class T>
inline T exp_neg(T y) {
  using P = ExpParams<T>;
  const T t = y * T(1.0 / (1 << P::squarings));
  return square_times<T, P::squarings>(T(1) / taylor_exp<T, 0, P::degree>(t));
}

// tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|).
template <class T>
inline T tanh_of(T u) {
  const T e = exp_neg(2 * std::fabs(u));
  return std::copysign((1 - e) / (1 + e), u);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), 1.0f, a, blasint(k), b,
              blasint(n), 0.0f, c, blasint(n));
}

void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), 1.0, a, blasint(k), b,
              blasint(n), 0.0, c, blasint(n));
}

template <class T>
EXASIM_HOST_CLONES void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* __restrict xr = x + r * cols;
    T* __restrict yr = y + r * cols;
    const T m = row_max(xr, cols);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = exp_neg(m - xr[j]);
    const T inv = T(1) / lane_sum<T>(cols, [yr](std::int64_t j) { return yr[j]; });
    for (std::int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

template <class T>
EXASIM_HOST_CLONES void layer_norm_rows(const T* x, const T* gamma, const T* beta, T* y, std::int64_t rows,
                                        std::int64_t cols, T eps) {
  const T* __restrict g = gamma;
  const T* __restrict b = beta;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* __restrict xr = x + r * cols;
    T* __restrict yr = y + r * cols;
    const T mean = lane_sum<T>(cols, [xr](std::int64_t j) { return xr[j]; }) / T(cols);
    const T var = lane_sum<T>(cols, [xr, mean](std::int64_t j) { return (xr[j] - mean) * (xr[j] - mean); }) / T(cols);
    const T rstd = T(1) / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
  }
}

template <class T>
EXASIM_HOST_CLONES void gelu(const T* __restrict xi, T* __restrict yi, std::int64_t n) {
  const T c = T(0.79788456080286535588);  // sqrt(2 / pi)
  const T a = T(0.044715);
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = xi[i];
    yi[i] = T(0.5) * v * (T(1) + tanh_of(c * (v + a * v * v * v)));
  }
}

template <class T>
void residual_add(const T* __restrict ai, const T* __restrict bi, T* __restrict yi, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) yi[i] = ai[i] + bi[i];
}

template <class T>
void gate_topk(const T* scores, std::int64_t tokens, std::int64_t experts, std::int64_t k, std::int32_t* index,
               T* weight) {
  if (k < 1 || k > experts) throw std::invalid_argument("gate_topk: k must be in [1, experts]");
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* s = scores + t * experts;
    std::int32_t* idx = index + t * k;
    T* w = weight + t * k;  // holds the chosen scores, best first, until the softmax below
    std::int64_t held = 0;
    T worst = 0;  // w[k - 1] once k are held
    for (std::int64_t e = 0; e < experts; ++e) {
      const T v = s[e];
      if (held == k && !(v > worst)) continue;    // a tie keeps the lower index
      std::int64_t j = held < k ? held++ : k - 1;  // slot freed at the end
      for (; j > 0 && v > w[j - 1]; --j) {         // insertion: shift worse ones down
        w[j] = w[j - 1];
        idx[j] = idx[j - 1];
      }
      w[j] = v;
      idx[j] = std::int32_t(e);
      worst = w[k - 1];
    }
    const T best = w[0];
    T sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += (w[j] = std::exp(w[j] - best));
    for (std::int64_t j = 0; j < k; ++j) w[j] /= sum;
  }
}

template <class T>
void token_permute(const T* x, const std::int32_t* index, T* y, std::int64_t tokens, std::int64_t d_model) {
  for (std::int64_t i = 0; i < tokens; ++i) {
    const T* __restrict src = x + std::int64_t(index[i]) * d_model;
    T* __restrict dst = y + i * d_model;
    for (std::int64_t j = 0; j < d_model; ++j) dst[j] = src[j];
  }
}

template <class T>
void im2col_rows(const T* x, const std::int32_t* index, T* y, std::int64_t pixels, std::int64_t channels,
                 std::int64_t window) {
  for (std::int64_t i = 0; i < pixels * window; ++i) {
    const T* __restrict src = x + std::int64_t(index[i]) * channels;
    T* __restrict dst = y + i * channels;
    for (std::int64_t j = 0; j < channels; ++j) dst[j] = src[j];
  }
}

template <class T>
EXASIM_HOST_CLONES void batch_norm_relu(const T* x, const T* gamma, const T* beta, T* y, std::int64_t rows,
                                        std::int64_t cols, T eps) {
  std::vector<T> sum(std::size_t(cols), T(0)), sq(std::size_t(cols), T(0));
  T* __restrict s = sum.data();
  T* __restrict q = sq.data();
  for (std::int64_t r = 0; r < rows; ++r) {  // statistics pass
    const T* __restrict xr = x + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      s[j] += xr[j];
      q[j] += xr[j] * xr[j];
    }
  }
  for (std::int64_t j = 0; j < cols; ++j) {  // per channel: scale and shift
    const T mean = s[j] / T(rows);
    const T inv = T(1) / std::sqrt(std::max(T(0), q[j] / T(rows) - mean * mean) + eps);
    s[j] = gamma[j] * inv;
    q[j] = beta[j] - mean * gamma[j] * inv;
  }
  for (std::int64_t r = 0; r < rows; ++r) {  // normalise, scale, shift, ReLU
    const T* __restrict xr = x + r * cols;
    T* __restrict yr = y + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = std::max(T(0), xr[j] * s[j] + q[j]);
  }
}

template <class T>
void max_pool_rows(const T* x, const std::int32_t* index, T* y, std::int64_t pixels, std::int64_t channels,
                   std::int64_t window) {
  for (std::int64_t p = 0; p < pixels; ++p) {
    T* __restrict dst = y + p * channels;
    const T* __restrict first = x + std::int64_t(index[p * window]) * channels;
    for (std::int64_t j = 0; j < channels; ++j) dst[j] = first[j];
    for (std::int64_t k = 1; k < window; ++k) {
      const T* __restrict src = x + std::int64_t(index[p * window + k]) * channels;
      for (std::int64_t j = 0; j < channels; ++j) dst[j] = std::max(dst[j], src[j]);
    }
  }
}

void adam_step(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamHyper& h, std::int64_t step) {
  if (step < 1) throw std::invalid_argument("adam_step: step counts from 1");
  float* __restrict pi = p;
  const float* __restrict gi = g;
  float* __restrict mi = m;
  float* __restrict vi = v;
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps;
  const float step_size = float(h.lr / (1.0 - std::pow(double(b1), double(step))));  // lr / (1 - b1^t)
  const float inv_bc2 = float(1.0 / (1.0 - std::pow(double(b2), double(step))));    // 1 / (1 - b2^t)
  for (std::int64_t i = 0; i < n; ++i) {
    const float mm = b1 * mi[i] + (1 - b1) * gi[i];
    const float vv = b2 * vi[i] + (1 - b2) * gi[i] * gi[i];
    mi[i] = mm;
    vi[i] = vv;
    pi[i] -= step_size * mm / (std::sqrt(vv * inv_bc2) + eps);
  }
}

// ---------------------------------------------------------------------------------------------

void set_blas_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_blas_threads: need at least 1 thread, got " + std::to_string(n));
  openblas_set_num_threads(n);
}

int blas_threads() { return openblas_get_num_threads(); }

// OpenBLAS 0.3's own fork handler (exported by libopenblas, not declared in its headers): joins the
// pool; its next threaded call starts the pool again (exec_blas_async: "if (!blas_server_avail)
// blas_thread_init()").
extern "C" int blas_thread_shutdown_(void);

void release_blas_threads() { blas_thread_shutdown_(); }

std::string blas_description() {
  const std::string config = openblas_get_config();  // starts "OpenBLAS 0.3.21 ..." already
  return config.rfind("OpenBLAS", 0) == 0 ? config : "OpenBLAS " + config;
}

#define EXASIM_INSTANTIATE(T)                                                                                  \
  template void softmax_rows<T>(const T*, T*, std::int64_t, std::int64_t);                                     \
  template void layer_norm_rows<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t, T);           \
  template void gelu<T>(const T*, T*, std::int64_t);                                                           \
  template void residual_add<T>(const T*, const T*, T*, std::int64_t);                                         \
  template void gate_topk<T>(const T*, std::int64_t, std::int64_t, std::int64_t, std::int32_t*, T*);           \
  template void token_permute<T>(const T*, const std::int32_t*, T*, std::int64_t, std::int64_t);              \
  template void im2col_rows<T>(const T*, const std::int32_t*, T*, std::int64_t, std::int64_t, std::int64_t); \
  template void batch_norm_relu<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t, T);        \
  template void max_pool_rows<T>(const T*, const std::int32_t*, T*, std::int64_t, std::int64_t, std::int64_t);
EXASIM_INSTANTIATE(float)
EXASIM_INSTANTIATE(double)
#undef EXASIM_INSTANTIATE

}  // namespace exasim
