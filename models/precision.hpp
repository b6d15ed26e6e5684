// Precision modes in one table: for each mode, the precision each op class computes in, the
// precision its activations are stored in, and the bytes of parameters, gradients and master
// weights. The MoDa builder (models/moe_transformer.cpp) reads it.
//
//   fp32       everything in fp32
//   apex_o1    autocast: GEMMs in half, their operands kept and cast from fp32, everything else fp32
//              (parameters, gradients, element-wise kernels); no master copy
//   apex_o2    almost everything in half (GEMMs, activations, element-wise kernels, parameters,
//              gradients), fp32 master weights for the optimizer; the gate's softmax and top-k in fp32
//   layerwise  BaGuaLu's layer-wise mixed precision (reference/models.md): attention under autocast
//              (O1), expert FFN in half with fp32 master weights (O2), the gate in fp32, reductions,
//              exp, sqrt, softmax and layer norm in fp64, dynamic loss scaling. "mixed" in a MoDa
//              scenario means this mode.
// bf16 and fp8 are not modes yet: the kernel vocabulary (kernels/kernel_id.hpp) and the device
// files have no bf16 or fp8 precision, so a scenario naming them is refused.
#pragma once
#include "kernels/kernel_id.hpp"
#include "models/moe_spec.hpp"

namespace exasim {

struct PrecisionPlan {
  Precision attn_gemm, gate_gemm, ffn_gemm;
  Precision attn_act, ffn_act;   // storage of activations
  Precision elementwise;         // arithmetic of memory-bound kernels (layer norm, softmax, residual)
  Precision expert_grad, expert_param;
  Precision shared_grad, shared_param;  // attention, gate and norm parameters
  double expert_master_bytes;    // extra fp32 master copy per expert parameter (0: none)
  double shared_master_bytes;    // the same for the shared parameters
};

// Throws std::invalid_argument for a policy with no MoDa row (fp16 is a general-plan mode).
PrecisionPlan moda_precision_plan(PrecisionPolicy p);

}  // namespace exasim
