// The cost model used by `run`: a compute kernel's time on the target device is its work at
// the device's published best-case rate, scaled by the host's relative efficiency for the
// same kernel at the same shape:
//   GEMM:          flops / (device peak x best-case GEMM efficiency x host relative efficiency)
//   memory-bound:  bytes / (device bandwidth x host relative efficiency)
//   optimizer:     bytes / (device optimizer bandwidth x host relative efficiency)
//   offload:       bytes / host link or host memory bandwidth (data movement, not sampled)
// (and never faster than the roofline's other bound). The host's relative efficiency is 1 at the
// shapes where the host's kernels reach their best, so large shapes run at the device's published
// best case and small, skinny or odd shapes lose what they lose on the host. A device whose file
// describes its systolic matrix unit (a TPU's MXU) takes a GEMM's shape efficiency from the unit
// instead (DeviceProfile::matrix_unit_utilisation), not also from the host.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "costs/host_profile.hpp"
#include "sim/cost_model.hpp"

namespace exasim {

// Where the host's relative efficiency comes from (a calibrated profile, or samples taken now).
class HostEfficiency {
 public:
  virtual ~HostEfficiency() = default;
  // In (0, 1].
  virtual double relative(Kernel k, Precision p, const KernelShape& s) const = 0;
  virtual std::string describe() const = 0;
  // Throws ProfileError when kernels at precision p have no figures to answer from; `user` names
  // who needs them. Checked before anything is built (app/pipeline.cpp). The default: a source that
  // answers at every precision (test doubles).
  virtual void require_precision(Precision p, const std::string& user) const {
    (void)p;
    (void)user;
  }
};

// Interpolated on a calibrated profile's surfaces.
class ProfileEfficiency final : public HostEfficiency {
 public:
  explicit ProfileEfficiency(std::shared_ptr<const HostProfile> profile) : profile_(std::move(profile)) {}
  double relative(Kernel k, Precision p, const KernelShape& s) const override {
    return profile_->relative_efficiency(k, p, s);
  }
  std::string describe() const override;
  void require_precision(Precision p, const std::string& user) const override { profile_->require_precision(p, user); }
  const HostProfile& profile() const { return *profile_; }

 private:
  std::shared_ptr<const HostProfile> profile_;
};

// Another source's answers, each asked once per (kernel, precision, shape) and kept: a sweep's plans
// share their layers' few distinct shapes, so each is interpolated (or sampled) once for the whole
// sweep instead of once per op of every plan. The same numbers as the source's, bit for bit.
class MemoizedEfficiency final : public HostEfficiency {
 public:
  explicit MemoizedEfficiency(std::shared_ptr<const HostEfficiency> source);
  double relative(Kernel k, Precision p, const KernelShape& s) const override;
  std::string describe() const override { return source_->describe(); }
  void require_precision(Precision p, const std::string& user) const override { source_->require_precision(p, user); }
  size_t distinct_shapes() const;

 private:
  using Key = std::array<std::int64_t, 6>;  // kernel, precision, dims, batch
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  std::shared_ptr<const HostEfficiency> source_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<Key, double, KeyHash> known_;
};

class ProfileCostModel final : public CostModel {
 public:
  ProfileCostModel(DeviceProfile device, std::shared_ptr<const HostEfficiency> host);
  double compute_time_s(const ComputeWork& w) const override;
  double compute_time_beside_s(const ComputeWork& w, int communication_sms) const override {
    return compute_time_s(device_.beside_communication(w, communication_sms));
  }
  std::string describe() const override;
  const DeviceProfile& device() const { return device_; }

 private:
  KernelShape host_lookup_shape(const ComputeWork& w, bool half_gemm) const;
  DeviceProfile device_;
  std::shared_ptr<const HostEfficiency> host_;
};

}  // namespace exasim
