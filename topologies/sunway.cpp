#include "topologies/sunway.hpp"

#include "topologies/machine_reader.hpp"
#include "topologies/mpich_tuning.hpp"

#include <stdexcept>
#include <string>

namespace exasim {

SunwayNetwork::SunwayNetwork(const MachineSpec& m, Precision peak_precision)
    : nodes_per_sn_(m.nodes_per_supernode), supernodes_(m.supernodes), core_groups_(m.core_groups_per_node),
      message_overhead_s_(m.message_overhead_s), eager_limit_bytes_(m.eager_limit_bytes),
      eager_copy_Bps_(m.eager_copy_Bps) {
  if (eager_limit_bytes_ > 0 && !(eager_copy_Bps_ > 0))
    throw std::invalid_argument("sunway machine: an eager limit needs a positive eager copy rate");
  if (nodes_per_sn_ <= 0 || supernodes_ <= 0 || core_groups_ <= 0)
    throw std::invalid_argument("sunway machine: node, supernode and core group counts must be positive");
  auto peak = m.peak_flops_per_s.find(peak_precision);
  if (peak == m.peak_flops_per_s.end())
    throw std::invalid_argument(std::string("sunway machine: no peak for ") + to_string(peak_precision));
  cg_speed_ = peak->second / core_groups_;
  const double W = m.node_injection_Bps;
  const double up = m.upper_level_bandwidth_ratio * nodes_per_sn_ * W;
  kinds_ = {
      {"noc", m.noc_Bps, 0.0, true},
      {"nic_up", W, m.link_latency_s, true},
      {"nic_down", W, m.link_latency_s, true},
      {"supernode_uplink", up, m.link_latency_s, false},
      {"supernode_downlink", up, m.link_latency_s, false},
  };
}

void SunwayNetwork::path(int a, int b, std::vector<LinkRef>& out) const {
  out.push_back({noc, a});
  out.push_back({nic_up, a});
  const int sa = supernode_of(a), sb = supernode_of(b);
  if (sa != sb) {
    out.push_back({supernode_uplink, sa});
    out.push_back({supernode_downlink, sb});
  }
  out.push_back({nic_down, b});
  out.push_back({noc, b});
}

int SunwayNetwork::domain_of(int kind, int node) const {
  if (kind == supernode_uplink || kind == supernode_downlink) return supernode_of(node);
  return node;
}

std::string SunwayNetwork::node_name(int node) const {
  return "sn" + std::to_string(supernode_of(node)) + ".n" + std::to_string(node % nodes_per_sn_);
}

// The sunway family's machine file (topologies/machine_reader.hpp).
void read_sunway_machine(const MachineReader& r, const nlohmann::json& m, const std::string& path, MachineSpec& s) {
  r.check_keys(m, path,
               {"name", "family", "description", "nodes_per_supernode", "supernodes", "core_groups_per_node", "device",
                "noc_Bps", "upper_level_bandwidth_ratio", "node_injection_Bps", "message_overhead_s", "link_latency_s",
                "eager_limit_bytes", "eager_copy_Bps", "checkpoint_write_Bps", "collective_library", "sources"});
  r.check_checkpoint_write_Bps(m, path);
  s.nodes_per_supernode = r.required_int(m, path, "nodes_per_supernode");
  s.supernodes = r.required_int(m, path, "supernodes");
  s.core_groups_per_node = r.required_int(m, path, "core_groups_per_node");
  r.read_device(m, path, s);
  s.noc_Bps = r.required_ranged(m, path, "noc_Bps", kLinkBandwidthRange);
  s.upper_level_bandwidth_ratio = r.required_fraction(m, path, "upper_level_bandwidth_ratio");
  s.node_injection_Bps = r.required_ranged(m, path, "node_injection_Bps", kLinkBandwidthRange);
  // Optional: without it a message costs its sender nothing beyond latency and bytes.
  if (MachineReader::has(m, "message_overhead_s"))
    s.message_overhead_s = r.required_ranged(m, path, "message_overhead_s", kMessageOverheadRange);
  // Optional, together: MPI's eager protocol (Network::eager_copy_s); without them no message is copied.
  const bool limit = MachineReader::has(m, "eager_limit_bytes"), rate = MachineReader::has(m, "eager_copy_Bps");
  if (limit != rate)
    r.fail(MachineReader::key_path(path, limit ? "eager_copy_Bps" : "eager_limit_bytes"),
           "expected eager_limit_bytes and eager_copy_Bps together (the eager protocol's limit and its copy rate)");
  if (limit) {
    s.eager_limit_bytes = r.required_ranged(m, path, "eager_limit_bytes", kEagerLimitRange);
    s.eager_copy_Bps = r.required_ranged(m, path, "eager_copy_Bps", kLinkBandwidthRange);
  }
  // The link latency: given, or derived from the eager protocol (sunway_latency_from_eager_limit_s).
  if (MachineReader::has(m, "link_latency_s") || !limit)
    s.link_latency_s = r.required_ranged(m, path, "link_latency_s", kLatencyRange);
  else
    s.link_latency_s = sunway_latency_from_eager_limit_s(s.eager_limit_bytes, s.eager_copy_Bps);
  // Optional: the MPI library whose algorithm choice the collectives take (topologies/mpich_tuning.hpp).
  if (MachineReader::has(m, "collective_library"))
    r.read_named_file(m.at("collective_library"), MachineReader::key_path(path, "collective_library"),
                      "topologies/libraries/", "collective library",
                      [&](const MachineReader& lr, const nlohmann::json& doc, const std::string& dp) {
                        read_mpich_tuning(lr, doc, dp, s.mpich);
                      });
}

}  // namespace exasim
