// Pipeline schedules: the order in which one pipeline stage runs the forward and backward
// passes of its micro-batches (Narayanan et al., SC21, and Megatron-LM's schedules.py).
// Nothing here is timed: the bubble emerges when the engine replays these orders with the
// transfers between stages.
//
//  * GPipe: all m forwards, then all m backwards, both in micro-batch order.
//  * 1F1B (PipeDream-Flush): stage s runs min(p - s - 1, m) warm-up forwards, then alternates
//    one forward and one backward, then the remaining backwards.
//  * Interleaved 1F1B: each device holds v model chunks (virtual stages s, s + p, ...). Forward
//    work item k (0 <= k < m v) is micro-batch (k / (p v)) p + k % p of chunk (k % (p v)) / p;
//    backward item k runs the chunks in reverse. Warm-up is (p - s - 1) 2 + (v - 1) p items
//    (at most m v), then one forward and one backward alternate, then the cool-down backwards.
//    m must be a multiple of p.
#pragma once
#include <stdexcept>
#include <vector>

#include "models/parallel_plan.hpp"

namespace exasim {

struct PipelineItem {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;  // model chunk on this device (0 unless interleaved)
  bool operator==(const PipelineItem& o) const {
    return forward == o.forward && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

// The order of stage `stage`'s items; throws std::invalid_argument for impossible inputs
// (m < 1, p < 1, v < 1, v > 1 outside the interleaved schedule, interleaved with m % p != 0).
std::vector<PipelineItem> pipeline_order(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                         int stage);

}  // namespace exasim
