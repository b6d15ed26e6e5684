#include "topologies/faults.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace exasim {

namespace {
// How many distinct values of key(device) the job's devices take.
template <class Key>
double distinct(const std::vector<int>& devices, Key key) {
  std::set<long long> seen;
  for (int d : devices) seen.insert(key(d));
  return static_cast<double>(seen.size());
}
}  // namespace

JobComponents job_components(const MachineSpec& m, const std::vector<int>& devices) {
  JobComponents c;
  const double n = distinct(devices, [](int d) { return d; });
  if (m.family == "sunway") {
    c.nodes = n;
    c.links = n;
    c.switches = distinct(devices, [&](int d) { return d / m.nodes_per_supernode; });
  } else if (m.family == "gpu_cluster") {
    const GpuClusterSpec& g = m.gpu;
    const auto node = [&](int d) { return d / g.gpus_per_node; };
    c.nodes = distinct(devices, node);
    c.links = c.nodes * g.nics_per_node();
    c.switches = distinct(devices, [&](int d) { return node(d) / g.nodes_per_leaf_group; }) *
                 (g.rail_optimized ? g.nics_per_node() : 1);
  } else if (m.family == "torus") {
    c.nodes = n;
    c.links = 2 * n;
  } else {
    throw std::invalid_argument("machine " + m.name + ": unknown family '" + m.family + "'");
  }
  return c;
}

std::vector<int> draw_fraction(std::vector<int> pool, double fraction, std::uint64_t seed) {
  const size_t n = pool.size();
  const size_t k = std::min(n, static_cast<size_t>(std::llround(fraction * static_cast<double>(n))));
  std::mt19937_64 gen(seed);
  for (size_t i = 0; i < k; ++i) {
    const size_t j = i + static_cast<size_t>(gen() % (n - i));  // the bias is below 2^-40 for any pool
    std::swap(pool[i], pool[j]);
  }
  pool.resize(k);
  std::sort(pool.begin(), pool.end());
  return pool;
}

void FaultyNetwork::scale_bandwidth(int kind, int instance, double factor) {
  if (!(factor > 0)) throw std::invalid_argument("a link's bandwidth factor must be positive");
  auto [it, fresh] = factor_.try_emplace({kind, instance}, 1.0);
  (void)fresh;
  it->second *= factor;
}

void FaultyNetwork::slow_compute(int node, double factor) {
  if (!(factor > 0)) throw std::invalid_argument("a node's compute factor must be positive");
  auto [it, fresh] = compute_.try_emplace(node, 1.0);
  (void)fresh;
  it->second *= factor;
}

double FaultyNetwork::compute_factor(int node) const {
  auto it = compute_.find(node);
  return (it == compute_.end() ? 1.0 : it->second) * base_.compute_factor(node);
}

double FaultyNetwork::bandwidth_factor(int kind, int instance) const {
  auto it = factor_.find({kind, instance});
  return it == factor_.end() ? base_.bandwidth_factor(kind, instance) : it->second * base_.bandwidth_factor(kind, instance);
}

std::vector<int> job_nodes(const Workload& w) {
  std::vector<int> nodes = w.node_of_rank;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

AppliedStragglers apply_stragglers(const StragglerSpec& s, std::uint64_t seed, Workload& w, FaultyNetwork& net) {
  const std::vector<int> pool = job_nodes(w);
  AppliedStragglers a;
  if (s.nodes.empty()) {
    a.nodes = draw_fraction(pool, s.fraction, seed);
  } else {
    a.nodes = s.nodes;
    std::sort(a.nodes.begin(), a.nodes.end());
    a.nodes.erase(std::unique(a.nodes.begin(), a.nodes.end()), a.nodes.end());
    for (int n : a.nodes)
      if (!std::binary_search(pool.begin(), pool.end(), n))
        throw FaultError("/stragglers/nodes", "expected nodes of the job: node " + std::to_string(n) + " is not one of the job's " +
                                    std::to_string(pool.size()) + " network nodes (0 .. " +
                                    std::to_string(pool.empty() ? -1 : pool.back()) + ")");
  }
  const std::set<int> slow(a.nodes.begin(), a.nodes.end());
  for (int r = 0; r < w.rank_count; ++r) a.ranks += static_cast<int>(slow.count(w.node_of_rank[r]));
  const auto& kinds = net.link_kinds();
  for (int n : a.nodes) {
    if (s.compute_factor != 1) net.slow_compute(n, s.compute_factor);
    if (s.link_factor != 1)
      for (size_t k = 0; k < kinds.size(); ++k)
        if (kinds[k].node_private) net.scale_bandwidth(static_cast<int>(k), n, 1 / s.link_factor);
  }
  return a;
}

namespace {
// A rank's own slowness: its node's compute factor and the bandwidth factors of the links it
// uses (its own, and its domain's of each shared kind).
std::vector<double> slowness(const Workload& w, const Network& net, int r) {
  const int node = w.node_of_rank[r];
  std::vector<double> key{net.compute_factor(node)};
  for (size_t k = 0; k < net.link_kinds().size(); ++k)
    key.push_back(net.bandwidth_factor(static_cast<int>(k), net.domain_of(static_cast<int>(k), node)));
  return key;
}

bool slowed(const std::vector<double>& key) {
  return std::any_of(key.begin(), key.end(), [](double f) { return f != 1; });
}

// Per rank: whether it is slowed; per role and rank: whether its group holds a slowed rank.
std::vector<char> slowed_ranks(const Workload& w, const Network& net) {
  std::vector<char> out(w.rank_count);
  for (int r = 0; r < w.rank_count; ++r) out[r] = slowed(slowness(w, net, r));
  return out;
}

bool group_touched(const std::vector<int>& members, const std::vector<char>& slow) {
  return std::any_of(members.begin(), members.end(), [&](int m) { return slow[m] != 0; });
}
}  // namespace

int split_classes_by_faults(Workload& w, const Network& net) {
  std::vector<std::vector<double>> own(w.rank_count);
  std::vector<char> slow(w.rank_count, 0);
  for (int r = 0; r < w.rank_count; ++r) {
    own[r] = slowness(w, net, r);
    slow[r] = slowed(own[r]);
  }
  std::vector<std::vector<char>> touched(w.rank_count);  // per rank, per role: its group holds a slowed rank
  for (const auto& [role, table] : w.groups) {
    (void)role;
    for (int r = 0; r < w.rank_count; ++r) touched[r].push_back(0);
    for (const auto& members : table.members)
      if (group_touched(members, slow))
        for (int m : members) touched[m].back() = 1;
  }
  std::map<std::tuple<int, std::vector<double>, std::vector<char>>, int> id;
  for (int r = 0; r < w.rank_count; ++r) {
    auto key = std::make_tuple(w.class_of_rank.at(r), std::move(own[r]), std::move(touched[r]));
    auto it = id.find(key);
    if (it == id.end()) it = id.emplace(std::move(key), static_cast<int>(id.size())).first;
    w.class_of_rank[r] = it->second;
  }
  return static_cast<int>(id.size());
}

std::vector<std::string> roles_touched_by_faults(const Workload& w, const Network& net) {
  const std::vector<char> slow = slowed_ranks(w, net);
  std::vector<std::string> roles;
  for (const auto& [role, table] : w.groups)
    if (std::any_of(table.members.begin(), table.members.end(),
                    [&](const std::vector<int>& m) { return m.size() > 1 && group_touched(m, slow); }))
      roles.push_back(role);
  return roles;
}

namespace {
// The instances of link kind k that the given nodes use, increasing.
std::vector<int> instances_used(const Network& net, int k, const std::vector<int>& nodes) {
  std::set<int> s;
  for (int n : nodes) s.insert(net.domain_of(k, n));
  return {s.begin(), s.end()};
}

std::vector<int> all_nodes(const Network& net) {
  std::vector<int> v(static_cast<size_t>(net.node_count()));
  for (int n = 0; n < net.node_count(); ++n) v[n] = n;
  return v;
}

int kind_named(const Network& net, const std::string& name, int index) {
  const auto& kinds = net.link_kinds();
  std::string names;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].name == name) return static_cast<int>(k);
    names += (k ? ", " : "") + kinds[k].name;
  }
  throw FaultError("/links/" + std::to_string(index) + "/kind", "expected a link kind of the machine's network (one of: " + names + "), got \"" + name + "\"");
}
}  // namespace

std::vector<AppliedLinkFaults> apply_link_faults(const std::vector<LinkFaultSpec>& links, std::uint64_t seed,
                                                 const Workload& w, FaultyNetwork& net) {
  std::vector<AppliedLinkFaults> out;
  const std::vector<int> job = job_nodes(w);
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkFaultSpec& f = links[i];
    const int k = kind_named(net, f.kind, static_cast<int>(i));
    AppliedLinkFaults a{f.kind, {}, f.bandwidth_factor};
    if (f.instances.empty()) {
      // each entry draws with its own stream: seed + entry index
      a.instances = draw_fraction(instances_used(net, k, job), f.fraction, seed + i + 1);
    } else {
      const std::vector<int> exist = instances_used(net, k, all_nodes(net));
      for (int x : f.instances)
        if (!std::binary_search(exist.begin(), exist.end(), x))
          throw FaultError("/links/" + std::to_string(i) + "/instances",
                           "expected links of kind " + f.kind + " that exist (" + std::to_string(exist.size()) +
                               " instances, 0 .. " + std::to_string(exist.empty() ? -1 : exist.back()) + "), got " +
                               std::to_string(x));
      a.instances = f.instances;
      std::sort(a.instances.begin(), a.instances.end());
    }
    for (int x : a.instances) net.scale_bandwidth(k, x, f.bandwidth_factor);
    out.push_back(std::move(a));
  }
  return out;
}

namespace {
// How a family replaces a failed node: `unit` consecutive network nodes go together (a GPU
// node's GPUs), units of one spare domain replace each other.
struct SpareRule {
  int unit = 1;
  int units_per_domain = 1;
  int domains = 0;
};

SpareRule spare_rule(const MachineSpec& m) {
  if (m.family == "sunway") return {1, m.nodes_per_supernode, m.supernodes};
  if (m.family == "gpu_cluster")
    return {m.gpu.gpus_per_node, m.gpu.nodes_per_leaf_group, m.gpu.nodes / m.gpu.nodes_per_leaf_group};
  throw FaultError("/failed_nodes", "expected no failed nodes on a " + m.family +
                               " machine: a failed chip needs routes around it, which are not modelled yet");
}
}  // namespace

AppliedNodeFaults apply_node_faults(const NodeFaultSpec& s, std::uint64_t seed, const MachineSpec& m, Workload& w) {
  const SpareRule rule = spare_rule(m);
  const std::vector<int> job = job_nodes(w);
  std::vector<int> failed = s.nodes.empty() ? draw_fraction(job, s.fraction, seed ^ 0x5eedf00dULL) : s.nodes;
  std::sort(failed.begin(), failed.end());
  for (int n : failed)
    if (!std::binary_search(job.begin(), job.end(), n))
      throw FaultError("/failed_nodes/nodes", "expected nodes of the job: node " + std::to_string(n) + " is not one of its " +
                                        std::to_string(job.size()) + " network nodes");
  std::set<int> failed_units, used_units;
  for (int n : failed) failed_units.insert(n / rule.unit);
  for (int n : job) used_units.insert(n / rule.unit);
  std::map<int, int> spare_of_unit;  // failed unit -> its spare
  std::map<int, int> next_free;      // domain -> next unit to try
  std::map<int, int> taken;          // domain -> spares taken
  for (int u : failed_units) {
    const int d = u / rule.units_per_domain, end = (d + 1) * rule.units_per_domain;
    int& c = next_free.try_emplace(d, d * rule.units_per_domain).first->second;
    while (c < end && used_units.count(c)) ++c;
    if (c >= end || ++taken[d] > s.spares)
      throw FaultError("/failed_nodes/spares", "expected at most " + std::to_string(s.spares) + " failed units in spare domain " +
                                         std::to_string(d) + " (its spares), and an unused unit there for each: " +
                                         "more failures than spares");
    spare_of_unit[u] = c++;
  }
  AppliedNodeFaults a;
  a.failed = failed;
  for (int n : failed) a.replaced.push_back(spare_of_unit.at(n / rule.unit) * rule.unit + n % rule.unit);
  for (int& n : w.node_of_rank) {
    auto it = spare_of_unit.find(n / rule.unit);
    if (it != spare_of_unit.end()) n = it->second * rule.unit + n % rule.unit;
  }
  return a;
}

AppliedFaults apply_faults(const FaultSpec& f, const MachineSpec& m, Workload& w, FaultyNetwork& net) {
  AppliedFaults a;
  if (f.has_failed_nodes) a.nodes = apply_node_faults(f.failed_nodes, f.seed, m, w);
  a.links = apply_link_faults(f.links, f.seed, w, net);
  if (f.has_stragglers) a.stragglers = apply_stragglers(f.stragglers, f.seed, w, net);
  a.classes = split_classes_by_faults(w, net);
  a.slowed_roles = roles_touched_by_faults(w, net);
  return a;
}

}  // namespace exasim
