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
  if (algorithm == CollectiveAlgorithm::hierarchical && (block_ < 1 || n_ % block_ != 0))
    throw std::invalid_argument(std::string("hierarchical ") + to_string(kind) + ": block size " + std::to_string(block_) +
                                " does not divide the group size " + std::to_string(n_));
  const bool hierarchical_all_reduce =
      kind == CollectiveKind::all_reduce && algorithm == CollectiveAlgorithm::hierarchical;
  if (!a2a && algorithm != CollectiveAlgorithm::ring && !hierarchical_all_reduce)
    throw std::invalid_argument(std::string(to_string(kind)) + " supports only the ring algorithm" +
                                (kind == CollectiveKind::all_reduce ? " and hierarchical" : ""));
  if (n_ == 1) {
    steps_ = 0;
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

void CollectiveSchedule::step(int m, int k, CollectiveStep& out) const {
  out.sends.clear();
  out.recv_from.clear();
  const double chunk = bytes_ / n_;
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
