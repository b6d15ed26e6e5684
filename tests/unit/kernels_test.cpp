// Host kernels: each against its naive reference (fp32 and fp64, small odd shapes), the same
// through KernelRun on its own buffers, the fp16 stand-in, bad shapes, OpenBLAS threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/real_kernels.hpp"
#include "kernels/reference_kernels.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;
namespace ref = exasim::reference;

namespace {

template <class T>
std::vector<T> random_values(std::int64_t n, unsigned seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) x = T(dist(gen));
  return v;
}

// Largest |got - want| / (atol + rtol |want|): <= 1 means every value is within tolerance.
template <class T>
double worst(const std::vector<T>& got, const std::vector<T>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  double w = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    w = std::max(w, std::fabs(double(got[i]) - double(want[i])) / (atol + rtol * std::fabs(double(want[i]))));
  return w;
}

template <class T>
struct Tol;
template <>
struct Tol<float> {
  static constexpr double rtol = 1e-5, atol = 1e-6;
};
template <>
struct Tol<double> {
  static constexpr double rtol = 1e-12, atol = 1e-13;
};

template <class T>
constexpr KernelRun::Element element_of() {
  if constexpr (std::is_same_v<T, double>) return KernelRun::Element::fp64;
  if constexpr (std::is_same_v<T, float>) return KernelRun::Element::fp32;
  return KernelRun::Element::int32;
}

// A copy of one of a KernelRun's buffers, by name.
template <class T>
std::vector<T> copy_of(const KernelRun& r, const std::string& name) {
  for (const KernelRun::Buffer& b : r.buffers()) {
    if (b.name != name) continue;
    REQUIRE(b.element == element_of<T>());
    const T* p = static_cast<const T*>(b.data);
    return std::vector<T>(p, p + b.count);
  }
  FAIL("no buffer named " << name);
  return {};
}

template <class T>
void check_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto a = random_values<T>(m * k, 1, -1, 1), b = random_values<T>(k * n, 2, -1, 1);
  std::vector<T> c(static_cast<std::size_t>(m * n), T(7)), want(c.size());
  gemm(m, n, k, a.data(), b.data(), c.data());
  ref::gemm(m, n, k, a.data(), b.data(), want.data());
  CHECK(worst(c, want, Tol<T>::rtol, 10 * Tol<T>::atol) <= 1);
}

}  // namespace

TEST_CASE_TEMPLATE("gemm: OpenBLAS matches the naive triple loop on odd shapes", T, float, double) {
  check_gemm<T>(7, 13, 5);
  check_gemm<T>(1, 17, 3);
  check_gemm<T>(33, 1, 29);
  check_gemm<T>(65, 70, 67);
}

TEST_CASE_TEMPLATE("softmax_rows matches the reference", T, float, double) {
  const std::int64_t rows = 7, cols = 13;
  auto x = random_values<T>(rows * cols, 3, -6, 6);
  x[5] = T(-1e4);  // exp underflows to 0
  std::vector<T> y(x.size()), want(x.size());
  softmax_rows(x.data(), y.data(), rows, cols);
  ref::softmax_rows(x.data(), want.data(), rows, cols);
  CHECK(worst(y, want, 4 * Tol<T>::rtol, Tol<T>::atol) <= 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) sum += y[std::size_t(r * cols + j)];
    CHECK(sum == test::rel(1.0, 1e-5));
  }
  // Large inputs: stable (max subtracted), no overflow.
  std::vector<T> big = {T(1000), T(1001), T(999)}, out(3), out_ref(3);
  softmax_rows(big.data(), out.data(), 1, 3);
  ref::softmax_rows(big.data(), out_ref.data(), 1, 3);
  CHECK(worst(out, out_ref, 4 * Tol<T>::rtol, Tol<T>::atol) <= 1);
}

TEST_CASE_TEMPLATE("layer_norm_rows matches the reference", T, float, double) {
  const std::int64_t rows = 7, cols = 13;
  const auto x = random_values<T>(rows * cols, 4, -3, 5);
  const auto gamma = random_values<T>(cols, 5, 0.5, 1.5), beta = random_values<T>(cols, 6, -0.5, 0.5);
  std::vector<T> y(x.size()), want(x.size());
  layer_norm_rows(x.data(), gamma.data(), beta.data(), y.data(), rows, cols, T(1e-5));
  ref::layer_norm_rows(x.data(), gamma.data(), beta.data(), want.data(), rows, cols, T(1e-5));
  CHECK(worst(y, want, 10 * Tol<T>::rtol, 10 * Tol<T>::atol) <= 1);
}

TEST_CASE_TEMPLATE("gelu matches the reference's tanh form, tails included", T, float, double) {
  auto x = random_values<T>(101, 7, -5, 5);
  for (T v : {T(0), T(-0.0), T(1e-20), T(-1e-20), T(8), T(-8), T(30), T(-30), T(1e6), T(-1e6)}) x.push_back(v);
  std::vector<T> y(x.size()), want(x.size());
  gelu(x.data(), y.data(), std::int64_t(x.size()));
  ref::gelu(x.data(), want.data(), std::int64_t(x.size()));
  // absolute error of the tanh about 1e-6 (float) / 1e-14 (double), times x / 2
  const double atol = std::is_same_v<T, float> ? 3e-6 : 3e-14;
  CHECK(worst(y, want, 4 * Tol<T>::rtol, atol) <= 1);
  for (T v : y) CHECK(std::isfinite(double(v)));
}

TEST_CASE_TEMPLATE("residual_add matches the reference", T, float, double) {
  const auto a = random_values<T>(7 * 13, 8, -1, 1), b = random_values<T>(7 * 13, 9, -1, 1);
  std::vector<T> y(a.size()), want(a.size());
  residual_add(a.data(), b.data(), y.data(), std::int64_t(a.size()));
  ref::residual_add(a.data(), b.data(), want.data(), std::int64_t(a.size()));
  CHECK(y == want);
}

TEST_CASE_TEMPLATE("gate_topk picks the reference's experts and weights", T, float, double) {
  for (std::int64_t k : {1, 2, 5, 13}) {
    CAPTURE(k);
    const std::int64_t tokens = 7, experts = 13;
    auto scores = random_values<T>(tokens * experts, 10, -3, 3);
    // token 3: ties, the lower expert index goes first
    for (std::int64_t e = 0; e < experts; ++e) scores[std::size_t(3 * experts + e)] = T(e % 3);
    std::vector<std::int32_t> index(std::size_t(tokens * k)), index_ref(index.size());
    std::vector<T> weight(index.size()), weight_ref(index.size());
    gate_topk(scores.data(), tokens, experts, k, index.data(), weight.data());
    ref::gate_topk(scores.data(), tokens, experts, k, index_ref.data(), weight_ref.data());
    CHECK(index == index_ref);
    CHECK(worst(weight, weight_ref, Tol<T>::rtol, Tol<T>::atol) <= 1);
  }
  std::vector<T> s(6);
  std::vector<std::int32_t> i(6);
  CHECK_THROWS_AS(gate_topk(s.data(), 1, 3, 4, i.data(), s.data()), std::invalid_argument);
}

TEST_CASE_TEMPLATE("token_permute gathers the indexed rows", T, float, double) {
  const std::int64_t tokens = 7, d = 13;
  const auto x = random_values<T>(tokens * d, 11, -1, 1);
  const std::vector<std::int32_t> index = {3, 0, 6, 6, 1, 5, 2};  // not a permutation: a gather
  std::vector<T> y(x.size()), want(x.size());
  token_permute(x.data(), index.data(), y.data(), tokens, d);
  ref::token_permute(x.data(), index.data(), want.data(), tokens, d);
  CHECK(y == want);
}

TEST_CASE("adam_step matches the textbook update over several steps") {
  const std::int64_t n = 7 * 13;
  auto p = random_values<float>(n, 13, -1, 1), m = random_values<float>(n, 14, -1e-3, 1e-3);
  auto v = random_values<float>(n, 15, 0, 1e-5);
  auto p_ref = p, m_ref = m, v_ref = v;
  const AdamHyper h{1e-3f, 0.9f, 0.999f, 1e-8f};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto g = random_values<float>(n, unsigned(20 + step), -1e-2, 1e-2);
    adam_step(p.data(), g.data(), m.data(), v.data(), n, h, step);
    ref::adam_step(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, h.lr, h.beta1, h.beta2, h.eps, step);
  }
  CHECK(worst(m, m_ref, 1e-6, 1e-12) <= 1);
  CHECK(worst(v, v_ref, 1e-6, 1e-15) <= 1);
  CHECK(worst(p, p_ref, 1e-6, 1e-7) <= 1);
  CHECK_THROWS_AS(adam_step(p.data(), p.data(), m.data(), v.data(), n, h, 0), std::invalid_argument);
}

namespace {

// Runs the KernelRun once and checks its output buffers against the reference on its inputs.
template <class T>
void check_run_against_reference(Kernel k, const KernelShape& s, Precision p) {
  CAPTURE(describe(k, s));
  CAPTURE(to_string(p));
  auto r = KernelRun::make(k, s, p);
  const auto d = s.dims;
  switch (k) {
    case Kernel::gemm: {
      r->run();
      const auto a = copy_of<T>(*r, "a"), b = copy_of<T>(*r, "b"), c = copy_of<T>(*r, "c");
      std::vector<T> want(c.size());
      for (std::int64_t i = 0; i < s.batch; ++i) {
        ref::gemm(d[0], d[1], d[2], a.data() + i * d[0] * d[2], b.data() + i * d[2] * d[1],
                  want.data() + i * d[0] * d[1]);
      }
      CHECK(worst(c, want, Tol<T>::rtol, 10 * Tol<T>::atol) <= 1);
      break;
    }
    case Kernel::softmax: {
      r->run();
      const auto x = copy_of<T>(*r, "x");
      std::vector<T> want(x.size());
      ref::softmax_rows(x.data(), want.data(), d[0], d[1]);
      CHECK(worst(copy_of<T>(*r, "y"), want, 4 * Tol<T>::rtol, Tol<T>::atol) <= 1);
      break;
    }
    case Kernel::layer_norm: {
      r->run();
      const auto x = copy_of<T>(*r, "x"), g = copy_of<T>(*r, "gamma"), b = copy_of<T>(*r, "beta");
      std::vector<T> want(x.size());
      ref::layer_norm_rows(x.data(), g.data(), b.data(), want.data(), d[0], d[1], T(1e-5));
      CHECK(worst(copy_of<T>(*r, "y"), want, 10 * Tol<T>::rtol, 10 * Tol<T>::atol) <= 1);
      break;
    }
    case Kernel::gelu: {
      r->run();
      const auto x = copy_of<T>(*r, "x");
      std::vector<T> want(x.size());
      ref::gelu(x.data(), want.data(), d[0]);
      CHECK(worst(copy_of<T>(*r, "y"), want, 4 * Tol<T>::rtol, std::is_same_v<T, float> ? 3e-6 : 3e-14) <= 1);
      break;
    }
    case Kernel::residual_add: {
      r->run();
      const auto a = copy_of<T>(*r, "a"), b = copy_of<T>(*r, "b");
      std::vector<T> want(a.size());
      ref::residual_add(a.data(), b.data(), want.data(), d[0]);
      CHECK(copy_of<T>(*r, "y") == want);
      break;
    }
    case Kernel::gate_topk: {
      r->run();
      const auto scores = copy_of<T>(*r, "scores");
      std::vector<std::int32_t> index(std::size_t(d[0] * d[2]));
      std::vector<T> weight(index.size());
      ref::gate_topk(scores.data(), d[0], d[1], d[2], index.data(), weight.data());
      CHECK(copy_of<std::int32_t>(*r, "index") == index);
      CHECK(worst(copy_of<T>(*r, "weight"), weight, Tol<T>::rtol, Tol<T>::atol) <= 1);
      break;
    }
    case Kernel::token_permute: {
      r->run();
      const auto x = copy_of<T>(*r, "x");
      const auto index = copy_of<std::int32_t>(*r, "index");
      CHECK(std::set<std::int32_t>(index.begin(), index.end()).size() == std::size_t(d[0]));  // a permutation
      CHECK(*std::max_element(index.begin(), index.end()) == d[0] - 1);
      std::vector<T> want(x.size());
      ref::token_permute(x.data(), index.data(), want.data(), d[0], d[1]);
      CHECK(copy_of<T>(*r, "y") == want);
      break;
    }
    case Kernel::adam: {
      auto p0 = copy_of<float>(*r, "p"), m0 = copy_of<float>(*r, "m"), v0 = copy_of<float>(*r, "v");
      const auto g = copy_of<float>(*r, "g");
      r->run();  // step 1
      const AdamHyper h;
      ref::adam_step(p0.data(), g.data(), m0.data(), v0.data(), d[0], h.lr, h.beta1, h.beta2, h.eps, 1);
      CHECK(worst(copy_of<float>(*r, "p"), p0, 1e-6, 1e-7) <= 1);
      CHECK(worst(copy_of<float>(*r, "v"), v0, 1e-6, 1e-15) <= 1);
      break;
    }
    case Kernel::im2col:
    case Kernel::pool: {
      r->run();
      const auto x = copy_of<T>(*r, "x");
      const auto index = copy_of<std::int32_t>(*r, "index");
      const auto y = copy_of<T>(*r, "y");
      REQUIRE(index.size() == std::size_t(d[0] * d[2]));
      for (std::int64_t p = 0; p < d[0]; ++p)
        for (std::int64_t c = 0; c < d[1]; ++c) {
          T best = x[std::size_t(index[std::size_t(p * d[2])] * d[1] + c)];
          for (std::int64_t t = 0; t < d[2]; ++t) {
            const T v = x[std::size_t(index[std::size_t(p * d[2] + t)] * d[1] + c)];
            if (v > best) best = v;
            if (k == Kernel::im2col) CHECK(y[std::size_t((p * d[2] + t) * d[1] + c)] == v);
          }
          if (k == Kernel::pool) CHECK(y[std::size_t(p * d[1] + c)] == best);
        }
      break;
    }
    case Kernel::batch_norm: {
      r->run();
      const auto x = copy_of<T>(*r, "x"), g = copy_of<T>(*r, "gamma"), b = copy_of<T>(*r, "beta");
      const auto y = copy_of<T>(*r, "y");
      for (std::int64_t c = 0; c < d[1]; ++c) {  // two-pass statistics of column c
        double mean = 0, var = 0;
        for (std::int64_t i = 0; i < d[0]; ++i) mean += double(x[std::size_t(i * d[1] + c)]);
        mean /= double(d[0]);
        for (std::int64_t i = 0; i < d[0]; ++i) var += std::pow(double(x[std::size_t(i * d[1] + c)]) - mean, 2);
        var /= double(d[0]);
        for (std::int64_t i = 0; i < d[0]; ++i) {
          const double want = std::max(0.0, (double(x[std::size_t(i * d[1] + c)]) - mean) / std::sqrt(var + 1e-5) *
                                                    double(g[std::size_t(c)]) + double(b[std::size_t(c)]));
          // float outputs of order 1 and ReLU's exact zeros: 1e-4 absolute is meant
          CHECK(double(y[std::size_t(i * d[1] + c)]) == doctest::Approx(want).epsilon(1e-4).scale(1));
        }
      }
      break;
    }
    case Kernel::host_copy:
    case Kernel::host_adam:  // offload's data movement: not in all_kernels, KernelRun::make refuses it
    case Kernel::flash_attention:  // costed from the device file, not a host kernel
    case Kernel::flash_attention_causal:
      FAIL("not a device kernel");
      break;
  }
}

KernelShape small_shape(Kernel k) {
  switch (k) {
    case Kernel::gemm: return {{7, 13, 5}, 3};
    case Kernel::gate_topk: return {{13, 7, 2}, 1};
    case Kernel::im2col:
    case Kernel::pool: return {{11, 5, 9}, 1};
    case Kernel::batch_norm: return {{29, 6, 0}, 1};
    case Kernel::softmax:
    case Kernel::layer_norm:
    case Kernel::token_permute: return {{7, 13, 0}, 1};
    default: return {{7 * 13, 0, 0}, 1};
  }
}

}  // namespace

TEST_CASE("KernelRun: every kernel's output matches the reference on its own buffers") {
  for (Kernel k : all_kernels) {
    if (k == Kernel::adam) {
      check_run_against_reference<float>(k, small_shape(k), Precision::fp32);
      continue;
    }
    check_run_against_reference<float>(k, small_shape(k), Precision::fp32);
    check_run_against_reference<double>(k, small_shape(k), Precision::fp64);
    check_run_against_reference<float>(k, small_shape(k), Precision::fp16);  // the fp32 stand-in
  }
}

TEST_CASE("KernelRun: buffers are filled deterministically and bytes_allocated counts them") {
  for (Kernel k : all_kernels) {
    CAPTURE(to_string(k));
    auto r1 = KernelRun::make(k, small_shape(k), Precision::fp64);
    auto r2 = KernelRun::make(k, small_shape(k), Precision::fp64);
    const auto b1 = r1->buffers(), b2 = r2->buffers();
    REQUIRE(b1.size() == b2.size());
    double bytes = 0;
    for (std::size_t i = 0; i < b1.size(); ++i) {
      const std::size_t width = b1[i].element == KernelRun::Element::fp64 ? 8 : 4;
      REQUIRE(b1[i].count == b2[i].count);
      CHECK(std::memcmp(b1[i].data, b2[i].data, std::size_t(b1[i].count) * width) == 0);
      bytes += double(b1[i].count) * double(width);
    }
    CHECK(r1->bytes_allocated() == bytes);
    CHECK(r1->bytes_allocated() > 0);
  }
  // fp32 halves the buffers of fp64 (Adam excepted: always fp32)
  auto d = KernelRun::make(Kernel::gelu, {{1000, 0, 0}, 1}, Precision::fp64);
  auto f = KernelRun::make(Kernel::gelu, {{1000, 0, 0}, 1}, Precision::fp32);
  CHECK(d->bytes_allocated() == 2 * f->bytes_allocated());
}

TEST_CASE("KernelRun: fp16 says what stands in for it and fp32 or fp64 run as asked") {
  for (Kernel k : all_kernels) {
    CAPTURE(to_string(k));
    auto half = KernelRun::make(k, small_shape(k), Precision::fp16);
    CHECK_FALSE(half->stand_in().empty());
    CHECK(half->stand_in() == stand_in_note(k, Precision::fp16));
    CHECK(executed_precision(k, Precision::fp16) == Precision::fp32);
    CHECK(KernelRun::make(k, small_shape(k), Precision::fp32)->stand_in().empty());
    if (k != Kernel::adam) CHECK(KernelRun::make(k, small_shape(k), Precision::fp64)->stand_in().empty());
  }
  CHECK(stand_in_note(Kernel::gemm, Precision::fp16).find("SGEMM") != std::string::npos);
  CHECK(executed_precision(Kernel::adam, Precision::fp64) == Precision::fp32);
  CHECK_FALSE(stand_in_note(Kernel::adam, Precision::fp64).empty());
}

TEST_CASE("KernelRun: bad shapes throw invalid_argument saying what is wrong") {
  const auto message = [](Kernel k, KernelShape s) -> std::string {
    try {
      (void)KernelRun::make(k, s, Precision::fp32);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no throw)";
  };
  CHECK(message(Kernel::gemm, {{0, 4, 4}, 1}) == "bad shape gemm[0x4x4]: m must be positive, got 0");
  CHECK(message(Kernel::gemm, {{4, 4, -2}, 1}).find("k must be positive") != std::string::npos);
  CHECK(message(Kernel::gemm, {{4, 4, 4}, 0}).find("batch must be at least 1") != std::string::npos);
  CHECK(message(Kernel::softmax, {{4, 0, 0}, 1}).find("cols must be positive") != std::string::npos);
  CHECK(message(Kernel::gelu, {{-1, 0, 0}, 1}).find("elements must be positive") != std::string::npos);
  CHECK(message(Kernel::gelu, {{16, 0, 0}, 2}).find("only a GEMM has a batch") != std::string::npos);
  CHECK(message(Kernel::gate_topk, {{8, 4, 5}, 1}) == "bad shape gate_topk[8x4x5]: k (5) is more than the experts (4)");
  CHECK(message(Kernel::gate_topk, {{8, 4, 0}, 1}).find("k must be positive") != std::string::npos);
  CHECK(message(Kernel::token_permute, {{std::int64_t(1) << 32, 1, 0}, 1}).find("int32") != std::string::npos);
  CHECK(message(Kernel::gemm, {{std::int64_t(1) << 31, 1, 1}, 1}).find("int32") != std::string::npos);
  CHECK(message(Kernel::residual_add, {{std::int64_t(1) << 45, 0, 0}, 1}).find("host's") != std::string::npos);
  CHECK(message(Kernel::gemm, {{4, 4, 4}, 1}) == "(no throw)");
}

TEST_CASE("blas: the thread count is set and read back and the description names OpenBLAS") {
  const int before = blas_threads();
  set_blas_threads(1);
  CHECK(blas_threads() == 1);
  set_blas_threads(before);
  CHECK(blas_threads() == before);
  CHECK_THROWS_AS(set_blas_threads(0), std::invalid_argument);
  CHECK(blas_description().rfind("OpenBLAS ", 0) == 0);
  CHECK(blas_description().find("OpenBLAS OpenBLAS") == std::string::npos);
}
