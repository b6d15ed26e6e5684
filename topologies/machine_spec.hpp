// A machine as a scenario describes it (plain values; see topologies/machines/*.json).
// Three families: "sunway" (BaGuaLu's New Generation Sunway), "gpu_cluster" (GPU nodes on a
// fat tree, e.g. Selene's DGX A100) and "torus" (a 2-D torus of chips, e.g. a TPU v3 pod).
// A device is what runs one rank: a Sunway node, a GPU, a TPU chip.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/step_graph.hpp"

namespace exasim {

// NCCL's cost model (topologies/libraries/*.json, read by topologies/nccl_tuning.cpp): the tables of
// its src/graph/tuning.cc that its tuner (ncclTopoTuneModel, ncclTopoGetAlgoTime) chooses the
// algorithm and protocol of each collective with. Indexes: algorithm [tree, ring], protocol
// [LL, LL128, Simple], hop [NVLink, network]; latencies in seconds, bandwidths in B/s.
struct NcclTuning {
  static constexpr int tree = 0, ring = 1, nvls = 2;  // nvls: NCCL_ALGO_NVLS (its own fields below)
  static constexpr int ll = 0, ll128 = 1, simple = 2;
  static constexpr int nvlink = 0, network = 1;
  std::string name;                 // "" : no library model (the machine's step latencies alone)
  double base_latency_s[2][3] = {};     // baseLat[algorithm][protocol]
  double hw_latency_s[2][2][3] = {};    // hwLat[hop][algorithm][protocol]
  double ll_intra_latency_factor = 1;   // intraLat x this for LL when the communicator spans nodes
  double ring_ll_bandwidth_factor = 1;       // busBw x this (more than one node, or an all-reduce)
  double ring_ll_gather_bandwidth_factor = 1;  // busBw x this (all-gather, reduce-scatter in one node)
  double ring_ll128_bandwidth_factor = 1;    // busBw x this (ppn >= 2)
  double ring_ll128_one_per_node_factor = 1; // busBw x this (ppn < 2)
  double ll128_max_channel_Bps[3] = {};      // ll128MaxBwPerCh: all_reduce, reduce_scatter, all_gather
  double tree_bandwidth_factor = 1;          // busBw x this for the tree
  double tree_max_bus_Bps[2] = {};           // maxTreeBw: up to 2 nodes, more nodes
  double tree_ll_bandwidth_factor = 1;
  double tree_ll128_bandwidth_factor[2] = {1, 1};  // one node, more nodes
  double tree_correction[3][22] = {};        // treeCorrectionFactor[protocol][log2(bytes / 64)]
  double ring_plateau_latency_factor = 1;    // ring Simple all-reduce across nodes, large enough
  double ring_plateau_bytes_per_rank = 0;    // ... from nRanks x this bytes on
  std::vector<std::string> ll128_devices;    // device names on which LL128 is enabled by default
  double tree_chunk_bytes[3] = {};           // the tree's chunk of data per step, by protocol (before halving)
  // Compute capability 8.0 (A100): the devices, their bus bandwidth cap and the Tree/LL128 maxTreeBw.
  std::vector<std::string> compute_capability_80_devices;
  double compute_capability_80_max_bus_Bps = 0;
  double compute_capability_80_tree_ll128_max_bus_Bps[2] = {};  // up to 2 nodes, more nodes
  // NVLS (NCCL >= 2.17, Simple only; the library's optional "nvls" table): its latency in one node
  // (hwLat[NVLINK][NVLS][Simple]; baseLat is 0) and the bus-to-algorithm bandwidth ratio (5/6).
  // nvls_algorithm_bandwidth_ratio 0: the library has no NVLS.
  double nvls_nvlink_latency_s = 0;
  double nvls_algorithm_bandwidth_ratio = 0;
  // Compute capability 9.0 (Hopper; the library's optional "compute_capability_90_devices" and
  // "compute_capability_90_ll128_max_channel_Bps", later tuners' per-architecture rows): LL128 on by
  // default there, Ring/LL128 at most perChMaxRingLL128Bws x nChannels (every collective) and Tree/LL128
  // perChMaxTreeLL128Bws x nChannels (one node, two nodes, more), in place of 2.7.5's ll128MaxBwPerCh.
  std::vector<std::string> compute_capability_90_devices;
  double compute_capability_90_ring_ll128_max_channel_Bps = 0;
  double compute_capability_90_tree_ll128_max_channel_Bps[3] = {};
};

// GPU nodes (NVLink/NVSwitch inside, one NIC per rail) on a fat tree of leaf and spine groups
// with a top (core) level above them. See topologies/fat_tree.hpp for the routes.
struct GpuClusterSpec {
  int nodes = 0;
  int gpus_per_node = 0;
  int gpus_per_nic = 1;                 // GPUs that share one NIC (rail)
  double nvlink_Bps = 0;                // per GPU per direction into the node's NVSwitch
  double nvlink_latency_s = 0;
  bool nvlink_sharp = false;            // the NVSwitch reduces in the network (NVLink SHARP: NCCL's NVLS)
  double nic_Bps = 0;                   // per NIC per direction
  int nodes_per_leaf_group = 0;         // e.g. Selene's scalable unit
  int leaf_groups_per_spine_group = 0;  // leaf groups joined by one spine group
  // Rail-optimized: NIC i of every node of a leaf group sits on leaf switch i of that group
  // (a leaf domain is (group, rail)); otherwise one leaf domain per leaf group.
  bool rail_optimized = true;
  double leaf_taper = 1;   // a leaf domain's downward / upward bandwidth (oversubscription)
  double spine_taper = 1;  // a spine group's downward / upward bandwidth
  // The collective library's (NCCL's) software latency per message (ring step), by hop kind:
  // between two GPUs of one node (NVLink/NVSwitch) and between nodes (the network). 0: not modelled.
  double nvlink_step_latency_s = 0;
  double network_step_latency_s = 0;
  // The collective library's cost model ("collective_library"; replaces the two step latencies).
  NcclTuning nccl;

  int nics_per_node() const { return gpus_per_node / gpus_per_nic; }
};

// MPICH's thresholds between its collective algorithms (topologies/mpich_tuning.hpp); an empty
// name: no library named (collectives stay as the model builds them).
struct MpichTuning {
  std::string name;
  double allreduce_short_msg_bytes = 2048;
  double redscat_commutative_long_msg_bytes = 524288;
  double allgather_short_msg_bytes = 81920;
  double allgather_long_msg_bytes = 524288;
};

// A 2-D torus of chips, x chips per row, y rows; four links per chip (+x, -x, +y, -y).
struct TorusSpec {
  int x = 0;
  int y = 0;
  double link_Bps = 0;  // per link per direction
  // false: no wrap-around link along x (a mesh in x: the TPU v3 multipod's pods joined in a line).
  bool x_wraparound = true;
};

struct MachineSpec {
  std::string name;
  std::string family;  // "sunway", "gpu_cluster" or "torus"
  // --- sunway
  int nodes_per_supernode = 256;
  int supernodes = 0;           // how many the machine has
  int core_groups_per_node = 6;
  // --- gpu_cluster, torus
  GpuClusterSpec gpu;
  TorusSpec torus;
  // The device (topologies/devices/*.json): its compute and memory.
  std::string device_name;
  std::map<Precision, double> peak_flops_per_s;  // per device
  std::map<Precision, double> gemm_efficiency;
  std::map<Precision, double> flash_attention_efficiency;  // FlashAttention's best case (absent: none)
  // The device file's flash_attention_kernels: published rates of named fused attention kernels on
  // the device (FlashAttention-2, -3), one of which a plan may name (plan.attention_kernel).
  std::map<std::string, AttentionKernelTable> attention_kernels;
  bool half_gemm_ridge_scaled = false;  // the device file's: DeviceProfile::half_gemm_host_shape
  // The device file's kernel_profile: the embedded kernel profile measured on the device itself
  // ("device-h100-sxm5-80gb": profiles/device-h100-sxm5-80gb.json), whose efficiency surfaces cost its
  // kernels instead of the host's ("": costed from the host profile).
  std::string kernel_profile;
  double memory_bandwidth_Bps = 0;               // achieved bandwidth per device (layer kernels)
  double optimizer_memory_bandwidth_Bps = 0;     // achieved by the optimizer update (Sunway: derived)
  double memory_bytes = 0;                       // per device
  // A GPU's streaming multiprocessors (0: not given; tensor-parallel communication overlap needs it).
  int streaming_multiprocessors = 0;
  // Its special function units' transcendental results per second (0: not given; DeviceProfile's).
  double special_function_ops_per_s = 0;
  // Its vector unit's element-wise operations per second beside a separate matrix unit (0: not
  // given, the element-wise flops run at the peak; DeviceProfile's).
  double vector_unit_ops_per_s = 0;
  // The compiler's random-number generator: vector operations per 32-bit random word it draws
  // (the device file's compiler.vector_ops_per_random_word; 0: not given, drawing is free).
  double vector_ops_per_random_word = 0;
  int cores_per_device = 1;  // cores that split a device's batch (a TPU v3 chip's two TensorCores)
  // The device's compiler (the device file's "compiler"; absent: a framework that launches one
  // kernel per op, as PyTorch eager and TensorFlow without XLA on GPUs). XLA on a TPU fuses
  // element-wise ops into their producers and consumers (DeviceProfile::fuses_elementwise) and
  // runs a convolution as an implicit GEMM on the matrix units, its windows read in place (no
  // im2col pass: models/convnet.hpp).
  std::string compiler_name;
  bool fuses_elementwise = false;
  // The systolic matrix unit (the device file's "matrix_unit" {rows, columns}; 0: not described).
  int matrix_unit_rows = 0;
  int matrix_unit_columns = 0;
  // How arrays are tiled in the device's memory (the device file's "memory_tile" {sublanes,
  // lanes}; 0: not described): one dimension padded to whole sublanes, another to whole lanes
  // (a TPU: 8 x 128). Convolutional feature maps move their padded bytes (models/convnet.hpp).
  int memory_tile_sublanes = 0;
  int memory_tile_lanes = 0;
  bool implicit_gemm_convolution = false;
  // "convolution": "window_taps" (XLA on a TPU): an implicit GEMM that contracts each window tap's
  // input channels on the matrix unit, the taps accumulating, and that runs the first stride-2
  // convolution on space-to-depth images (models/convnet.hpp).
  bool window_tap_convolution = false;
  // --- optimizer offload (gpu_cluster files that describe their hosts; 0: not described, and a
  // plan with offload_optimizer is refused): per device, the link to the host (PCIe, per
  // direction) and the share of the host's memory bandwidth the CPU optimizer streams at.
  double host_link_Bps = 0;
  double host_memory_Bps = 0;
  // --- sunway network
  double noc_Bps = 0;                            // on-chip network between core groups and NIC
  double upper_level_bandwidth_ratio = 0;        // bandwidth across supernodes / inside (3/16)
  double node_injection_Bps = 0;                 // per direction; unpublished (free parameter)
  double message_overhead_s = 0;                 // sender's cost per message (Network::message_overhead_s)
  double eager_limit_bytes = 0;                  // largest message sent eagerly (Network::eager_copy_s); 0: none
  double eager_copy_Bps = 0;                     // the sender's copy rate of an eager message
  MpichTuning mpich;                             // "collective_library": its MPI's algorithm choice
  // --- every family: the file system's aggregate write bandwidth for checkpoints (read only for a
  // scenario with a "resilience" block; 0 otherwise)
  double checkpoint_write_Bps = 0;
  // --- every family: latency of one switch hop or link (unpublished: an assumption or a free parameter)
  double link_latency_s = 0;

  // Devices the machine offers, one rank each: Sunway nodes, GPUs, torus chips. In 64 bits (a
  // product of two ints cannot overflow it); the scenario parser refuses more than INT_MAX.
  long long device_count() const;
  // What one device is called: "node", "GPU", "chip".
  std::string device_word() const;
  // Devices that share the innermost fast level: a supernode's nodes, a node's GPUs, a torus row.
  int devices_per_inner_level() const;
};

// The device as the cost model sees it.
DeviceProfile device_profile_of(const MachineSpec& m);

}  // namespace exasim
