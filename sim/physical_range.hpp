// The physical ranges of a machine's numbers that the engine accepts. Numbers are checked for
// their meaning, not only their sign: SimGrid's max-min solver aborts on a denormal bandwidth
// (1e-320 B/s), and its clock crashes or never ends on astronomic latencies or durations
// (1e308 s, 1e300 s). Each range is generous around every machine built so far and says so.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

namespace exasim {

struct PhysicalRange {
  double min = 0;
  double max = 0;
  const char* unit = "";
  const char* meaning = "";  // the range in words, for messages
  bool zero_allowed = false;  // 0 means "none" (a latency that is not modelled)

  bool contains(double x) const {
    return std::isfinite(x) && ((zero_allowed && x == 0) || (x >= min && x <= max));
  }
  // "a number between 1e+06 and 1e+15 B/s (1 MB/s to 1 PB/s per link ...)"
  std::string describe() const;
};

// One link of a machine file, per direction (NVLink, a NIC, a torus link, a node's injection).
inline constexpr PhysicalRange kLinkBandwidthRange{
    1e6, 1e15, "B/s", "1 MB/s to 1 PB/s per link: a thousand times the fastest link built", false};
// A link the machine builder derives by aggregating many (a supernode's or a spine group's uplink).
inline constexpr PhysicalRange kSharedLinkBandwidthRange{
    1e6, 1e18, "B/s", "1 MB/s to 1 EB/s for a link shared by a group of devices", false};
// One hop's latency: 0 (not modelled) or from a picosecond to a second.
inline constexpr PhysicalRange kLatencyRange{1e-12, 1, "s", "0, or 1 ps to 1 s per hop", true};
inline constexpr PhysicalRange kMessageOverheadRange{1e-12, 1, "s", "0, or 1 ps to 1 s per message", true};
inline constexpr PhysicalRange kEagerLimitRange{1, 1e9, "bytes", "1 byte to 1 GB per message", false};
// A device's peak rate and achieved memory bandwidths.
inline constexpr PhysicalRange kDeviceFlopRateRange{
    1e6, 1e18, "flop/s", "1 Mflop/s to 1 Eflop/s per device", false};
inline constexpr PhysicalRange kDeviceBandwidthRange{
    1e6, 1e15, "B/s", "1 MB/s to 1 PB/s per device", false};
inline constexpr PhysicalRange kRandomWordOpsRange{1, 1e4, "operations", "1 to 10,000 vector operations per 32-bit random word", false};
inline constexpr PhysicalRange kDeviceMemoryRange{1e6, 1e15, "bytes", "1 MB to 1 PB per device", false};

inline std::string PhysicalRange::describe() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g and %g", min, max);
  return std::string(zero_allowed ? "0 or a number between " : "a number between ") + buf + " " + unit + " (" +
         meaning + ")";
}

}  // namespace exasim
