#include "costs/scaling.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>

#include "kernels/real_kernels.hpp"

namespace exasim {
namespace {

// The largest v in [lo, hi] with fits(v), for fits true up to some v and false above; 0 if none.
template <class Fits>
std::int64_t largest_fitting(std::int64_t lo, std::int64_t hi, Fits fits) {
  if (lo > hi || !fits(lo)) return 0;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// v rounded down to a multiple of 8 when v >= 64 and the result stays >= floor.
std::int64_t round_down_sane(std::int64_t v, std::int64_t floor) {
  const std::int64_t r = v - v % 8;
  return v >= 64 && r >= floor ? r : v;
}

ScaledShape scale_gemm(const KernelShape& full, Precision p, const ScalingLimits& lim) {
  const auto fits = [&](const KernelShape& s) {
    const NominalWork w = nominal_work(Kernel::gemm, s, p);
    return w.flops <= lim.max_flops && w.bytes <= lim.max_bytes;
  };
  KernelShape s = full;
  // 1. the batch
  if (const std::int64_t b = largest_fitting(1, s.batch, [&](std::int64_t v) {
        KernelShape t = s;
        t.batch = v;
        return fits(t);
      })) {
    s.batch = b;
    return {s, 1};  // factor filled in by the caller
  }
  s.batch = 1;
  // dims ordered smallest to largest (ties by position): small, mid, large
  std::array<int, 3> order = {0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s.dims[a] < s.dims[b]; });
  const int small = order[0], mid = order[1], large = order[2];
  const std::int64_t floor = s.dims[small];
  const auto with = [&](std::initializer_list<int> axes, std::int64_t v) {
    KernelShape t = s;
    for (int a : axes) t.dims[a] = v;
    return t;
  };
  // 2. the largest alone, down to the middle one
  if (const std::int64_t v =
          largest_fitting(s.dims[mid], s.dims[large], [&](std::int64_t x) { return fits(with({large}, x)); })) {
    s.dims[large] = round_down_sane(v, s.dims[mid]);
    return {s, 1};
  }
  // 3. the two largest together, down to the smallest one
  if (const std::int64_t v =
          largest_fitting(floor, s.dims[mid], [&](std::int64_t x) { return fits(with({mid, large}, x)); })) {
    s = with({mid, large}, round_down_sane(v, floor));
    return {s, 1};
  }
  // 4. all three together
  const std::int64_t v = largest_fitting(1, floor, [&](std::int64_t x) { return fits(with({0, 1, 2}, x)); });
  s = with({0, 1, 2}, round_down_sane(std::max<std::int64_t>(v, 1), 1));
  return {s, 1};
}

ScaledShape scale_rows(Kernel k, const KernelShape& full, Precision p, const ScalingLimits& lim) {
  const auto bytes = [&](std::int64_t rows) {
    KernelShape t = full;
    t.dims[0] = rows;
    return nominal_work(k, t, p).bytes;
  };
  std::int64_t rows = largest_fitting(1, full.dims[0], [&](std::int64_t r) { return bytes(r) <= lim.max_bytes; });
  rows = round_down_sane(std::max<std::int64_t>(rows, 1), 1);
  if (bytes(rows) < lim.min_bytes) {  // the smallest row count that moves min_bytes
    const std::int64_t under =
        largest_fitting(rows, full.dims[0], [&](std::int64_t r) { return bytes(r) < lim.min_bytes; });
    rows = std::min(under + 1, full.dims[0]);
  }
  KernelShape s = full;
  s.dims[0] = rows;
  return {s, 1};
}

}  // namespace

ScaledShape scale_down(Kernel k, const KernelShape& s, Precision p, const ScalingLimits& lim) {
  check_shape(k, s);
  if (!(lim.max_flops > 0) || !(lim.max_bytes > 0) || !(lim.min_bytes >= 0) || lim.min_bytes > lim.max_bytes)
    throw std::invalid_argument("scaling limits: need max_flops > 0, max_bytes > 0 and 0 <= min_bytes <= max_bytes");
  const NominalWork full = nominal_work(k, s, p);
  const bool is_gemm = k == Kernel::gemm;
  if (full.bytes <= lim.max_bytes && (!is_gemm || full.flops <= lim.max_flops)) return {s, 1};
  ScaledShape out = is_gemm ? scale_gemm(s, p, lim) : scale_rows(k, s, p, lim);
  const NominalWork w = nominal_work(k, out.shape, p);
  out.factor = is_gemm ? full.flops / w.flops : full.bytes / w.bytes;
  return out;
}

}  // namespace exasim
