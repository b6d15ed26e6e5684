// MemoizedEfficiency: a sweep asks its source once per (kernel, precision, shape) and answers the
// source's own numbers after that.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "costs/profile_cost_model.hpp"

using namespace exasim;

namespace {
// Answers 1 / (1 + the shape's first dimension), halved for fp32; counts what it is asked.
class Counting final : public HostEfficiency {
 public:
  double relative(Kernel, Precision p, const KernelShape& s) const override {
    ++asked;
    return (p == Precision::fp32 ? 0.5 : 1.0) / (1.0 + static_cast<double>(s.dims[0]));
  }
  std::string describe() const override { return "counting"; }
  void require_precision(Precision p, const std::string& user) const override {
    if (p == Precision::fp64) throw std::runtime_error(user);
  }
  mutable int asked = 0;
};
}  // namespace

TEST_CASE("memoized efficiency: each distinct (kernel, precision, shape) asked once, same answers") {
  const auto source = std::make_shared<Counting>();
  const MemoizedEfficiency memo(source);
  const KernelShape a{{3, 4, 5}, 1}, b{{7, 4, 5}, 1}, a_batched{{3, 4, 5}, 2};
  for (int i = 0; i < 5; ++i) {
    CHECK(memo.relative(Kernel::gemm, Precision::fp16, a) == 0.25);  // exact: a binary fraction
    CHECK(memo.relative(Kernel::gemm, Precision::fp32, a) == 0.125);  // exact: a binary fraction
    CHECK(memo.relative(Kernel::gemm, Precision::fp16, b) == 0.125);  // exact: a binary fraction
    (void)memo.relative(Kernel::gemm, Precision::fp16, a_batched);  // the batch is part of the shape
  }
  CHECK(source->asked == 4);
  CHECK(memo.distinct_shapes() == 4);
  CHECK(memo.describe() == "counting");  // reports name the source, not the cache
  CHECK_THROWS_AS(memo.require_precision(Precision::fp64, "who"), std::runtime_error);
  CHECK_NOTHROW(memo.require_precision(Precision::fp16, "who"));
}

TEST_CASE("memoized efficiency: refuses a missing source") {
  CHECK_THROWS_AS(MemoizedEfficiency(nullptr), std::invalid_argument);
}
