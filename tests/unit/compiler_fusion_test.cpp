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
  CHECK(fused_bytes(Kernel::batch_norm, {{10, 100, 0}, 1}, h) == (1000 + 200) * 2);
  CHECK(fused_bytes(Kernel::im2col, {{10, 64, 9}, 1}, h) == 0);
  const KernelShape pool{{10, 64, 9}, 1};
  CHECK(fused_bytes(Kernel::pool, pool, h) == nominal_work(Kernel::pool, pool, h).bytes);
}

TEST_CASE("a fusing device streams fused bytes for memory-bound kernels only") {
  const RooflineCostModel plain(device(false)), xla(device(true));
  const ComputeWork bn = work(Kernel::batch_norm, {{1 << 20, 64, 0}, 1});
  // unfused: statistics read, normalise read and write (3 passes) plus scale and shift
  CHECK(plain.compute_time_s(bn) == doctest::Approx((3.0 * (1 << 20) * 64 + 128) * 2 / 1e12));
  CHECK(xla.compute_time_s(bn) == doctest::Approx((1.0 * (1 << 20) * 64 + 128) * 2 / 1e12));
  const ComputeWork gelu = work(Kernel::gelu, {{1 << 24, 0, 0}, 1});
  CHECK(plain.compute_time_s(gelu) == doctest::Approx(2.0 * (1 << 24) * 2 / 1e12));
  CHECK(xla.compute_time_s(gelu) == doctest::Approx(8.0 * (1 << 24) / 1e14));  // its flops alone
  const ComputeWork gemm = work(Kernel::gemm, {{4096, 4096, 4096}, 1});
  CHECK(xla.compute_time_s(gemm) == plain.compute_time_s(gemm));
  const ComputeWork adam = work(Kernel::adam, {{1 << 20, 0, 0}, 1});
  CHECK(xla.compute_time_s(adam) == plain.compute_time_s(adam));
}
