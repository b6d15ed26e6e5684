// The rules a plan must obey, in one place: the scenario parser (app/scenario.cpp) applies them to
// every scenario it reads, and the workload builders (models/transformer.cpp, models/convnet.cpp)
// to what they are given. Each rule's problem comes with the JSON path of the scenario key it is
// about and what was expected there ("/plan/tensor_parallel", "expected a divisor of ...").
//
// Rules are checked in a fixed order and the first broken one is returned: later rules may
// divide by what an earlier one checked. A new plan key's rule goes here (CONTRIBUTING.md).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "models/moe_spec.hpp"
#include "models/parallel_plan.hpp"

namespace exasim {

struct PlanProblem {
  std::string json_path;  // e.g. "/plan/tensor_parallel"
  std::string expected;   // e.g. "expected a divisor of the heads (96), got 5"
  std::string text() const { return json_path + ": " + expected; }
};

// What the rules need to know of the machine (models/ does not see topologies/; app/ fills this
// from the MachineSpec).
struct PlanMachine {
  std::string name, family, device_name;
  std::string device_word = "device";  // "node" on Sunway, "GPU", "chip"
  long long devices = 0;
  bool fp16_peak = false, fp16_gemm = false;    // peak_flops_per_s.fp16, gemm_efficiency.fp16
  bool fp8_peak = false, fp8_gemm = false;      // peak_flops_per_s.fp8, gemm_efficiency.fp8
  bool flash_fp32 = false, flash_fp16 = false;  // flash_attention_efficiency per precision
  std::map<std::string, int> attention_kernel_head_dims;  // flash_attention_kernels: name -> head dimension
  bool host_offload = false;                    // host_link_Bps and host_memory_Bps given
  int cores_per_device = 1;
  int streaming_multiprocessors = 0;            // a GPU's SMs (0: the device file gives none)
  int nodes_per_supernode = 0, supernodes = 0;  // Sunway
};

// A general plan (data/tensor/pipeline/expert...) of a transformer; `machine` null: the rules that
// need no machine only (the builders).
std::optional<PlanProblem> general_plan_problem(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& p,
                                                const PlanMachine* machine);
// What a transformer family (encoder, encoder-decoder, moe_every) needs of the plan, and what a
// device of `cores` cores (a TPU v3 chip's two TensorCores, each taking a share of the tokens)
// needs of the micro-batch (the builder checks it with the device's cores).
std::optional<PlanProblem> transformer_family_problem(const ModelSpec& m, const TrainingSpec& t, const ParallelPlan& p,
                                                      int cores);
// BaGuaLu's MoDa or inverse layout on a Sunway machine.
std::optional<PlanProblem> moda_plan_problem(const ModelSpec& m, const TrainingSpec& t, const PlanSpec& p,
                                             const PlanMachine& machine);
// A convolutional network's data-parallel plan; `machine` null: the rules that need no machine, with
// `cores` the cores that split a device's batch.
std::optional<PlanProblem> convnet_plan_problem(const ParallelPlan& p, PrecisionPolicy precision,
                                                const PlanMachine* machine, int cores);

}  // namespace exasim
