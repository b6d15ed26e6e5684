// Real kernels on real buffers, run on this host to sample what a kernel costs at a shape.
//
// GEMM goes through OpenBLAS (cblas_sgemm, cblas_dgemm). The memory-bound kernels are plain C++
// loops written the way the workload does them (softmax: max, exp, sum, divide; layer norm: mean,
// variance, normalise, scale and shift; ...), templated on float and double. The transcendental
// functions in softmax and GELU use a vectorisable exp (see real_kernels.cpp): with the C
// library's scalar tanh, GELU would cost about 20 ns an element here and turn into a compute-bound
// kernel, which it is not on the machines we predict.
//
// fp16 stand-in. This host has no half-precision GEMM (Debian's OpenBLAS 0.3.21 exports no
// sbgemm/shgemm, the CPU has AVX2/FMA but neither AVX512-FP16 nor AVX512-BF16), and no
// half-precision arithmetic for the memory-bound kernels either. So an fp16 GEMM runs as SGEMM on
// the same shape, and fp16 memory-bound kernels run in fp32 (twice the bytes of fp16).
// KernelRun::stand_in() says so. Rationale: the cost model uses the host's RELATIVE efficiency
// at a shape (how far a shape is from the kernel's best rate), not its absolute fp16 rate; what
// the stand-in has to get right is how the time depends on the shape, and an SGEMM on the same
// m, n, k has the same blocking, packing and skinny-dimension behaviour as a half-precision GEMM
// would have.
//
// Threads: GEMM uses OpenBLAS's threads (set_blas_threads); the memory-bound kernels run on the
// calling thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_id.hpp"

namespace exasim {

// ---------------------------------------------------------------------------------------------
// The kernels. Matrices are row-major and dense (leading dimension = row length).
// ---------------------------------------------------------------------------------------------

// C[m x n] = A[m x k] * B[k x n] through OpenBLAS.
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c);
void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, const double* b, double* c);

// y = softmax(x) row by row (rows x cols), numerically stable: max, exp(x - max) and sum, divide.
template <class T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols);

// y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row (rows x cols); var is the biased
// variance of the row; gamma and beta have cols values.
template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, T* y, std::int64_t rows, std::int64_t cols, T eps);

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), element-wise over n values.
template <class T>
void gelu(const T* x, T* y, std::int64_t n);

// y = a + b over n values.
template <class T>
void residual_add(const T* a, const T* b, T* y, std::int64_t n);

// MoE gate: for each token (a row of `experts` scores) the k highest scores, best first (on a tie
// the lower expert index first): index[t*k + j] is the expert, weight[t*k + j] its softmax weight
// normalised over the k chosen scores. Requires 1 <= k <= experts.
template <class T>
void gate_topk(const T* scores, std::int64_t tokens, std::int64_t experts, std::int64_t k, std::int32_t* index,
               T* weight);

// y[i, :] = x[index[i], :] for i < tokens (rows of d_model values); index values index rows of x.
template <class T>
void token_permute(const T* x, const std::int32_t* index, T* y, std::int64_t tokens, std::int64_t d_model);

// im2col: y[(p * window + k), :] = x[index[p * window + k], :] (rows of `channels` values): the
// patch matrix of a convolution, each output pixel's window taps side by side.
template <class T>
void im2col_rows(const T* x, const std::int32_t* index, T* y, std::int64_t pixels, std::int64_t channels,
                 std::int64_t window);

// Batch norm with its ReLU over rows x cols (rows = pixels of the batch, cols = channels):
// per column the mean and biased variance over the rows, then y = max(0, (x - mean) /
// sqrt(var + eps) * gamma + beta).
template <class T>
void batch_norm_relu(const T* x, const T* gamma, const T* beta, T* y, std::int64_t rows, std::int64_t cols, T eps);

// Max pooling: y[p, :] = max over k < window of x[index[p * window + k], :].
template <class T>
void max_pool_rows(const T* x, const std::int32_t* index, T* y, std::int64_t pixels, std::int64_t channels,
                   std::int64_t window);

// Adam (no weight decay), in place over n fp32 parameters p with gradients g and moments m, v:
// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).   step counts from 1.
struct AdamHyper {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};
void adam_step(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamHyper& h, std::int64_t step);

// ---------------------------------------------------------------------------------------------
// OpenBLAS
// ---------------------------------------------------------------------------------------------
void set_blas_threads(int n);  // n >= 1, else std::invalid_argument
int blas_threads();
// Joins OpenBLAS's thread pool, which starts with the library and spins (sched_yield) for about
// 2^28 cycles per thread waiting for work: CPU time a command that runs no GEMM would only burn
// (a formula sweep, about a tenth of its CPU seconds). The next threaded BLAS call starts it again.
void release_blas_threads();
std::string blas_description();  // "OpenBLAS <openblas_get_config()>"

// ---------------------------------------------------------------------------------------------
// One kernel, its buffers allocated and filled, ready to run at a shape.
// ---------------------------------------------------------------------------------------------

// Throws std::invalid_argument naming the shape and what is wrong with it: a used dim that is not
// positive, batch != 1 outside GEMM, k > experts for the gate, a dim too large for the int32 that
// OpenBLAS or the permutation index take.
void check_shape(Kernel k, const KernelShape& s);

// The precision a kernel really runs in here: fp16 runs in fp32 (the stand-in above), Adam
// always runs in fp32 (master parameters, gradients and moments).
Precision executed_precision(Kernel k, Precision p);

// "" when the kernel runs as asked, else a sentence saying what stands in for it.
std::string stand_in_note(Kernel k, Precision p);

class KernelRun {
 public:
  // Allocates and fills the buffers deterministically (fixed seeds; values in [-1, 1) or so,
  // gate scores random, the permutation index a random permutation). Throws std::invalid_argument
  // for a bad shape (check_shape) or one whose buffers would not fit in this host's memory.
  static std::unique_ptr<KernelRun> make(Kernel k, const KernelShape& s, Precision p);

  virtual ~KernelRun() = default;
  // Runs the kernel once over the whole shape (a batched GEMM: the batch's products one by one).
  virtual void run() = 0;
  // stand_in_note(kernel(), precision()).
  virtual std::string stand_in() const;

  // The buffers, for tests and checks: name, address, element count and element type.
  //   gemm: a, b, c (batch products one after the other); softmax, gelu: x, y;
  //   layer_norm: x, gamma, beta, y; residual_add: a, b, y; gate_topk: scores, index, weight;
  //   token_permute: x, index, y; adam: p, g, m, v (fp32); im2col, pool: x, index, y;
  //   batch_norm: x, gamma, beta, y.
  enum class Element { fp32, fp64, int32 };
  struct Buffer {
    std::string name;
    const void* data = nullptr;
    std::int64_t count = 0;
    Element element = Element::fp32;
  };
  virtual std::vector<Buffer> buffers() const = 0;

  double bytes_allocated() const { return bytes_allocated_; }  // bytes, all buffers
  Kernel kernel() const { return kernel_; }
  const KernelShape& shape() const { return shape_; }
  Precision precision() const { return precision_; }  // as asked, not as executed

 protected:
  KernelRun(Kernel k, const KernelShape& s, Precision p) : kernel_(k), shape_(s), precision_(p) {}
  void add_bytes(double b) { bytes_allocated_ += b; }

 private:
  Kernel kernel_;
  KernelShape shape_;
  Precision precision_;
  double bytes_allocated_ = 0;
};

}  // namespace exasim
