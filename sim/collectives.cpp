#include "sim/collectives.hpp"

#include <string>

namespace exasim {

CollectiveSchedule::CollectiveSchedule(CollectiveKind kind, CollectiveAlgorithm algorithm, int group_size,
                                       double bytes, int block_size)
    : kind_(kind), algorithm_(algorithm), n_(group_size), bytes_(bytes), block_(block_size) {
  if (group_size < 1) throw std::invalid_argument("collective group size must be at least 1");
  if (bytes < 0) throw std::invalid_argument("collective bytes must not be negative");
  const bool a2a = kind == CollectiveKind::all_to_all;
  if (a2a && algorithm == CollectiveAlgorithm::ring)
    throw std::invalid_argument("all_to_all has no ring algorithm (use pairwise, direct or hierarchical)");
  const bool blocked = algorithm == CollectiveAlgorithm::hierarchical || algorithm == CollectiveAlgorithm::torus_2d ||
                       algorithm == CollectiveAlgorithm::multi_ring;
  if (blocked && (block_ < 1 || n_ % block_ != 0))
    throw std::invalid_argument(std::string(to_string(algorithm)) + " " + to_string(kind) + ": block size " +
                                std::to_string(block_) + " does not divide the group size " + std::to_string(n_));
  if (a2a && algorithm == CollectiveAlgorithm::torus_2d)
    throw std::invalid_argument("all_to_all has no torus_2d algorithm (use direct: every flow at once on the torus routes)");
  if (a2a && algorithm == CollectiveAlgorithm::multi_ring)
    throw std::invalid_argument("all_to_all has no multi_ring algorithm (use pairwise, direct or hierarchical)");
  const bool hierarchical_all_reduce =
      kind == CollectiveKind::all_reduce && algorithm == CollectiveAlgorithm::hierarchical;
  if (!a2a && algorithm != CollectiveAlgorithm::ring && algorithm != CollectiveAlgorithm::torus_2d &&
      algorithm != CollectiveAlgorithm::multi_ring && !hierarchical_all_reduce)
    throw std::invalid_argument(std::string(to_string(kind)) + " supports only the ring, multi_ring and torus_2d algorithms" +
                                (kind == CollectiveKind::all_reduce ? " and hierarchical" : ""));
  if (n_ == 1) {
    steps_ = 0;
    return;
  }
  if (algorithm == CollectiveAlgorithm::torus_2d) {
    const int x_steps = block_ - 1, y_steps = n_ / block_ - 1;
    steps_ = kind == CollectiveKind::all_reduce ? 2 * (x_steps + y_steps) : x_steps + y_steps;
    return;
  }
  switch (kind) {
    case CollectiveKind::all_reduce:
      steps_ = algorithm == CollectiveAlgorithm::hierarchical ? 2 * (block_ - 1) + 2 * (n_ / block_ - 1) : 2 * (n_ - 1);
      break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather: steps_ = n_ - 1; break;
    case CollectiveKind::all_to_all:
      if (algorithm == CollectiveAlgorithm::direct) steps_ = 1;
      else if (algorithm == CollectiveAlgorithm::hierarchical) steps_ = (block_ - 1) + (n_ / block_ - 1);
      else steps_ = n_ - 1;
      break;
  }
}

bool CollectiveSchedule::torus_step_along_block(int k) const {
  const int x_steps = block_ - 1, y_steps = n_ / block_ - 1;
  switch (kind_) {
    case CollectiveKind::all_reduce: return k < x_steps || k >= x_steps + 2 * y_steps;
    case CollectiveKind::reduce_scatter: return k < x_steps;
    default: return k >= y_steps;  // all_gather: the other dimension first, the block's last
  }
}

// One step of the 2-D torus algorithm: half of the step's share goes to the next member of the
// ring (the + way round), half to the previous one (the - way); a ring of two sends it whole.
void CollectiveSchedule::torus_step(int m, int k, CollectiveStep& out) const {
  const int L = block_, D = n_ / L, b = m / L, j = m % L;
  const bool along_block = torus_step_along_block(k);
  const int ring = along_block ? L : D;
  const double share = along_block ? bytes_ / L : bytes_ / L / D;
  const int next = along_block ? b * L + (j + 1) % L : ((b + 1) % D) * L + j;
  const int prev = along_block ? b * L + (j + L - 1) % L : ((b + D - 1) % D) * L + j;
  if (ring == 2) {
    out.sends.push_back({next, share});
    out.recv_from.push_back(next);
    return;
  }
  out.sends.push_back({next, share / 2});
  out.sends.push_back({prev, share / 2});
  out.recv_from.push_back(prev);
  out.recv_from.push_back(next);
}

// One step of the multi-ring: the channels that stay in the block go to the next member of the
// block as one flow; the one channel that leaves it goes to the next offset of the next block.
void CollectiveSchedule::multi_ring_step(int m, CollectiveStep& out) const {
  const int L = block_, D = n_ / L, b = m / L, j = m % L;
  const double channel_chunk = bytes_ / n_ / L;
  const int inside_next = b * L + (j + 1) % L, inside_prev = b * L + (j + L - 1) % L;
  const int across_next = ((b + 1) % D) * L + (j + 1) % L, across_prev = ((b + D - 1) % D) * L + (j + L - 1) % L;
  if (across_next == inside_next) {  // one block: every channel stays inside it
    out.sends.push_back({inside_next, bytes_ / n_});
    out.recv_from.push_back(inside_prev);
    return;
  }
  if (L > 1) {
    out.sends.push_back({inside_next, channel_chunk * (L - 1)});
    out.recv_from.push_back(inside_prev);
  }
  out.sends.push_back({across_next, channel_chunk});
  out.recv_from.push_back(across_prev);
}

void CollectiveSchedule::step(int m, int k, CollectiveStep& out) const {
  out.sends.clear();
  out.recv_from.clear();
  const double chunk = bytes_ / n_;
  if (algorithm_ == CollectiveAlgorithm::torus_2d) {
    torus_step(m, k, out);
    return;
  }
  if (algorithm_ == CollectiveAlgorithm::multi_ring) {
    multi_ring_step(m, out);
    return;
  }
  if (kind_ == CollectiveKind::all_reduce && algorithm_ == CollectiveAlgorithm::hierarchical) {
    const int L = block_, D = n_ / L, b = m / L, j = m % L;
    if (k < L - 1 || k >= L - 1 + 2 * (D - 1)) {  // reduce-scatter, later all-gather, inside the block
      out.sends.push_back({b * L + (j + 1) % L, bytes_ / L});
      out.recv_from.push_back(b * L + (j + L - 1) % L);
    } else {  // ring all-reduce of the block's 1/L share among the same offset of every block
      out.sends.push_back({((b + 1) % D) * L + j, bytes_ / L / D});
      out.recv_from.push_back(((b + D - 1) % D) * L + j);
    }
    return;
  }
  if (kind_ != CollectiveKind::all_to_all) {  // ring: send to the next member, receive from the previous
    out.sends.push_back({(m + 1) % n_, chunk});
    out.recv_from.push_back((m + n_ - 1) % n_);
    return;
  }
  if (algorithm_ == CollectiveAlgorithm::hierarchical) {
    const int L = block_, D = n_ / L, b = m / L, j = m % L;
    if (k < L - 1) {  // inside the block: the D chunks bound for offset j + d of every block
      const int d = k + 1;
      out.sends.push_back({b * L + (j + d) % L, chunk * D});
      out.recv_from.push_back(b * L + (j + L - d) % L);
    } else {  // across blocks, same offset: the L chunks bound for block b + d
      const int d = k - (L - 1) + 1;
      out.sends.push_back({((b + d) % D) * L + j, chunk * L});
      out.recv_from.push_back(((b + D - d) % D) * L + j);
    }
    return;
  }
  if (algorithm_ == CollectiveAlgorithm::pairwise) {  // step k exchanges with distance k+1
    const int d = k + 1;
    out.sends.push_back({(m + d) % n_, chunk});
    out.recv_from.push_back((m + n_ - d) % n_);
    return;
  }
  for (int p = 0; p < n_; ++p)  // direct: every pair at once
    if (p != m) {
      out.sends.push_back({p, chunk});
      out.recv_from.push_back(p);
    }
}

int CollectiveSchedule::messages_per_member() const {
  if (n_ == 1) return 0;
  return kind_ == CollectiveKind::all_to_all && algorithm_ == CollectiveAlgorithm::direct ? n_ - 1 : steps_;
}

double CollectiveSchedule::alpha_beta_time_s(double alpha_s, double beta_Bps) const {
  if (n_ == 1) return 0;
  const double chunk = bytes_ / n_;
  if (kind_ == CollectiveKind::all_to_all && algorithm_ == CollectiveAlgorithm::direct)
    return alpha_s + (n_ - 1) * chunk / beta_Bps;  // the sender's link carries n-1 chunks at once
  if (algorithm_ == CollectiveAlgorithm::torus_2d) {
    const int L = block_, D = n_ / L;
    // a step's two halves travel on distinct links at once (a ring of two: one whole share)
    const double x_step = alpha_s + bytes_ / L / (L == 2 ? 1 : 2) / beta_Bps;
    const double y_step = alpha_s + bytes_ / L / D / (D == 2 ? 1 : 2) / beta_Bps;
    const int passes = kind_ == CollectiveKind::all_reduce ? 2 : 1;
    return passes * ((L - 1) * x_step + (D - 1) * y_step);
  }
  if (algorithm_ == CollectiveAlgorithm::multi_ring && block_ > 1 && block_ < n_) {
    // a step's two flows leave on distinct links at once: the larger, the L-1 channels kept in
    // the block, bounds it
    const int L = block_;
    return steps_ * (alpha_s + chunk / L * (L - 1) / beta_Bps);
  }
  if (kind_ == CollectiveKind::all_reduce && algorithm_ == CollectiveAlgorithm::hierarchical) {
    const int L = block_, D = n_ / L;
    return 2 * (L - 1) * (alpha_s + bytes_ / L / beta_Bps) + 2 * (D - 1) * (alpha_s + bytes_ / L / D / beta_Bps);
  }
  if (kind_ == CollectiveKind::all_to_all && algorithm_ == CollectiveAlgorithm::hierarchical) {
    const int L = block_, D = n_ / L;
    return (L - 1) * (alpha_s + D * chunk / beta_Bps) + (D - 1) * (alpha_s + L * chunk / beta_Bps);
  }
  return steps_ * (alpha_s + chunk / beta_Bps);
}

}  // namespace exasim
