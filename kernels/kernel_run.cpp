// KernelRun: a kernel's buffers, allocated and filled once, and the call that runs it over them.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "kernels/real_kernels.hpp"

namespace exasim {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// Buffers of 2 MiB or more are 2 MiB-aligned and asked for transparent huge pages (a hint, where
// THP is off nothing changes). The kernels then see the same TLB behaviour at every size, as on a
// GPU, which maps its memory in large pages: with 4 KiB pages a DRAM-bound kernel's rate here moved
// by 10-15 % with the buffer size and with the heap's history (malloc's adaptive mmap threshold),
// which would bias a scaled-down sample against its full shape.
constexpr std::size_t kHugePage = std::size_t(2) << 20;

template <class T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <class U>
  HostAllocator(const HostAllocator<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (n * sizeof(T) < kHugePage) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <class U>
  bool operator==(const HostAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const HostAllocator<U>&) const {
    return false;
  }
};

template <class T>
using HostVector = std::vector<T, HostAllocator<T>>;

// splitmix64: a fixed seed gives the same buffers on every run and every host.
class FillRng {
 public:
  explicit FillRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

template <class T>
HostVector<T> filled(std::int64_t n, std::uint64_t seed, double lo, double hi) {
  HostVector<T> v(static_cast<std::size_t>(n));
  FillRng rng(seed);
  for (T& x : v) x = T(rng.uniform(lo, hi));
  return v;
}

// A random permutation of 0 .. n-1 (Fisher-Yates with the fixed-seed generator).
HostVector<std::int32_t> permutation(std::int64_t n, std::uint64_t seed) {
  HostVector<std::int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  FillRng rng(seed);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(v[std::size_t(i)], v[std::size_t(rng.next() % std::uint64_t(i + 1))]);
  return v;
}

template <class T>
double bytes_of(const HostVector<T>& v) {
  return double(v.size()) * sizeof(T);
}

template <class T>
KernelRun::Buffer view(const char* name, const HostVector<T>& v) {
  using E = KernelRun::Element;
  const E e = std::is_same_v<T, double> ? E::fp64 : std::is_same_v<T, float> ? E::fp32 : E::int32;
  return {name, v.data(), std::int64_t(v.size()), e};
}

template <class T>
class GemmRun final : public KernelRun {
 public:
  GemmRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::gemm, s, p), m_(s.dims[0]), n_(s.dims[1]), k_(s.dims[2]),
        a_(filled<T>(m_ * k_ * s.batch, 1, -1, 1)), b_(filled<T>(k_ * n_ * s.batch, 2, -1, 1)),
        c_(std::size_t(m_ * n_ * s.batch)) {
    add_bytes(bytes_of(a_) + bytes_of(b_) + bytes_of(c_));
  }
  void run() override {
    for (std::int64_t i = 0; i < shape().batch; ++i)
      gemm(m_, n_, k_, a_.data() + i * m_ * k_, b_.data() + i * k_ * n_, c_.data() + i * m_ * n_);
  }

  std::vector<Buffer> buffers() const override { return {view("a", a_), view("b", b_), view("c", c_)}; }
 private:
  std::int64_t m_, n_, k_;
  HostVector<T> a_, b_, c_;
};

template <class T>
class SoftmaxRun final : public KernelRun {
 public:
  SoftmaxRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::softmax, s, p), x_(filled<T>(s.dims[0] * s.dims[1], 3, -4, 4)), y_(x_.size()) {
    add_bytes(bytes_of(x_) + bytes_of(y_));
  }
  void run() override { softmax_rows(x_.data(), y_.data(), shape().dims[0], shape().dims[1]); }

  std::vector<Buffer> buffers() const override { return {view("x", x_), view("y", y_)}; }
 private:
  HostVector<T> x_, y_;
};

template <class T>
class LayerNormRun final : public KernelRun {
 public:
  LayerNormRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::layer_norm, s, p), x_(filled<T>(s.dims[0] * s.dims[1], 4, -2, 2)),
        gamma_(filled<T>(s.dims[1], 5, 0.5, 1.5)), beta_(filled<T>(s.dims[1], 6, -0.5, 0.5)), y_(x_.size()) {
    add_bytes(bytes_of(x_) + bytes_of(gamma_) + bytes_of(beta_) + bytes_of(y_));
  }
  void run() override {
    layer_norm_rows(x_.data(), gamma_.data(), beta_.data(), y_.data(), shape().dims[0], shape().dims[1], T(1e-5));
  }

  std::vector<Buffer> buffers() const override {
    return {view("x", x_), view("gamma", gamma_), view("beta", beta_), view("y", y_)};
  }
 private:
  HostVector<T> x_, gamma_, beta_, y_;
};

template <class T>
class GeluRun final : public KernelRun {
 public:
  GeluRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::gelu, s, p), x_(filled<T>(s.dims[0], 7, -4, 4)), y_(x_.size()) {
    add_bytes(bytes_of(x_) + bytes_of(y_));
  }
  void run() override { gelu(x_.data(), y_.data(), shape().dims[0]); }

  std::vector<Buffer> buffers() const override { return {view("x", x_), view("y", y_)}; }
 private:
  HostVector<T> x_, y_;
};

template <class T>
class ResidualAddRun final : public KernelRun {
 public:
  ResidualAddRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::residual_add, s, p), a_(filled<T>(s.dims[0], 8, -1, 1)), b_(filled<T>(s.dims[0], 9, -1, 1)),
        y_(a_.size()) {
    add_bytes(bytes_of(a_) + bytes_of(b_) + bytes_of(y_));
  }
  void run() override { residual_add(a_.data(), b_.data(), y_.data(), shape().dims[0]); }

  std::vector<Buffer> buffers() const override { return {view("a", a_), view("b", b_), view("y", y_)}; }
 private:
  HostVector<T> a_, b_, y_;
};

template <class T>
class GateTopkRun final : public KernelRun {
 public:
  GateTopkRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::gate_topk, s, p), scores_(filled<T>(s.dims[0] * s.dims[1], 10, -3, 3)),
        index_(std::size_t(s.dims[0] * s.dims[2])), weight_(index_.size()) {
    add_bytes(bytes_of(scores_) + bytes_of(index_) + bytes_of(weight_));
  }
  void run() override {
    gate_topk(scores_.data(), shape().dims[0], shape().dims[1], shape().dims[2], index_.data(), weight_.data());
  }

  std::vector<Buffer> buffers() const override {
    return {view("scores", scores_), view("index", index_), view("weight", weight_)};
  }
 private:
  HostVector<T> scores_;
  HostVector<std::int32_t> index_;
  HostVector<T> weight_;
};

template <class T>
class TokenPermuteRun final : public KernelRun {
 public:
  TokenPermuteRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::token_permute, s, p), x_(filled<T>(s.dims[0] * s.dims[1], 11, -1, 1)),
        index_(permutation(s.dims[0], 12)), y_(x_.size()) {
    add_bytes(bytes_of(x_) + bytes_of(index_) + bytes_of(y_));
  }
  void run() override { token_permute(x_.data(), index_.data(), y_.data(), shape().dims[0], shape().dims[1]); }

  std::vector<Buffer> buffers() const override { return {view("x", x_), view("index", index_), view("y", y_)}; }
 private:
  HostVector<T> x_;
  HostVector<std::int32_t> index_;
  HostVector<T> y_;
};

// The rows a window of a convolution or pooling reads for each output pixel: tap k of pixel p
// is the input row (p + k % side + (k / side) * 64) mod pixels, a square window (side x side)
// on an image 64 pixels wide, so that consecutive pixels and taps reuse rows as real ones do.
HostVector<std::int32_t> window_index(std::int64_t pixels, std::int64_t window) {
  HostVector<std::int32_t> v(static_cast<std::size_t>(pixels * window));
  std::int64_t side = 1;
  while (side * side < window) ++side;
  for (std::int64_t p = 0; p < pixels; ++p)
    for (std::int64_t k = 0; k < window; ++k)
      v[std::size_t(p * window + k)] = std::int32_t((p + k % side + (k / side) * 64) % pixels);
  return v;
}

template <class T>
class WindowRun final : public KernelRun {  // im2col and pool
 public:
  WindowRun(Kernel k, const KernelShape& s, Precision p)
      : KernelRun(k, s, p), x_(filled<T>(s.dims[0] * s.dims[1], 17, -1, 1)), index_(window_index(s.dims[0], s.dims[2])),
        y_(std::size_t(k == Kernel::im2col ? s.dims[0] * s.dims[1] * s.dims[2] : s.dims[0] * s.dims[1])) {
    add_bytes(bytes_of(x_) + bytes_of(index_) + bytes_of(y_));
  }
  void run() override {
    if (kernel() == Kernel::im2col)
      im2col_rows(x_.data(), index_.data(), y_.data(), shape().dims[0], shape().dims[1], shape().dims[2]);
    else
      max_pool_rows(x_.data(), index_.data(), y_.data(), shape().dims[0], shape().dims[1], shape().dims[2]);
  }
  std::vector<Buffer> buffers() const override { return {view("x", x_), view("index", index_), view("y", y_)}; }

 private:
  HostVector<T> x_;
  HostVector<std::int32_t> index_;
  HostVector<T> y_;
};

template <class T>
class BatchNormRun final : public KernelRun {
 public:
  BatchNormRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::batch_norm, s, p), x_(filled<T>(s.dims[0] * s.dims[1], 18, -2, 2)),
        gamma_(filled<T>(s.dims[1], 19, 0.5, 1.5)), beta_(filled<T>(s.dims[1], 20, -0.1, 0.1)), y_(x_.size()) {
    add_bytes(bytes_of(x_) + bytes_of(gamma_) + bytes_of(beta_) + bytes_of(y_));
  }
  void run() override {
    batch_norm_relu(x_.data(), gamma_.data(), beta_.data(), y_.data(), shape().dims[0], shape().dims[1], T(1e-5));
  }
  std::vector<Buffer> buffers() const override {
    return {view("x", x_), view("gamma", gamma_), view("beta", beta_), view("y", y_)};
  }

 private:
  HostVector<T> x_, gamma_, beta_, y_;
};

class AdamRun final : public KernelRun {
 public:
  AdamRun(const KernelShape& s, Precision p)
      : KernelRun(Kernel::adam, s, p), p_(filled<float>(s.dims[0], 13, -1, 1)),
        g_(filled<float>(s.dims[0], 14, -1e-2, 1e-2)), m_(filled<float>(s.dims[0], 15, -1e-3, 1e-3)),
        v_(filled<float>(s.dims[0], 16, 0, 1e-5)) {
    add_bytes(bytes_of(p_) + bytes_of(g_) + bytes_of(m_) + bytes_of(v_));
  }
  void run() override { adam_step(p_.data(), g_.data(), m_.data(), v_.data(), shape().dims[0], AdamHyper{}, ++step_); }

  std::vector<Buffer> buffers() const override { return {view("p", p_), view("g", g_), view("m", m_), view("v", v_)}; }
 private:
  HostVector<float> p_, g_, m_, v_;
  std::int64_t step_ = 0;
};

template <class T>
std::unique_ptr<KernelRun> make_typed(Kernel k, const KernelShape& s, Precision p) {
  switch (k) {
    case Kernel::gemm: return std::make_unique<GemmRun<T>>(s, p);
    case Kernel::softmax: return std::make_unique<SoftmaxRun<T>>(s, p);
    case Kernel::layer_norm: return std::make_unique<LayerNormRun<T>>(s, p);
    case Kernel::gelu: return std::make_unique<GeluRun<T>>(s, p);
    case Kernel::residual_add: return std::make_unique<ResidualAddRun<T>>(s, p);
    case Kernel::gate_topk: return std::make_unique<GateTopkRun<T>>(s, p);
    case Kernel::token_permute: return std::make_unique<TokenPermuteRun<T>>(s, p);
    case Kernel::adam: return std::make_unique<AdamRun>(s, p);
    case Kernel::im2col:
    case Kernel::pool: return std::make_unique<WindowRun<T>>(k, s, p);
    case Kernel::batch_norm: return std::make_unique<BatchNormRun<T>>(s, p);
    case Kernel::host_copy:
    case Kernel::host_adam:  // data movement off the device: no kernel to run
    case Kernel::flash_attention:  // FlashAttention: costed from its device file, not run on the host
    case Kernel::flash_attention_causal:
      throw std::invalid_argument(std::string(to_string(k)) + " is not a device kernel: nothing to run");
  }
  throw std::invalid_argument("unknown kernel");
}

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0;
}

}  // namespace

void check_shape(Kernel k, const KernelShape& s) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("bad shape {}: {}", describe(k, s), why));
  };
  const auto names = shape_axis_names(k);
  double elements = double(s.batch);
  for (int i = 0; i < shape_rank(k); ++i) {
    if (s.dims[i] <= 0) fail(fmt::format("{} must be positive, got {}", names[i], s.dims[i]));
    elements *= double(s.dims[i]);
  }
  if (s.batch < 1) fail(fmt::format("batch must be at least 1, got {}", s.batch));
  if (k != Kernel::gemm && s.batch != 1) fail("only a GEMM has a batch");
  if (elements > 1e15) fail("too large to be a buffer");
  switch (k) {
    case Kernel::gemm:
      for (int i = 0; i < 3; ++i)
        if (s.dims[i] > kInt32Max) fail(fmt::format("{} is over OpenBLAS's int32 limit", names[i]));
      break;
    case Kernel::gate_topk:
      if (s.dims[2] > s.dims[1]) fail(fmt::format("k ({}) is more than the experts ({})", s.dims[2], s.dims[1]));
      if (s.dims[1] > kInt32Max) fail("experts over the int32 index limit");
      break;
    case Kernel::token_permute:
      if (s.dims[0] > kInt32Max) fail("tokens over the int32 index limit");
      break;
    case Kernel::im2col:
    case Kernel::pool:
      if (s.dims[0] * s.dims[2] > kInt32Max) fail("pixels x window over the int32 index limit");
      break;
    default: break;
  }
}

Precision executed_precision(Kernel k, Precision p) {
  if (k == Kernel::adam || p == Precision::fp16) return Precision::fp32;
  return p;
}

std::string stand_in_note(Kernel k, Precision p) {
  if (k == Kernel::adam) {
    if (p == Precision::fp32) return "";
    return fmt::format("Adam runs in fp32 (master parameters and moments), not {}", to_string(p));
  }
  if (p != Precision::fp16) return "";
  if (k == Kernel::gemm)
    return "fp16 GEMM runs as SGEMM (fp32) on the same shape: this host has no half-precision GEMM";
  return fmt::format("fp16 {} runs in fp32 (twice the bytes): this host has no half-precision arithmetic",
                     to_string(k));
}

std::unique_ptr<KernelRun> KernelRun::make(Kernel k, const KernelShape& s, Precision p) {
  check_shape(k, s);
  const Precision e = executed_precision(k, p);
  // nominal bytes at the executed precision are the buffers' size (to within the gate's outputs)
  const double need = nominal_work(k, s, e).bytes;
  const double have = host_memory_bytes();
  if (have > 0 && need > 0.5 * have)
    throw std::invalid_argument(fmt::format("{} needs {:.1f} GB of buffers, more than half of this host's {:.1f} GB; "
                                            "scale it down (costs/scaling.hpp)",
                                            describe(k, s), need / 1e9, have / 1e9));
  return e == Precision::fp64 ? make_typed<double>(k, s, p) : make_typed<float>(k, s, p);
}

std::string KernelRun::stand_in() const { return stand_in_note(kernel_, precision_); }

}  // namespace exasim
