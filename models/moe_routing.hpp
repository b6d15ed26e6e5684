// Expected expert loads of an MoE layer under a router distribution (models/moe_spec.hpp), and
// the tokens GShard's capacity drops (GShard, Switch Transformer): each expert processes at most
// its capacity C = cf T k ep / E token-slots per micro-batch (T tokens per device and micro-batch,
// top-k, E experts over an expert-parallel group of ep devices); the slots beyond it skip the
// expert and the residual connection carries their tokens.
#pragma once
#include <vector>

#include "models/moe_spec.hpp"

namespace exasim {

// Each expert's share of the routed token-slots (sums to 1), in expert index order. Throws
// std::invalid_argument for experts < 1, top_k < 1 or top_k > experts.
std::vector<double> expert_load_shares(const RouterSpec& router, int experts, int top_k);

struct MoeRouting {
  RouterSpec router;
  double capacity_factor = 1;
  // Dropless (capacity_factor 0, as MegaBlocks): no capacity, nothing dropped; each device of an
  // expert-parallel group computes every slot routed to its experts, so the one holding the
  // hottest experts computes most and the step waits for it.
  bool dropless = false;
  double routed_slots_per_micro_batch = 0;        // T k ep: the ep group's routed token-slots
  double capacity_tokens_per_expert = 0;          // cf T k ep / E, per micro-batch (GShard groups: ep (T / S) C)
  std::vector<double> load_tokens_per_expert;     // expected slots routed to each expert, per micro-batch
  double dropped_tokens_per_micro_batch = 0;      // sum_e max(0, load_e - C)
  // sum_e max(0, load_e - C) / sum_e load_e: independent of T and ep (= sum_e max(0, share_e - cf / E)).
  double dropped_token_fraction = 0;
  double hottest_expert_load_tokens() const;      // max_e load_e, per micro-batch
  // Per device j of an expert-parallel group (experts j E/ep .. (j+1) E/ep - 1), the expert rows
  // it computes per micro-batch: padded, E/ep x C for every device; dropless, its experts' loads.
  std::vector<double> expert_rows_per_device;
  double busiest_device_rows() const;             // max_j expert_rows_per_device[j]
};

// T: tokens per device and micro-batch; ep: the expert-parallel group size.
MoeRouting moe_routing(const ModelSpec& model, double tokens_per_micro_batch, int expert_parallel);

}  // namespace exasim
