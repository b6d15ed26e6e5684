#include "models/moe_routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace exasim {

const char* to_string(RouterDistribution d) {
  switch (d) {
    case RouterDistribution::uniform: return "uniform";
    case RouterDistribution::zipf: return "zipf";
  }
  return "?";
}

std::vector<double> expert_load_shares(const RouterSpec& router, int experts, int top_k) {
  if (experts < 1 || top_k < 1 || top_k > experts)
    throw std::invalid_argument(fmt::format("expert_load_shares: need 1 <= top_k ({}) <= experts ({})", top_k, experts));
  std::vector<double> w(experts, 1.0);
  if (router.distribution == RouterDistribution::zipf)
    for (int e = 0; e < experts; ++e) w[e] = 1.0 / std::pow(e + 1.0, router.zipf_s);
  double sum = 0;
  for (double x : w) sum += x;
  for (double& x : w) x /= sum;
  // Under top-k a token picks an expert at most once: no expert gets more than 1 / k of the
  // slots. Cap and hand the excess to the uncapped experts in proportion to their shares, until
  // none exceeds the cap (at most `experts` rounds; the shares are non-increasing in e).
  const double cap = 1.0 / top_k;
  std::vector<bool> capped(experts, false);
  for (int round = 0; round < experts; ++round) {
    double excess = 0, free_sum = 0;
    for (int e = 0; e < experts; ++e) {
      if (capped[e]) continue;
      if (w[e] > cap * (1 + 1e-12)) {
        excess += w[e] - cap;
        w[e] = cap;
        capped[e] = true;
      } else {
        free_sum += w[e];
      }
    }
    if (excess <= 0 || free_sum <= 0) break;
    for (int e = 0; e < experts; ++e)
      if (!capped[e]) w[e] += excess * w[e] / free_sum;
  }
  return w;
}

double MoeRouting::hottest_expert_load_tokens() const {
  return load_tokens_per_expert.empty()
             ? 0
             : *std::max_element(load_tokens_per_expert.begin(), load_tokens_per_expert.end());
}

double MoeRouting::busiest_device_rows() const {
  return expert_rows_per_device.empty()
             ? 0
             : *std::max_element(expert_rows_per_device.begin(), expert_rows_per_device.end());
}

MoeRouting moe_routing(const ModelSpec& m, double T, int ep) {
  MoeRouting r;
  r.router = m.router;
  r.capacity_factor = m.capacity_factor;
  r.dropless = m.dropless();
  if (m.dense()) return r;
  if (ep < 1 || m.experts_per_layer % ep != 0)
    throw std::invalid_argument(fmt::format("moe_routing: expert_parallel ({}) must divide the experts ({})", ep,
                                            m.experts_per_layer));
  const int E = m.experts_per_layer, k = m.top_k;
  r.routed_slots_per_micro_batch = T * k * ep;
  r.capacity_tokens_per_expert = m.padded_slots_per_token() * T * ep / E;  // cf T k ep / E ungrouped
  double load_sum = 0;
  for (double share : expert_load_shares(m.router, E, k)) {
    const double load = share * r.routed_slots_per_micro_batch;
    r.load_tokens_per_expert.push_back(load);
    // (a relative tolerance: uniform routing at cf = 1 drops nothing, whatever the rounding)
    const double over = load - r.capacity_tokens_per_expert;
    if (!r.dropless && over > 1e-12 * r.capacity_tokens_per_expert) r.dropped_tokens_per_micro_batch += over;
    load_sum += load;
  }
  r.dropped_token_fraction = load_sum > 0 ? r.dropped_tokens_per_micro_batch / load_sum : 0;
  const int local = E / ep;
  for (int j = 0; j < ep; ++j) {
    double rows = 0;
    for (int e = j * local; e < (j + 1) * local; ++e)
      rows += r.dropless ? r.load_tokens_per_expert[e] : r.capacity_tokens_per_expert;
    r.expert_rows_per_device.push_back(rows);
  }
  return r;
}

}  // namespace exasim
