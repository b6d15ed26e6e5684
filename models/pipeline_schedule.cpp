#include "models/pipeline_schedule.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace exasim {

std::vector<PipelineItem> pipeline_order(PipelineSchedule schedule, int p, int m, int v, int s) {
  if (p < 1 || m < 1 || v < 1 || s < 0 || s >= p)
    throw std::invalid_argument("pipeline schedule: needs stages >= 1, micro-batches >= 1, chunks >= 1 and a stage in range");
  if (v > 1 && schedule != PipelineSchedule::interleaved)
    throw std::invalid_argument("pipeline schedule: " + std::to_string(v) + " model chunks per device need the interleaved schedule");
  std::vector<PipelineItem> out;
  out.reserve(2 * static_cast<size_t>(m) * v);
  switch (schedule) {
    case PipelineSchedule::gpipe:
      for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
      for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
      break;
    case PipelineSchedule::one_f_one_b: {
      const int warmup = std::min(p - s - 1, m);
      int f = 0, b = 0;
      for (; f < warmup; ++f) out.push_back({true, f, 0});
      for (; f < m; ++f, ++b) {
        out.push_back({true, f, 0});
        out.push_back({false, b, 0});
      }
      for (; b < m; ++b) out.push_back({false, b, 0});
      break;
    }
    case PipelineSchedule::interleaved: {
      if (m % p != 0)
        throw std::invalid_argument("interleaved schedule: micro-batches (" + std::to_string(m) +
                                    ") must be a multiple of the pipeline stages (" + std::to_string(p) + ")");
      const int total = m * v;
      auto item = [&](int k, bool forward) {
        const int group = p * v;
        int chunk = (k % group) / p;
        if (!forward) chunk = v - 1 - chunk;
        return PipelineItem{forward, (k / group) * p + k % p, chunk};
      };
      const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
      int f = 0, b = 0;
      for (; f < warmup; ++f) out.push_back(item(f, true));
      for (; f < total; ++f, ++b) {
        out.push_back(item(f, true));
        out.push_back(item(b, false));
      }
      for (; b < total; ++b) out.push_back(item(b, false));
      break;
    }
  }
  return out;
}

namespace {
// The last two micro-batches, `period` apart, whose final backward item on stage 0 is followed by
// a forward item (steady state) in an order of `m` micro-batches; {-1, -1} when there are none.
std::pair<int, int> last_steady_pair(const std::vector<PipelineItem>& order, int period) {
  size_t last_forward = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].forward) last_forward = i;
  int second = -1;
  for (size_t i = 0; i < last_forward; ++i)
    if (!order[i].forward && order[i].chunk == 0) second = std::max(second, order[i].micro_batch);
  if (second - period < 0) return {-1, -1};
  return {second - period, second};
}
}  // namespace

SteadyStateWindow steady_state_window(PipelineSchedule schedule, int p, int m, int v, int settling_periods) {
  SteadyStateWindow w;
  w.simulated = m;
  if (schedule == PipelineSchedule::gpipe || p < 2) return w;
  w.period = schedule == PipelineSchedule::interleaved ? p : 1;
  // The fewest micro-batches (a multiple of the period, at least p) whose measured pair comes after
  // `settling_periods` steady periods, and that still leave a period out.
  for (int sim = p; sim + w.period <= m; sim += w.period) {
    if ((m - sim) % w.period != 0) continue;
    const auto [first, second] = last_steady_pair(pipeline_order(schedule, p, sim, v, 0), w.period);
    if (first < settling_periods * w.period) continue;
    w.simulated = sim;
    w.first = first;
    w.second = second;
    break;
  }
  return w;
}

}  // namespace exasim
