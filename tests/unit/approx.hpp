// A relative tolerance for doctest comparisons. doctest's Approx(v) passes when
//   |lhs - v| < epsilon * (scale + max(|lhs|, |v|)),  scale 1 and epsilon 100 x FLT_EPSILON by default,
// so below 1 its tolerance is absolute: Approx(0.0008) accepts 1.5 % and Approx(0.0008).epsilon(0.01) accepts
// 12 times the value, checks that cannot fail for this project's milliseconds and microseconds.
// rel(v, rel_tol) passes when |lhs - v| < rel_tol * max(|lhs|, |v|), whatever v's magnitude; rel(0) therefore
// asks for exactly 0 (a check that means "zero up to rounding" says its absolute tolerance instead).
#pragma once

#include <doctest/doctest.h>

#include <limits>

namespace exasim::test {

// doctest's default epsilon (100 x FLT_EPSILON, 1.19e-5), here relative.
inline constexpr double kApproxRelTol = 100.0 * std::numeric_limits<float>::epsilon();

inline doctest::Approx rel(double v, double rel_tol = kApproxRelTol) {
  // scale DBL_MIN, not 0: doctest compares with '<', so scale 0 would refuse even an exact 0 == rel(0).
  return doctest::Approx(v).epsilon(rel_tol).scale(std::numeric_limits<double>::min());
}

}  // namespace exasim::test
