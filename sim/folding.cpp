#include "sim/folding.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

namespace exasim {

const char* to_string(Fidelity f) { return f == Fidelity::folded ? "folded" : "exhaustive"; }

int folding_class(const Workload& w, int rank) { return w.class_of_rank.at(rank); }

int Folding::slot_standing_for(const Workload& w, int rank) const {
  return fidelity == Fidelity::exhaustive ? rank_slot.at(rank) : slot_of_class.at(folding_class(w, rank));
}

int FoldedDomain::weight(int slot, double foreign_ranks) const {
  if (!weighted) return 1;
  auto it = ranks_of_slot.find(slot);
  const double n = it != ranks_of_slot.end() ? it->second : foreign_ranks;
  const long w = std::lround(n / per);
  return static_cast<int>(std::clamp(w, 1L, static_cast<long>(kMaxFoldedWeight)));
}

namespace {

void choose_representatives(const Workload& w, Folding& f) {
  std::map<int, int> rep_of_class;  // class -> slot
  for (int r = 0; r < w.rank_count; ++r) {
    const int c = folding_class(w, r);
    auto it = rep_of_class.find(c);
    if (it == rep_of_class.end()) {
      rep_of_class[c] = static_cast<int>(f.slot_rank.size());
      f.rank_slot[r] = static_cast<int>(f.slot_rank.size());
      f.slot_rank.push_back(r);
      f.multiplicity.push_back(1);
      continue;
    }
    const int rep = f.slot_rank[it->second];
    if (w.program_index(r) != w.program_index(rep))
      throw std::runtime_error("folded fidelity: ranks " + std::to_string(rep) + " and " + std::to_string(r) +
                               " of class " + std::to_string(c) + " run different programs (" +
                               std::to_string(w.program_index(rep)) + " and " + std::to_string(w.program_index(r)) +
                               "); a class must not mix programs (give them different classes, or use "
                               "--fidelity exhaustive)");
    f.multiplicity[it->second]++;
  }
  f.slot_of_class.insert(rep_of_class.begin(), rep_of_class.end());
}

// The capacity divisor and each class's weight in a domain holding `byclass` (class -> ranks).
std::pair<int, std::vector<std::pair<int, int>>> domain_weights(const std::map<int, int>& byclass) {
  int g = 0, largest = 0;
  for (auto& [cls, n] : byclass) {
    g = std::gcd(g, n);
    largest = std::max(largest, n);
  }
  const int per = largest / g <= kMaxFoldedWeight ? g : (largest + kMaxFoldedWeight - 1) / kMaxFoldedWeight;
  std::vector<std::pair<int, int>> weights;
  for (auto& [cls, n] : byclass)
    weights.emplace_back(cls, std::max(1, static_cast<int>(std::lround(static_cast<double>(n) / per))));
  return {per, std::move(weights)};
}

// A weighted domain's divisor once the classes it does not hold are counted: their flows into it
// stand for a share of one real domain (their ranks over the domains folded there, often under
// one rank), so the divisor drops to the smallest such share, but not below the largest class
// here over kMaxFoldedWeight.
double foreign_divisor(const Folding& f, const FoldedDomain& d) {
  if (!d.weighted) return d.per;
  int largest = 0;
  for (auto& [slot, n] : d.ranks_of_slot) largest = std::max(largest, n);
  double smallest = d.per;
  for (size_t slot = 0; slot < f.multiplicity.size(); ++slot)
    if (!d.ranks_of_slot.count(static_cast<int>(slot)))
      smallest = std::min(smallest, static_cast<double>(f.multiplicity[slot]) / d.domains);
  return std::max(smallest, static_cast<double>(largest) / kMaxFoldedWeight);
}

// See the top of folding.hpp.
void fold_shared_links(const Workload& w, const Network& net, Folding& f) {
  const auto& kinds = net.link_kinds();
  f.domain.assign(kinds.size(), {});
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].node_private) continue;
    std::map<int, std::map<int, int>> hist;  // domain -> class -> count
    for (int r = 0; r < w.rank_count; ++r)
      hist[net.domain_of(static_cast<int>(k), w.node_of_rank[r])][folding_class(w, r)]++;
    // (class weights, capacity divisor, bandwidth factor) -> folded link
    std::map<std::tuple<std::vector<std::pair<int, int>>, int, double>, int> instance_of;
    for (auto& [dom, byclass] : hist) {
      auto [per, weights] = domain_weights(byclass);
      FoldedDomain d;
      d.per = per;
      d.bandwidth_factor = net.bandwidth_factor(static_cast<int>(k), dom);
      for (auto& [cls, wt] : weights) d.weighted = d.weighted || wt != 1;
      for (auto& [cls, n] : byclass) d.ranks_of_slot[f.slot_of_class.at(cls)] = n;
      auto key = std::make_tuple(std::move(weights), per, d.bandwidth_factor);
      auto it = instance_of.find(key);
      if (it == instance_of.end()) it = instance_of.emplace(key, static_cast<int>(instance_of.size())).first;
      d.instance = it->second;
      f.domain[k][dom] = std::move(d);
    }
    std::vector<int> domains_of_instance(instance_of.size(), 0);
    for (auto& [dom, d] : f.domain[k]) domains_of_instance[d.instance]++;
    std::vector<double> per_of_instance(instance_of.size(), 0);
    for (auto& [dom, d] : f.domain[k]) {
      d.domains = domains_of_instance[d.instance];
      double& per = per_of_instance[d.instance];
      if (per == 0) per = foreign_divisor(f, d);
      d.per = per;
    }
  }
}

}  // namespace

Folding fold_ranks(const Workload& w, const Network& net, Fidelity fid) {
  Folding f;
  f.fidelity = fid;
  f.rank_slot.assign(w.rank_count, -1);
  if (fid == Fidelity::exhaustive) {
    for (int r = 0; r < w.rank_count; ++r) {
      f.rank_slot[r] = r;
      f.slot_rank.push_back(r);
      f.multiplicity.push_back(1);
    }
    return f;
  }
  choose_representatives(w, f);
  fold_shared_links(w, net, f);
  return f;
}

}  // namespace exasim
