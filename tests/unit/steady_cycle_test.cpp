// Time folding over a cycle of iterations (sim/steady_cycle.hpp): ties for the bottleneck and
// the period and mean of a periodic series of spacings, on hand-made series.
#include <doctest/doctest.h>

#include <vector>

#include "sim/steady_cycle.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;

TEST_CASE("tied_stages counts the stages within the tolerance of the largest") {
  CHECK(tied_stages({}, 1e-3) == 0);
  CHECK(tied_stages({1.0, 0.5, 0.8}, 1e-3) == 1);           // one bottleneck
  CHECK(tied_stages({0.5, 1.0, 0.9995, 1.0, 0.8}, 1e-3) == 3);  // 1 - 0.9995 = 5e-4 <= 1e-3
  CHECK(tied_stages({0.5, 1.0, 0.998, 1.0}, 1e-3) == 2);    // 2e-3 > 1e-3
}

TEST_CASE("find_steady_cycle: a transient, then a cycle of 4 spacings, mean over whole cycles") {
  // Transient 5, 5, 5, 4, 3; then the cycle 2, 2, 3, 1 (mean 2) three times.
  const std::vector<double> s{5, 5, 5, 4, 3, 2, 2, 3, 1, 2, 2, 3, 1, 2, 2, 3, 1};
  // The last 8 agree with the ones 4 before; the stretch of 12 holds 3 whole cycles.
  SteadyCycle c = find_steady_cycle(s, 6, 8, 1e-9);
  CHECK(c.period == 4);
  CHECK(c.cycles == 3);
  CHECK(c.mean_spacing_s == test::rel(2.0));
  // The constant run 2, 2 is no period-1 cycle once the confirmation is longer than it.
  CHECK(find_steady_cycle(s, 6, 2, 1e-9).period == 4);  // 3 and 1 differ from the 2, 2, 3 one to three before
  // Periods past the bound are not found; a confirmation longer than the cycles seen fails.
  CHECK(find_steady_cycle(s, 3, 8, 1e-9).period == 0);
  CHECK(find_steady_cycle(s, 6, 13, 1e-9).period == 0);  // 13 + 4 = 17 but s[4] = 3 != s[0] = 5
}

TEST_CASE("find_steady_cycle: a constant series is a cycle of one, the tolerance is relative") {
  const std::vector<double> flat{1.0, 1.0, 1.0, 1.0, 1.0};
  SteadyCycle c = find_steady_cycle(flat, 4, 4, 1e-9);
  CHECK(c.period == 1);
  CHECK(c.cycles == 5);
  CHECK(c.mean_spacing_s == 1.0);
  // 1.0 and 1.00005 agree within 1e-4, not within 1e-5.
  const std::vector<double> near{1.0, 1.00005, 1.0, 1.00005};
  CHECK(find_steady_cycle(near, 2, 3, 1e-4).period == 1);
  CHECK(find_steady_cycle(near, 2, 2, 1e-5).period == 2);
  CHECK(find_steady_cycle(near, 2, 2, 1e-5).mean_spacing_s == test::rel(1.000025));
}
