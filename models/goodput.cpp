#include "models/goodput.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace exasim {

double young_interval_s(double delta_s, double mtti_s) { return std::sqrt(2 * delta_s * mtti_s); }

double daly_interval_s(double delta_s, double mtti_s) {
  if (delta_s >= 2 * mtti_s) return mtti_s;
  const double xi = delta_s / (2 * mtti_s);
  return young_interval_s(delta_s, mtti_s) * (1 + std::sqrt(xi) / 3 + xi / 9) - delta_s;
}

double daly_goodput(double tau_s, double delta_s, double restart_s, double mtti_s) {
  const double M = mtti_s;
  // expm1 keeps the digits when (tau + delta) << M
  return tau_s / (M * std::exp(restart_s / M) * std::expm1((tau_s + delta_s) / M));
}

double job_mtti_s(const JobComponents& c, const ResilienceSpec& r) {
  if (!(r.node_mtbf_s > 0)) throw std::invalid_argument("resilience: node_mtbf_s must be positive");
  double rate = c.nodes / r.node_mtbf_s;
  if (r.link_mtbf_s > 0) rate += c.links / r.link_mtbf_s;
  if (r.switch_mtbf_s > 0) rate += c.switches / r.switch_mtbf_s;
  if (!(rate > 0)) throw std::invalid_argument("resilience: the job has no component that can fail");
  return 1 / rate;
}

GoodputResult expected_goodput(const ResilienceSpec& r, const JobComponents& c, double checkpoint_bytes,
                               double write_Bps, double step_time_s) {
  if (!(write_Bps > 0) || !(step_time_s > 0))
    throw std::invalid_argument("resilience: the checkpoint write bandwidth and the step time must be positive");
  GoodputResult g;
  g.mtti_s = job_mtti_s(c, r);
  g.checkpoint_bytes = checkpoint_bytes;
  g.checkpoint_write_s = checkpoint_bytes / write_Bps;
  g.restart_s = r.restart_s;
  g.young_interval_s = young_interval_s(g.checkpoint_write_s, g.mtti_s);
  g.daly_interval_s = daly_interval_s(g.checkpoint_write_s, g.mtti_s);
  g.interval_given = r.checkpoint_interval_s > 0;
  const double wanted_s = g.interval_given ? r.checkpoint_interval_s : g.daly_interval_s;
  g.interval_steps = std::max(1.0, std::round(wanted_s / step_time_s));
  g.interval_s = g.interval_steps * step_time_s;
  g.goodput = daly_goodput(g.interval_s, g.checkpoint_write_s, g.restart_s, g.mtti_s);
  return g;
}

}  // namespace exasim
