// Naive reference kernels, for tests: the textbook loops, in the order one writes them by hand,
// with the C library's exp and tanh. Same conventions as real_kernels.hpp. Slow; small shapes only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace exasim::reference {

// C[m x n] = A[m x k] B[k x n], row-major: a triple loop.
template <class T>
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b, T* c) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T s = 0;
      for (std::int64_t l = 0; l < k; ++l) s += a[i * k + l] * b[l * n + j];
      c[i * n + j] = s;
    }
}

template <class T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T m = xr[0];
    for (std::int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
    T sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(xr[j] - m);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j] - m) / sum;
  }
}

template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, T* y, std::int64_t rows, std::int64_t cols, T eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T mean = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += xr[j];
    mean /= T(cols);
    T var = 0;
    for (std::int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= T(cols);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
  }
}

template <class T>
void gelu(const T* x, T* y, std::int64_t n) {
  const T c = std::sqrt(T(2) / T(3.14159265358979323846));
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = T(0.5) * x[i] * (1 + std::tanh(c * (x[i] + T(0.044715) * x[i] * x[i] * x[i])));
}

template <class T>
void residual_add(const T* a, const T* b, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// Per token: sort the experts by score (best first, ties by index), keep k, softmax over them.
template <class T>
void gate_topk(const T* scores, std::int64_t tokens, std::int64_t experts, std::int64_t k, std::int32_t* index,
               T* weight) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* s = scores + t * experts;
    std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [s](std::int32_t a, std::int32_t b) { return s[a] > s[b]; });
    T sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += std::exp(s[order[j]] - s[order[0]]);
    for (std::int64_t j = 0; j < k; ++j) {
      index[t * k + j] = order[j];
      weight[t * k + j] = std::exp(s[order[j]] - s[order[0]]) / sum;
    }
  }
}

template <class T>
void token_permute(const T* x, const std::int32_t* index, T* y, std::int64_t tokens, std::int64_t d_model) {
  for (std::int64_t i = 0; i < tokens; ++i)
    for (std::int64_t j = 0; j < d_model; ++j) y[i * d_model + j] = x[index[i] * d_model + j];
}

// Adam, textbook form with explicit bias-corrected moments.
inline void adam_step(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                      float eps, std::int64_t step) {
  for (std::int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    const double m_hat = m[i] / (1 - std::pow(double(beta1), double(step)));
    const double v_hat = v[i] / (1 - std::pow(double(beta2), double(step)));
    p[i] = float(p[i] - lr * m_hat / (std::sqrt(v_hat) + eps));
  }
}

}  // namespace exasim::reference
