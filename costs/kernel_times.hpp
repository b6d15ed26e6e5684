// A kernel profile from times measured elsewhere: `tools/calibrate-gpu.py` times exasim's kernels
// on a GPU (PyTorch: cuBLAS, cuDNN and its own kernels) over a grid of shapes and writes the times;
// `exasim calibrate --import-times` turns them into a profile of the same format as a host's
// (costs/host_profile.hpp), counting each kernel's work with the same nominal_work the cost model
// uses, so the rates and efficiencies mean what a host profile's mean. A device file names such a
// profile (`kernel_profile`) to be costed from its own measurements instead of the host's.
//
// The times file (JSON, "format": "exasim-kernel-times-1"):
//   {"meta": {"device": "NVIDIA H100 80GB HBM3", "torch": "...", "cuda": "...",
//             "axes": {"gemm": [[m...], [n...], [k...]], "softmax": [[rows...], [cols...]], ...}, ...},
//    "times": [{"kernel": "gemm", "precision": "fp16", "shape": [m, n, k], "measured_shape": [...],
//               "scale_factor": 1, "time_s": 1e-5, "iterations": 100, "rel_stderr": 0.01}, ...]}
// Fused attention records ({"kernel": "flash_attention", "backend": "cudnn", "causal": true, "seq",
// "head_dim", "pairs", "forward_s", "forward_backward_s"}) of the chosen backend become the surfaces
// of flash_attention and flash_attention_causal over seq x head_dim x passes {2: forward, 5: backward}.
// Other records (fp8 GEMMs, other attention backends) are evidence for a device file's figures, not
// part of the profile: they are counted and left out.
#pragma once
#include <string>

#include "costs/host_profile.hpp"

namespace exasim {

struct ImportedProfile {
  HostProfile profile;
  int points = 0;          // grid points taken
  int left_out = 0;        // records not in the profile (fp8 GEMMs, other attention backends)
};

// Throws ProfileError (file, JSON path, what was expected) on a malformed file, a measurement that
// failed ("error"), a grid point missing, or a kernel's precision missing.
// min_bytes: a memory-bound point counts towards its class peak only if it moves at least this
// many bytes (out of the caches: twice an H100's 50 MB L2 and more).
// attention_backend: whose fused attention the surfaces hold ("cudnn": what Transformer Engine, and
// so Megatron-Core, runs on Hopper; "flash": PyTorch's FlashAttention-2).
ImportedProfile profile_from_kernel_times(const std::string& json_text, const std::string& file,
                                          const std::string& attention_backend = "cudnn", double min_bytes = 256e6);

}  // namespace exasim
