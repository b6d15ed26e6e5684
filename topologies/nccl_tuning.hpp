// NCCL's choice of algorithm and protocol per collective and size (the gpu_cluster family's
// "collective_library", topologies/libraries/*.json: NCCL 2.7.5's src/graph/tuning.cc).
//
// ncclTopoTuneModel gives each (collective, algorithm, protocol) a latency and an algorithm
// bandwidth from the communicator (ranks, nodes, channels, the bandwidth of its graph):
//   bus bandwidth = channels x a channel's bandwidth, refined per protocol (Ring/LL x 1/4, Ring/LL128
//   x 0.92 up to 16.7 GB/s a channel, Tree x 0.9 up to 80 or 110 GB/s, Tree/LL x 1/3.8, ...);
//   algorithm bandwidth = bus bandwidth x nRanks / nsteps (ring) or x 1/2 (tree);
//   latency = baseLat + ring: (nsteps - nInterSteps) intraLat + nInterSteps interLat,
//                       tree: 2 ((nRanks / nNodes - 1) intraLat + log2(nNodes) interLat);
// ncclTopoGetAlgoTime: time = latency (x 1.9 for a Ring/Simple all-reduce across nodes past
// nRanks x 4 KB) + bytes / bandwidth (x the tree's correction by size), and the tuner runs the
// enabled pair of least time. The chosen pair is then simulated, not replaced by this formula: its
// protocol's bandwidth factor multiplies the bytes of the collective's flows (wire bytes), its
// baseLat is paid once before the first step and its hwLat by each step by hop kind.
//
// The communicator's graph is taken from the machine (not NCCL's topology search): a channel per
// member of the group on one node (assumption: at least one ring per GPU on an NVSwitch node, so
// the per-channel caps bind as on NCCL's multi-channel rings), and a bus bandwidth of NVLink within
// one node, else the smaller of NVLink and the NICs the group's members of one node reach.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/workload.hpp"
#include "topologies/machine_reader.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

class FatTreeNetwork;

// NCCL's view of a communicator (a group of ranks).
struct NcclCommunicator {
  int ranks = 0;
  int nodes = 0;
  int channels = 1;
  double bus_Bps = 0;         // channels x a channel's bandwidth (the graph's speed)
  bool ll128_enabled = false; // the device is one on which NCCL enables LL128 by default
  bool compute_capability_80 = false;  // every GPU an A100 (tuning.cc's compCap80: its caps apply)
  bool compute_capability_90 = false;  // every GPU a Hopper the library has LL128 caps for (LL128 on)
  bool nvls = false;  // NVLS offered: one node of an NVLink SHARP switch, a library that models NVLS
};

// One (algorithm, protocol) of NCCL's model for a collective: its latency, algorithm bandwidth
// (0: not available) and predicted time for the size it was asked for.
struct NcclCost {
  int algorithm = NcclTuning::ring;
  int protocol = NcclTuning::simple;
  double latency_s = 0;
  double bandwidth_Bps = 0;
  double time_s = -1;
};

const char* nccl_algorithm_name(int algorithm);  // "Tree", "Ring", "NVLS"
const char* nccl_protocol_name(int protocol);    // "LL", "LL128", "Simple"

// ncclTopoTuneModel's latency and bus bandwidth (before the algorithm's ratio) of one pair. NVLS
// (one node): NCCL's NVLS graph has a channel per GPU, each charging its bandwidth on every GPU's
// link to the switch and twice on its head's (search.cc ncclTopoSearchTryNvls), so a link of
// bandwidth b carries (n + 1) channels: bus bandwidth n b / (n + 1) (NCCL's search then rounds the
// channel's bandwidth down its speed array; not modelled); latency hwLat[NVLINK][NVLS][Simple]
// alone (tuning.cc sets, not adds, it); algorithm bandwidth x 5/6 (the library's ratio).
double nccl_bus_Bps(const NcclTuning& t, CollectiveKind kind, int algorithm, int protocol, const NcclCommunicator& comm);
double nccl_latency_s(const NcclTuning& t, CollectiveKind kind, int algorithm, int protocol, const NcclCommunicator& comm);
// ncclTopoGetAlgoTime for `bytes` (NCCL's nBytes: the full buffer, as CollectiveWork::bytes).
NcclCost nccl_cost(const NcclTuning& t, CollectiveKind kind, int algorithm, int protocol, const NcclCommunicator& comm,
                   double bytes);
// The enabled pair of least time (the tree only where `tree_simulated` and NCCL runs one: all-reduce;
// NVLS where comm.nvls, for an all-reduce, reduce-scatter or all-gather as NCCL >= 2.18).
NcclCost nccl_choose(const NcclTuning& t, CollectiveKind kind, const NcclCommunicator& comm, double bytes,
                     bool tree_simulated);
// Sets c's protocol, wire factor and latencies to those of `choice` (c.algorithm is the caller's).
void apply_nccl_choice(const NcclTuning& t, const NcclCost& choice, CollectiveKind kind, const NcclCommunicator& comm,
                       CollectiveWork& c);

// The tree's chunks per channel (collectives.hpp's C) for an all-reduce of `bytes` with `protocol`.
int nccl_tree_chunks(const NcclTuning& t, int protocol, const NcclCommunicator& comm, double bytes);

// The communicator of a group of ranks on these nodes (GPUs of `net`) of machine m.
NcclCommunicator nccl_communicator(const FatTreeNetwork& net, const MachineSpec& m, const std::vector<int>& nodes);

// Runs NCCL's tuner on every all-reduce, reduce-scatter and all-gather of w (ring or multi-ring) when
// m has a collective library; returns how many it set. An all-reduce whose tuner picks the Tree runs
// collectives.hpp's tree (offered only where the role's groups lie in consecutive blocks of one
// size per node).
int adopt_nccl_tuning(Workload& w, const FatTreeNetwork& net, const MachineSpec& m);

// A library file (topologies/libraries/*.json) at `path` of `doc` into t.
void read_nccl_tuning(const MachineReader& r, const nlohmann::json& doc, const std::string& path, NcclTuning& t);

}  // namespace exasim
