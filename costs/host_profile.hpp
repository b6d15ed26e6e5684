// A host profile: what `exasim calibrate` measured on one machine. Per kernel class and
// precision, the host's peak (the best rate any sample reached); per kernel and precision, an
// efficiency surface: the rate at each shape of a grid, relative to that class peak. The cost
// model maps these relative efficiencies onto a target device (costs/profile_cost_model.hpp).
//
// The file (JSON, profiles/host-<cpu>.json):
//   {"format": "exasim-host-profile-1",
//    "host": {"cpu_model": "...", "blas": "...", "blas_threads": 2},
//    "created_by": "exasim calibrate --quick",
//    "stand_ins": {"fp16": {"precision": "fp32", "reason": "..."}},
//    "peaks": {"gemm": {"fp32": {"peak_flops_per_s": 9.1e10}, ...},
//              "memory_bound": {"fp32": {"peak_Bps": 1.2e10}, ...},
//              "optimizer_update": {"fp32": {"peak_Bps": 1.1e10}}},
//    "kernels": [{"kernel": "gemm", "precision": "fp32",
//                 "axes": {"m": [16, 128], "n": [...], "k": [...]},
//                 "points": [{"shape": [16, 16, 16], "time_s": 1e-6, "efficiency": 0.02, ...}, ...]}, ...]}
// points lie on the grid the axes span, in row-major order (last axis fastest).
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_id.hpp"

namespace exasim {

// A malformed profile: names the file, the JSON path and what was expected.
class ProfileError : public std::runtime_error {
 public:
  ProfileError(const std::string& file, const std::string& json_path, const std::string& expected);
};

// One measured grid point, as calibrate records it.
struct ProfilePoint {
  KernelShape shape;              // the shape asked for
  double time_s = 0;              // mean time of one run (extrapolated when scaled down)
  double efficiency = 0;          // rate / the class peak (may exceed 1 for cache-resident shapes)
  KernelShape measured_shape;     // what actually ran (scaled down when too large)
  double scale_factor = 1;        // time_s = measured time * scale_factor
  int iterations = 0;
  double rel_stderr = 0;           // of the mean time; infinite (null in the file) after one iteration
};

// One kernel at one precision: efficiencies on a rectilinear grid over the kernel's dims.
struct EfficiencySurface {
  Kernel kernel = Kernel::gemm;
  Precision precision = Precision::fp32;
  std::vector<std::vector<double>> axes;  // one per dim the kernel uses, ascending
  std::vector<ProfilePoint> points;       // row-major over the axes
  // Interpolates linearly in the logarithm of each dim between the grid's points; a dim
  // outside the grid takes the edge value (large shapes have saturated, tiny ones are off
  // the measured range). Batch is ignored: a batch of GEMMs runs at one GEMM's efficiency.
  double lookup(const KernelShape& s) const;
};

struct HostProfile {
  std::string file;  // where it was read from ("" when built in memory)
  std::string cpu_model, blas, created_by;
  int blas_threads = 1;
  // Measured on the target device itself (a GPU's kernel profile, costs/kernel_times.hpp; the file's
  // "host": {"measured_on": "device"}), not on a host whose efficiencies are mapped onto a device.
  bool measured_on_device = false;
  // Peak per kernel class and precision: gemm in flop/s, the others in B/s.
  std::map<std::pair<KernelClass, Precision>, double> peaks;
  std::map<std::pair<Kernel, Precision>, EfficiencySurface> surfaces;
  // Precisions this host cannot run, measured as another (fp16 as fp32), with the reason.
  std::map<Precision, std::pair<Precision, std::string>> stand_ins;

  // The host's efficiency for a kernel at a shape, relative to the best its class reached,
  // in (0, 1]: a shape that ran faster than the class peak (it stayed in cache) counts as 1.
  double relative_efficiency(Kernel k, Precision p, const KernelShape& s) const;
  // The precision measured for p (p itself unless a stand-in replaces it).
  Precision measured_precision(Precision p) const;
  // Throws ProfileError unless every kernel that runs at p has a surface and a class peak at p (or at
  // the precision its stand-in names); `user` says who needs them (for the message).
  void require_precision(Precision p, const std::string& user) const;
  const EfficiencySurface& surface(Kernel k, Precision p) const;  // throws std::out_of_range
};

// Parses and checks a profile: every kernel at its profiled precisions, every class's peak with its
// unit in its name, complete grids. Throws ProfileError.
HostProfile parse_host_profile(const std::string& json_text, const std::string& file);
HostProfile load_host_profile_file(const std::string& path);
std::string host_profile_json(const HostProfile& p);  // the file's text (deterministic)

// The precisions a profile must cover for a kernel: fp32 and fp64 (fp16 goes through a
// stand-in on hosts without it); Adam only fp32 (its buffers are fp32 master weights).
std::vector<Precision> profiled_precisions(Kernel k);
// The rate a kernel reached at a shape, in its class's unit (flop/s for GEMMs, B/s otherwise):
// nominal_work over the measured time. Efficiencies are this over the class peak.
double achieved_rate(Kernel k, const KernelShape& s, Precision p, double time_s);
// The unit-named key of a class's peak: "peak_flops_per_s" for gemm, "peak_Bps" otherwise.
const char* peak_key(KernelClass c);

}  // namespace exasim
