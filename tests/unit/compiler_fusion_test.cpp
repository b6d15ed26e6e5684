// A fusing compiler (XLA on a TPU; the device file's "compiler") as the cost model sees it: the
// memory-bound kernels fused into their neighbours stream fused_bytes(), GEMMs are unchanged, and
// a device whose framework does not fuse keeps every kernel's nominal bytes. Bytes by hand.
#include <doctest/doctest.h>

#include "kernels/kernel_id.hpp"
#include "sim/cost_model.hpp"

using namespace exasim;

namespace {

DeviceProfile device(bool fuses) {
  DeviceProfile d;
  d.name = "chip";
  d.peak_flops_per_s = {{Precision::fp16, 1e14}};
  d.gemm_efficiency = {{Precision::fp16, 0.8}};
  d.memory_bandwidth_Bps = 1e12;
  d.optimizer_memory_bandwidth_Bps = 1e12;
  d.fuses_elementwise = fuses;
  return d;
}

ComputeWork work(Kernel k, KernelShape s) {
  const NominalWork w = nominal_work(k, s, Precision::fp16);
  return {k, Precision::fp16, w.flops, w.bytes, s};
}

}  // namespace

TEST_CASE("fused bytes: element-wise ops vanish into their neighbours, row reductions read their input once") {
  const Precision h = Precision::fp16;  // 2 bytes
  CHECK(fused_bytes(Kernel::gelu, {{1000, 0, 0}, 1}, h) == 0);
  CHECK(fused_bytes(Kernel::residual_add, {{1000, 0, 0}, 1}, h) == 2000);  // the skip connection's read
  CHECK(fused_bytes(Kernel::softmax, {{10, 100, 0}, 1}, h) == 2000);
  CHECK(fused_bytes(Kernel::layer_norm, {{10, 100, 0}, 1}, h) == (1000 + 200) * 2);
  // batch norm's passes keep their own bytes: the kernel's fused bytes are its nominal ones
  CHECK(fused_bytes(Kernel::batch_norm, {{10, 100, 0}, 1}, h) == (3000 + 200) * 2);
  CHECK(fused_bytes(Kernel::im2col, {{10, 64, 9}, 1}, h) == 0);
  const KernelShape pool{{10, 64, 9}, 1};
  CHECK(fused_bytes(Kernel::pool, pool, h) == nominal_work(Kernel::pool, pool, h).bytes);
}

TEST_CASE("a fusing device streams fused bytes for memory-bound kernels only") {
  const RooflineCostModel plain(device(false)), xla(device(true));
  const ComputeWork bn = work(Kernel::batch_norm, {{1 << 20, 64, 0}, 1});
  // unfused: statistics read, normalise read and write (3 passes) plus scale and shift
  CHECK(plain.compute_time_s(bn) == doctest::Approx((3.0 * (1 << 20) * 64 + 128) * 2 / 1e12));
  CHECK(xla.compute_time_s(bn) == plain.compute_time_s(bn));
  const ComputeWork gelu = work(Kernel::gelu, {{1 << 24, 0, 0}, 1});
  CHECK(plain.compute_time_s(gelu) == doctest::Approx(2.0 * (1 << 24) * 2 / 1e12));
  CHECK(xla.compute_time_s(gelu) == doctest::Approx(8.0 * (1 << 24) / 1e14));  // its flops alone
  const ComputeWork gemm = work(Kernel::gemm, {{4096, 4096, 4096}, 1});
  CHECK(xla.compute_time_s(gemm) == plain.compute_time_s(gemm));
  const ComputeWork adam = work(Kernel::adam, {{1 << 20, 0, 0}, 1});
  CHECK(xla.compute_time_s(adam) == plain.compute_time_s(adam));
}

TEST_CASE("batch norm's passes as XLA's BatchNormExpander writes them: 3 tensors forward, 5 backward") {
  const Precision h = Precision::fp16;  // 2 bytes
  const KernelShape s{{1000, 10, 0}, 1};  // X: 10,000 values; gamma and beta: 10 each
  const double x = 10000 * 2, c = 10 * 2;
  CHECK(batch_norm_pass_work(BatchNormPass::statistics, s, h).bytes == x);              // X read
  CHECK(batch_norm_pass_work(BatchNormPass::normalise, s, h).bytes == 2 * x + 2 * c);   // X read, Y written
  CHECK(batch_norm_pass_work(BatchNormPass::grad_reduce, s, h).bytes == 2 * x);         // dY, X read
  CHECK(batch_norm_pass_work(BatchNormPass::grad_apply, s, h).bytes == 3 * x + 2 * c);  // dY, X read, dX written
  const NominalWork whole = nominal_work(Kernel::batch_norm, s, h);
  CHECK(batch_norm_pass_work(BatchNormPass::statistics, s, h).bytes +
            batch_norm_pass_work(BatchNormPass::normalise, s, h).bytes ==
        whole.bytes);
  CHECK(batch_norm_pass_work(BatchNormPass::statistics, s, h).flops +
            batch_norm_pass_work(BatchNormPass::normalise, s, h).flops ==
        whole.flops);
  // a fusing device streams each pass's own bytes (none fuses into a neighbour)
  const RooflineCostModel xla(device(true));
  const NominalWork apply = batch_norm_pass_work(BatchNormPass::grad_apply, s, h);
  CHECK(xla.compute_time_s({Kernel::batch_norm, h, apply.flops, apply.bytes, s}) == doctest::Approx(apply.bytes / 1e12));
}
