#include "sim/collectives.hpp"

#include <algorithm>
#include <string>

namespace exasim {

namespace {

// The kind/algorithm pairs that exist (std::invalid_argument otherwise).
void check_algorithm(CollectiveKind kind, CollectiveAlgorithm algorithm, int n, int block) {
  using A = CollectiveAlgorithm;
  const bool a2a = kind == CollectiveKind::all_to_all;
  const bool blocked =
      algorithm == A::hierarchical || algorithm == A::torus_2d || algorithm == A::multi_ring || algorithm == A::tree;
  if (blocked && (block < 1 || n % block != 0))
    throw std::invalid_argument(std::string(to_string(algorithm)) + " " + to_string(kind) + ": block size " +
                                std::to_string(block) + " does not divide the group size " + std::to_string(n));
  if (a2a) {
    if (algorithm != A::pairwise && algorithm != A::direct && algorithm != A::hierarchical)
      throw std::invalid_argument(std::string("all_to_all has no ") + to_string(algorithm) +
                                  " algorithm (use pairwise, direct or hierarchical)");
    return;
  }
  const bool any = algorithm == A::ring || algorithm == A::torus_2d || algorithm == A::multi_ring;
  bool ok = any;
  switch (kind) {
    case CollectiveKind::all_reduce:
      ok = any || algorithm == A::hierarchical || algorithm == A::rabenseifner || algorithm == A::recursive_doubling ||
           algorithm == A::tree || algorithm == A::nvls;
      break;
    case CollectiveKind::reduce_scatter:
      ok = any || algorithm == A::rabenseifner || algorithm == A::pairwise || algorithm == A::nvls;
      break;
    case CollectiveKind::all_gather: ok = any || algorithm == A::recursive_doubling || algorithm == A::nvls; break;
    case CollectiveKind::all_to_all: break;
  }
  if (!ok)
    throw std::invalid_argument(std::string(to_string(kind)) + " has no " + to_string(algorithm) + " algorithm");
  if (kind == CollectiveKind::all_gather && algorithm == A::recursive_doubling && (n & (n - 1)) != 0)
    throw std::invalid_argument("recursive_doubling all_gather needs a power-of-two group (MPICH runs it only there), got " +
                                std::to_string(n));
}

}  // namespace

CollectiveSchedule::CollectiveSchedule(CollectiveKind kind, CollectiveAlgorithm algorithm, int group_size,
                                       double bytes, int block_size, int chunks)
    : kind_(kind), algorithm_(algorithm), n_(group_size), bytes_(bytes), block_(block_size), chunks_(chunks) {
  if (group_size < 1) throw std::invalid_argument("collective group size must be at least 1");
  if (bytes < 0) throw std::invalid_argument("collective bytes must not be negative");
  check_algorithm(kind, algorithm, group_size, block_size);
  if (algorithm == CollectiveAlgorithm::tree) {
    if (chunks < 1) throw std::invalid_argument("tree all_reduce: chunks must be at least 1");
    if (n_ > 1) build_trees();
    return;
  }
  if (halving_doubling()) {
    while (pof2_ * 2 <= n_) pof2_ *= 2, log2_++;
    rem_ = n_ - pof2_;
  }
  if (n_ == 1) {
    steps_ = 0;
    return;
  }
  if (algorithm == CollectiveAlgorithm::nvls) {
    steps_ = 1;
    return;
  }
  if (algorithm == CollectiveAlgorithm::torus_2d) {
    const int x_steps = block_ - 1, y_steps = n_ / block_ - 1;
    steps_ = kind == CollectiveKind::all_reduce ? 2 * (x_steps + y_steps) : x_steps + y_steps;
    return;
  }
  if (halving_doubling()) {
    const bool two_passes = kind == CollectiveKind::all_reduce && algorithm == CollectiveAlgorithm::rabenseifner;
    steps_ = (two_passes ? 2 : 1) * log2_ + (rem_ > 0 ? 2 : 0);
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

void CollectiveSchedule::sends(int m, int k, std::vector<CollectiveStep::Send>& out) const {
  if (algorithm_ == CollectiveAlgorithm::tree) return tree_sends(m, k, out);
  thread_local CollectiveStep st;
  step(m, k, st);
  out = st.sends;
}

void CollectiveSchedule::step(int m, int k, CollectiveStep& out) const {
  out.sends.clear();
  out.recv_from.clear();
  if (algorithm_ == CollectiveAlgorithm::tree) {
    tree_step(m, k, out);
    return;
  }
  const double chunk = bytes_ / n_;
  if (algorithm_ == CollectiveAlgorithm::torus_2d) {
    torus_step(m, k, out);
    return;
  }
  if (algorithm_ == CollectiveAlgorithm::multi_ring) {
    multi_ring_step(m, out);
    return;
  }
  if (algorithm_ == CollectiveAlgorithm::nvls) {  // the switch's link loads as flows to every other member
    for (int p = 0; p < n_; ++p)
      if (p != m) {
        out.sends.push_back({p, nvls_flow_bytes()});
        out.recv_from.push_back(p);
      }
    return;
  }
  if (halving_doubling()) {
    halving_doubling_step(m, k, false, out);
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
  if (kind_ != CollectiveKind::all_to_all && algorithm_ != CollectiveAlgorithm::pairwise) {  // ring: to the next member
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

int CollectiveSchedule::new_rank(int m) const {
  if (m >= 2 * rem_) return m - rem_;
  return m % 2 == 1 ? m / 2 : -1;
}

int CollectiveSchedule::real_member(int r) const { return r < rem_ ? 2 * r + 1 : r + rem_; }

std::pair<int, double> CollectiveSchedule::main_step(int j) const {
  if (algorithm_ == CollectiveAlgorithm::recursive_doubling) {
    if (kind_ == CollectiveKind::all_reduce) return {1 << j, bytes_};
    return {1 << j, bytes_ * (1 << j) / n_};  // all-gather: the 2^j chunks gathered so far
  }
  if (kind_ == CollectiveKind::reduce_scatter) return {(pof2_ / 2) >> j, bytes_ / (2 << j)};
  if (j < log2_) return {1 << j, bytes_ / (2 << j)};  // all-reduce: recursive halving
  const int i = j - log2_;                             // then recursive doubling
  return {(pof2_ / 2) >> i, bytes_ * (1 << i) / pof2_};
}

double CollectiveSchedule::pair_step_bytes(int k) const {
  if (k == 0 || kind_ == CollectiveKind::all_reduce) return bytes_;
  return bytes_ / n_;  // reduce-scatter's post-step: the sitting member's chunk
}

// Halving and doubling (see collectives.hpp): MPICH's pre-step (k = 0) and post-step (the last)
// off a power of two, the new ranks' steps between.
void CollectiveSchedule::halving_doubling_step(int m, int k, bool critical, CollectiveStep& out) const {
  const int pre = rem_ > 0 ? 1 : 0;
  if (pre && (k == 0 || k == steps_ - 1)) {
    if (critical) {
      const int partner = (m ^ 1) < n_ ? m ^ 1 : m - 1;
      out.sends.push_back({partner, pair_step_bytes(k)});
      out.recv_from.push_back(partner);
      return;
    }
    if (m >= 2 * rem_) return;  // idle
    const bool even = m % 2 == 0, sends = (k == 0) == even;  // pre: even to odd; post: odd to even
    const int partner = even ? m + 1 : m - 1;
    if (sends) out.sends.push_back({partner, pair_step_bytes(k)});
    else out.recv_from.push_back(partner);
    return;
  }
  int r = new_rank(m);
  if (r < 0 && !critical) return;  // sits out until the post-step
  if (r < 0) r = new_rank(m + 1);  // critical path: its partner's steps
  const auto [mask, bytes] = main_step(k - pre);
  const int peer = real_member(r ^ mask);
  out.sends.push_back({peer, bytes});
  out.recv_from.push_back(peer);
}

void CollectiveSchedule::critical_step(int m, int k, CollectiveStep& out) const {
  if (!halving_doubling() || rem_ == 0) {
    step(m, k, out);
    return;
  }
  out.sends.clear();
  out.recv_from.clear();
  halving_doubling_step(m, k, true, out);
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
  if (algorithm_ == CollectiveAlgorithm::nvls)  // each link carries B (n+1)/n (all-reduce) or B at once
    return alpha_s + (n_ - 1) * nvls_flow_bytes() / beta_Bps;
  if (algorithm_ == CollectiveAlgorithm::torus_2d) {
    const int L = block_, D = n_ / L;
    // a step's two halves travel on distinct links at once (a ring of two: one whole share)
    const double x_step = alpha_s + bytes_ / L / (L == 2 ? 1 : 2) / beta_Bps;
    const double y_step = alpha_s + bytes_ / L / D / (D == 2 ? 1 : 2) / beta_Bps;
    const int passes = kind_ == CollectiveKind::all_reduce ? 2 : 1;
    return passes * ((L - 1) * x_step + (D - 1) * y_step);
  }
  if (algorithm_ == CollectiveAlgorithm::tree)  // a step's flows leave on distinct links at once: the larger bounds it
    return steps_ * (alpha_s + std::max(tree_within_node_flow_bytes(), tree_between_nodes_flow_bytes()) / beta_Bps);
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
  if (halving_doubling()) {  // the critical path: one message a step (any member's: the bytes are alike)
    double t = 0;
    CollectiveStep st;
    for (int k = 0; k < steps_; ++k) {
      critical_step(0, k, st);
      t += alpha_s + st.sends.at(0).bytes / beta_Bps;
    }
    return t;
  }
  return steps_ * (alpha_s + chunk / beta_Bps);
}

// --- NCCL's double binary tree

// ncclGetBtree's parent of node r among D (NCCL 2.7.5 src/graph/trees.cc): with `bit` the lowest set
// bit of r, (r ^ bit) | (bit << 1), or r ^ bit where that is out of range; node 0 is the root.
static int btree_parent(int r, int D) {
  if (r == 0) return -1;
  int bit = 1;
  while (!(bit & r)) bit <<= 1;
  const int up = (r ^ bit) | (bit << 1);
  return up < D ? up : r ^ bit;
}

// The two trees over the nodes (ncclGetDtree: the second mirrors the first for an even D, shifts it
// by one for an odd D), their heights and depths, and the channel tree's height.
void CollectiveSchedule::build_trees() {
  const int L = block_, D = n_ / L;
  for (int t = 0; t < 2; ++t) {
    NodeTree& nt = tree_[t];
    nt.parent.assign(D, -1);
    nt.children.assign(D, {});
    nt.height.assign(D, 0);
    nt.depth.assign(D, 0);
    for (int r = 0; r < D; ++r) {
      int p = btree_parent(r, D);
      if (t == 1 && D % 2 == 0) p = btree_parent(D - 1 - r, D), p = p < 0 ? -1 : D - 1 - p;
      if (t == 1 && D % 2 == 1) p = btree_parent((r - 1 + D) % D, D), p = p < 0 ? -1 : (p + 1) % D;
      nt.parent[r] = p;
      if (p >= 0) nt.children[p].push_back(r);
    }
    for (int r = 0; r < D; ++r)  // walk up from each node: depths, and heights by the longest way up
      for (int x = r, h = 0; x >= 0; x = nt.parent[x], ++h) {
        nt.height[x] = std::max(nt.height[x], h);
        if (nt.parent[x] >= 0) nt.depth[r]++;
      }
    for (int r = 0; r < D; ++r)
      if (nt.parent[r] < 0) tree_height_ = std::max(tree_height_, L - 1 + nt.height[r]);
  }
  steps_ = 2 * (chunks_ + tree_height_ - 1);
}

// Member m's sends in step k, one per peer (the chunks of every channel it passes on to that peer).
void CollectiveSchedule::tree_sends(int m, int k, std::vector<CollectiveStep::Send>& out) const {
  out.clear();
  const int L = block_, b = m / L, j = m % L;
  const int reduce_steps = chunks_ + tree_height_ - 1;
  const double chunk = tree_chunk_bytes();
  auto add = [&](int peer) {
    for (auto& s : out)
      if (s.peer == peer) {
        s.bytes += chunk;
        return;
      }
    out.push_back({peer, chunk});
  };
  for (int c = 0; c < 2 * L; ++c) {
    const NodeTree& nt = tree_[c / L];
    const int head = c % L, pos = (j - head + L) % L;
    if (k < reduce_steps) {  // reduce: chunk k - height to the parent
      const int i = k - (pos > 0 ? L - 1 - pos : L - 1 + nt.height[b]);
      if (i < 0 || i >= chunks_) continue;
      if (pos > 0) add(b * L + (j - 1 + L) % L);
      else if (nt.parent[b] >= 0) add(nt.parent[b] * L + head);
      continue;
    }
    const int i = k - reduce_steps - (pos + nt.depth[b]);  // broadcast: chunk i to the children
    if (i < 0 || i >= chunks_) continue;
    if (pos < L - 1) add(b * L + (j + 1) % L);
    if (pos == 0)
      for (int child : nt.children[b]) add(child * L + head);
  }
}

// Member m's step k: its sends, and one receive from each neighbour whose step-k sends reach it.
void CollectiveSchedule::tree_step(int m, int k, CollectiveStep& out) const {
  const int L = block_, b = m / L, j = m % L;
  tree_sends(m, k, out.sends);
  std::vector<int> candidates;
  auto consider = [&](int x) {
    if (x != m && std::find(candidates.begin(), candidates.end(), x) == candidates.end()) candidates.push_back(x);
  };
  consider(b * L + (j + 1) % L);
  consider(b * L + (j - 1 + L) % L);
  for (const NodeTree& nt : tree_) {
    if (nt.parent[b] >= 0) consider(nt.parent[b] * L + j);
    for (int child : nt.children[b]) consider(child * L + j);
  }
  std::vector<CollectiveStep::Send> theirs;
  for (int x : candidates) {
    tree_sends(x, k, theirs);
    for (const auto& s : theirs)
      if (s.peer == m) out.recv_from.push_back(x);
  }
}

std::vector<double> CollectiveSchedule::tree_lockstep_end_s(const std::function<double(int, int, double)>& flow_s) const {
  std::vector<double> end(n_, 0.0), next, egress(n_), ingress(n_);
  std::vector<std::vector<CollectiveStep::Send>> sends(n_);
  const int L = block_;
  for (int k = 0; k < steps_; ++k) {
    std::fill(egress.begin(), egress.end(), 0.0);
    std::fill(ingress.begin(), ingress.end(), 0.0);
    for (int m = 0; m < n_; ++m) {
      tree_sends(m, k, sends[m]);
      for (const auto& snd : sends[m])
        if (snd.peer / L != m / L) egress[m] += snd.bytes, ingress[snd.peer] += snd.bytes;
    }
    next = end;
    for (int m = 0; m < n_; ++m)
      for (const auto& snd : sends[m]) {
        const bool across = snd.peer / L != m / L;
        const double t = end[m] + flow_s(m, snd.peer, across ? std::max(egress[m], ingress[snd.peer]) : snd.bytes);
        next[m] = std::max(next[m], t);
        next[snd.peer] = std::max(next[snd.peer], t);
      }
    end.swap(next);
  }
  return end;
}

double CollectiveSchedule::tree_within_node_flow_bytes() const {
  return algorithm_ == CollectiveAlgorithm::tree && n_ > 1 ? (2 * block_ - 2) * tree_chunk_bytes() : 0;
}

double CollectiveSchedule::tree_between_nodes_flow_bytes() const {
  return algorithm_ == CollectiveAlgorithm::tree && n_ > block_ ? 2 * tree_chunk_bytes() : 0;
}

}  // namespace exasim
