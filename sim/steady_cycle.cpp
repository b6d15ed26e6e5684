#include "sim/steady_cycle.hpp"

#include <algorithm>
#include <cmath>

namespace exasim {

int tied_stages(const std::vector<double>& work_s, double tolerance) {
  if (work_s.empty()) return 0;
  const double top = *std::max_element(work_s.begin(), work_s.end());
  return static_cast<int>(
      std::count_if(work_s.begin(), work_s.end(), [&](double w) { return top - w <= tolerance * top; }));
}

namespace {
bool agrees(double a, double b, double tolerance) {
  return std::fabs(a - b) <= tolerance * std::max(std::fabs(a), std::fabs(b));
}
}  // namespace

SteadyCycle find_steady_cycle(const std::vector<double>& s, int max_period, int confirm, double tolerance) {
  const int n = static_cast<int>(s.size());
  for (int q = 1; q <= max_period; ++q) {
    if (confirm + q > n) break;
    bool periodic = true;
    for (int i = n - confirm; i < n && periodic; ++i) periodic = agrees(s[i], s[i - q], tolerance);
    if (!periodic) continue;
    const int cycles = (confirm + q) / q;
    double sum = 0;
    for (int i = n - cycles * q; i < n; ++i) sum += s[i];
    return SteadyCycle{q, sum / (cycles * q), cycles};
  }
  return {};
}

}  // namespace exasim
