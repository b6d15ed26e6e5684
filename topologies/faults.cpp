#include "topologies/faults.hpp"

#include "topologies/fat_tree.hpp"
#include "topologies/torus.hpp"

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
  // a node whose routes failures may change: -(node + 1), a class of its own (and slowed); else 1
  const auto* faulty = dynamic_cast<const FaultyNetwork*>(&net);
  key.push_back(faulty && faulty->rerouted(node) ? -(node + 1.0) : 1.0);
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

namespace {
// For a rank in a domain whose shared link is degraded (a leaf's up-links with cables down): for
// each group role, whether its ring neighbours (members m + 1, m - 1) and its block neighbours
// (m + L, m - L: a multi-ring channel's peers in the next and previous node) lie in another
// domain of that kind, i.e. whether its flows cross the degraded link. A class then mixes no
// ranks that cross with ranks that do not, so its representative crosses when its members do
// (without it a data-parallel ring over a leaf with 14 of 16 up-links down was 0.0085 s folded
// against 0.0168 s exhaustive; with it the same). Empty when the rank's domains are all at full
// bandwidth, and in workloads with all-to-alls (`exchanges` not empty): there the degraded
// domain's unequal classes make its folded links weighted, whose per-class weights count every
// member of an exchanging class as crossing at once (folding.hpp), and the split measured worse
// (the Sunway uplink case of tests/unit/folding_test.cpp: +10.9 % to +21.1 %).
std::vector<char> crossings(const Workload& w, const Network& net, const std::set<std::string>& exchanges, int r) {
  std::vector<char> key;
  const int node = w.node_of_rank[r];
  const auto& kinds = net.link_kinds();
  for (size_t k = 0; k < kinds.size(); ++k) {
    const int kind = static_cast<int>(k), domain = net.domain_of(kind, node);
    if (kinds[k].node_private || net.bandwidth_factor(kind, domain) == 1 || !exchanges.empty()) continue;
    for (const auto& [role, table] : w.groups) {
      (void)role;
      const int g = table.group_of_rank.empty() ? -1 : table.group_of_rank[r];
      if (g < 0) continue;
      const std::vector<int>& members = table.members[g];
      const int n = static_cast<int>(members.size()), m = table.index_in_group[r], L = table.block_size;
      for (int d : {1, n - 1, L, n - L}) {
        const int peer = members[((m + d) % n + n) % n];
        key.push_back(static_cast<char>(net.domain_of(kind, w.node_of_rank[peer]) != domain));
      }
    }
  }
  return key;
}

// The group roles of the workload's all-to-alls.
std::set<std::string> exchange_roles(const Workload& w) {
  std::set<std::string> roles;
  for (const StepGraph& g : w.programs)
    for (OpId v = 0; v < boost::num_vertices(g); ++v)
      if (const auto* c = std::get_if<CollectiveWork>(&g[v].work))
        if (c->kind == CollectiveKind::all_to_all) roles.insert(c->group_role);
  return roles;
}
}  // namespace

int split_classes_by_faults(Workload& w, const Network& net) {
  const std::set<std::string> exchanges = exchange_roles(w);
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
  std::map<std::tuple<int, std::vector<double>, std::vector<char>, std::vector<char>>, int> id;
  for (int r = 0; r < w.rank_count; ++r) {
    auto key = std::make_tuple(w.class_of_rank.at(r), std::move(own[r]), std::move(touched[r]), crossings(w, net, exchanges, r));
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

int kind_named(const Network& net, const std::string& name, const std::string& path) {
  const auto& kinds = net.link_kinds();
  std::string names;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].name == name) return static_cast<int>(k);
    names += (k ? ", " : "") + kinds[k].name;
  }
  throw FaultError(path, "expected a link kind of the machine's network (one of: " + names + "), got \"" + name + "\"");
}
}  // namespace

std::vector<AppliedLinkFaults> apply_link_faults(const std::vector<LinkFaultSpec>& links, std::uint64_t seed,
                                                 const Workload& w, FaultyNetwork& net) {
  std::vector<AppliedLinkFaults> out;
  const std::vector<int> job = job_nodes(w);
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkFaultSpec& f = links[i];
    const int k = kind_named(net, f.kind, "/links/" + std::to_string(i) + "/kind");
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
  if (m.family == "torus") return {1, m.torus.x * m.torus.y, 1};  // routes go around the failed chip
  throw FaultError("/failed_nodes", "expected no failed nodes on a " + m.family + " machine (no spare rule)");
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

namespace {

std::string at(const char* list, size_t i, const char* key = nullptr) {
  return std::string("/") + list + "/" + std::to_string(i) + (key ? std::string("/") + key : std::string());
}

// Whether the job has a node in `domain` of kind k and one outside it (its flows cross k there).
bool job_crosses(const Network& net, int k, int domain, const std::vector<int>& job) {
  bool in = false, out = false;
  for (int n : job) (net.domain_of(k, n) == domain ? in : out) = true;
  return in && out;
}

// Fat tree: cables lost per (up kind, instance), then each aggregate at its surviving share.
struct LostCables {
  std::map<std::pair<int, int>, int> lost;           // (up kind, instance) -> cables lost
  std::map<std::pair<int, int>, std::string> blame;  // the entry that took the last one
  std::map<int, int> spines_down;                    // spine group -> failed spine switches
};

void fat_tree_failed_links(const FaultSpec& f, const FatTreeNetwork& ft, LostCables& c) {
  for (size_t i = 0; i < f.failed_links.size(); ++i) {
    const FailedLinkSpec& l = f.failed_links[i];
    const int k = kind_named(ft, l.kind, at("failed_links", i, "kind"));
    if (k != FatTreeNetwork::leaf_uplink && k != FatTreeNetwork::spine_uplink)
      throw FaultError(at("failed_links", i, "kind"), "expected leaf_uplink or spine_uplink (a switch-to-switch cable; a "
                                                      "failed NIC or NVLink takes its GPU off the network: list it "
                                                      "under failed_nodes), got \"" + l.kind + "\"");
    const int count = k == FatTreeNetwork::leaf_uplink ? static_cast<int>(instances_used(ft, k, all_nodes(ft)).size())
                                                       : ft.spine_groups();
    if (l.instance < 0 || l.instance >= count)
      throw FaultError(at("failed_links", i, "instance"), "expected a " + l.kind + " instance that exists (0 .. " +
                                                              std::to_string(count - 1) + "), got " + std::to_string(l.instance));
    c.lost[{k, l.instance}] += l.cables;
    c.blame[{k, l.instance}] = at("failed_links", i);
  }
}

void fat_tree_failed_switches(const FaultSpec& f, const FatTreeNetwork& ft, LostCables& c) {
  std::set<std::pair<int, int>> seen;
  const int S = ft.spine_switches_per_group();
  for (size_t i = 0; i < f.failed_switches.size(); ++i) {
    const FailedSwitchSpec& s = f.failed_switches[i];
    if (s.spine_group < 0 || s.spine_group >= ft.spine_groups())
      throw FaultError(at("failed_switches", i, "spine_group"), "expected a spine group of the machine (0 .. " +
                                                                    std::to_string(ft.spine_groups() - 1) + "), got " +
                                                                    std::to_string(s.spine_group));
    if (s.index < 0 || s.index >= S)
      throw FaultError(at("failed_switches", i, "switch"), "expected a spine switch of the group (0 .. " +
                                                               std::to_string(S - 1) + ": one per up-link of a leaf), got " +
                                                               std::to_string(s.index));
    if (!seen.insert({s.spine_group, s.index}).second)
      throw FaultError(at("failed_switches", i), "expected each failed switch once");
    for (int leaf : ft.leaf_domains_of_spine_group(s.spine_group)) {
      ++c.lost[{FatTreeNetwork::leaf_uplink, leaf}];
      c.blame[{FatTreeNetwork::leaf_uplink, leaf}] = at("failed_switches", i);
    }
    ++c.spines_down[s.spine_group];
    c.blame[{FatTreeNetwork::spine_uplink, s.spine_group}] = at("failed_switches", i);
  }
}

std::vector<AppliedFailedLink> apply_fat_tree_failures(const FaultSpec& f, const FatTreeNetwork& ft, const Workload& w,
                                                       FaultyNetwork& net) {
  LostCables c;
  fat_tree_failed_links(f, ft, c);
  fat_tree_failed_switches(f, ft, c);
  for (const auto& [g, down] : c.spines_down) c.lost.try_emplace({FatTreeNetwork::spine_uplink, g}, 0);
  const std::vector<int> job = job_nodes(w);
  std::vector<AppliedFailedLink> out;
  for (const auto& [key, lost] : c.lost) {
    const auto [k, x] = key;
    const bool leaf = k == FatTreeNetwork::leaf_uplink;
    const int cables = leaf ? ft.leaf_uplink_cables() : ft.spine_uplink_cables();
    const auto spines = c.spines_down.find(x);
    const double switches_left = leaf || spines == c.spines_down.end()
                                     ? 1.0
                                     : 1.0 - double(spines->second) / ft.spine_switches_per_group();
    const double share = std::max(0.0, switches_left * (1.0 - double(lost) / cables));
    if (share > 0) {
      net.scale_bandwidth(k, x, share);
      net.scale_bandwidth(k + 1, x, share);  // its downward twin: leaf_downlink, spine_downlink
    } else if (job_crosses(ft, k, x, job)) {
      throw FaultError(c.blame.at(key), "expected failures that leave the job connected: " + ft.link_kinds()[k].name + " " +
                                            std::to_string(x) + " has none of its " + std::to_string(cables) +
                                            " cables left, and the job has GPUs on both sides of it");
    }
    out.push_back({ft.link_kinds()[k].name, x, std::min(lost, cables), cables, share});
  }
  return out;
}

// Torus: the failed cables (both directions) and chips, routed around.
AppliedFailures apply_torus_failures(const FaultSpec& f, const std::vector<int>& chips,
                                     const std::vector<int>& spare_chips, const TorusNetwork& t,
                                     const Workload& w, FaultyNetwork& net) {
  AppliedFailures a;
  std::set<std::pair<int, int>> links;
  std::set<int> lines;  // chips in a failed element's row or column
  const auto mark_lines = [&](int node) {
    for (int x = 0; x < t.x_size(); ++x) lines.insert(t.node_at(x, node / t.x_size()));
    for (int y = 0; y < t.y_size(); ++y) lines.insert(t.node_at(node % t.x_size(), y));
  };
  for (size_t i = 0; i < f.failed_links.size(); ++i) {
    const FailedLinkSpec& l = f.failed_links[i];
    const int k = kind_named(t, l.kind, at("failed_links", i, "kind"));
    if (l.has_cables) throw FaultError(at("failed_links", i, "cables"), "expected no cables on a torus (a chip's link is one cable)");
    if (l.instance < 0 || l.instance >= t.node_count())
      throw FaultError(at("failed_links", i, "instance"), "expected a chip of the torus (0 .. " +
                                                              std::to_string(t.node_count() - 1) + "), got " + std::to_string(l.instance));
    static constexpr int reverse[4] = {TorusNetwork::x_minus, TorusNetwork::x_plus, TorusNetwork::y_minus, TorusNetwork::y_plus};
    links.insert({k, l.instance});
    links.insert({reverse[k], t.neighbour(l.instance, k)});
    mark_lines(l.instance);
    mark_lines(t.neighbour(l.instance, k));
    a.links.push_back({l.kind, l.instance, 1, 1, 0.0});
  }
  const std::set<int> failed(chips.begin(), chips.end());
  for (int c : chips) mark_lines(c);
  a.failed_chips = chips;
  const std::vector<int> job = job_nodes(w);
  std::vector<LinkRef> p;
  for (int n : job)
    if (n != job.front() && !t.route_around(job.front(), n, failed, links, p))
      throw FaultError(f.failed_links.empty() ? "/failed_nodes/nodes" : "/failed_links",
                       "expected failures that leave the job's chips connected: no route from " + t.node_name(job.front()) +
                           " to " + t.node_name(n) + " avoids the failed chips and links");
  for (int c : spare_chips) lines.insert(c);  // a spare's ring neighbours are far: its own class
  for (int n : job)
    if (lines.count(n)) net.mark_rerouted(n), ++a.rerouted_nodes;
  net.set_route([&t, failed, links](int src, int dst, std::vector<LinkRef>& out) {
    if (!t.route_around(src, dst, failed, links, out))
      throw std::logic_error("torus: no route around the failures (checked when they were applied)");
  });
  return a;
}

}  // namespace

AppliedFailures apply_failures(const FaultSpec& f, const std::vector<int>& failed_chips,
                               const std::vector<int>& spare_chips, const Workload& w, FaultyNetwork& net) {
  if (const auto* ft = dynamic_cast<const FatTreeNetwork*>(&net.base())) {
    AppliedFailures a;
    a.links = apply_fat_tree_failures(f, *ft, w, net);
    return a;
  }
  if (const auto* t = dynamic_cast<const TorusNetwork*>(&net.base())) {
    if (!f.failed_switches.empty())
      throw FaultError("/failed_switches", "expected no failed switches on a torus (its chips route; fail a chip under "
                                           "failed_nodes)");
    return apply_torus_failures(f, failed_chips, spare_chips, *t, w, net);
  }
  throw FaultError(f.failed_links.empty() ? "/failed_switches" : "/failed_links",
                   "expected failed links and switches only on a gpu_cluster (fat tree) or a torus machine: this "
                   "network's cable counts are not known (degrade its links with \"links\" instead)");
}

AppliedFaults apply_faults(const FaultSpec& f, const MachineSpec& m, Workload& w, FaultyNetwork& net) {
  AppliedFaults a;
  if (f.has_failed_nodes) a.nodes = apply_node_faults(f.failed_nodes, f.seed, m, w);
  const bool torus_chips = a.nodes && m.family == "torus";
  if (!f.failed_links.empty() || !f.failed_switches.empty() || torus_chips)
    a.failures = apply_failures(f, torus_chips ? a.nodes->failed : std::vector<int>{},
                                torus_chips ? a.nodes->replaced : std::vector<int>{}, w, net);
  a.links = apply_link_faults(f.links, f.seed, w, net);
  if (f.has_stragglers) a.stragglers = apply_stragglers(f.stragglers, f.seed, w, net);
  a.classes = split_classes_by_faults(w, net);
  a.slowed_roles = roles_touched_by_faults(w, net);
  return a;
}

}  // namespace exasim
