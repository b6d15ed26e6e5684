// Counts multiplied in 64 bits with overflow checks: a product of sizes read from input files
// (parallel sizes, machine dimensions) never wraps around.
#pragma once
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>

namespace exasim {

// The product, or nullopt when it does not fit in a signed 64-bit integer.
inline std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (std::int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return std::nullopt;
  return p;
}

// The product as an int (a rank count); throws std::overflow_error naming `what` when it does
// not fit in one.
inline int checked_int_product(std::initializer_list<std::int64_t> factors, const char* what) {
  const std::optional<std::int64_t> p = checked_product(factors);
  if (!p || *p > INT_MAX || *p < INT_MIN)
    throw std::overflow_error(std::string(what) + " does not fit in a 32-bit count (at most " +
                              std::to_string(INT_MAX) + ")");
  return static_cast<int>(*p);
}

}  // namespace exasim
