// EnergyMeter: the energy a device used over a run, from timestamped samples. When the device has
// an energy counter (NVML's total energy, RAPL, hwmon energy1_input) the energy is the sum of the
// differences of consecutive readings: a counter that goes down wrapped (when its range is known
// and the wrapped difference is plausible) or was reset (that interval is then integrated from
// power, or counted as 0 without power readings). Without a counter it integrates power with the
// trapezoid rule between consecutive power readings.
// Thread-safety: none; one owner.
#pragma once

#include <optional>
#include <string>

namespace xv::worker::device_health {

class EnergyMeter {
 public:
  // `counter_range_j`: the value at which the counter wraps to 0 (RAPL's max_energy_range_uj);
  // nullopt when unknown (then every decrease is a reset).
  explicit EnergyMeter(std::optional<double> counter_range_j = std::nullopt)
      : counter_range_j_(counter_range_j) {}

  // Adds a sample taken at t_s (seconds, non-decreasing). Either figure may be absent.
  void Add(double t_s, std::optional<double> power_w, std::optional<double> counter_j);

  // Joules over the run; nullopt when fewer than two samples carried a figure.
  std::optional<double> energy_j() const;
  // "counter", "integrated", or "" when energy_j() is nullopt.
  std::string method() const;
  // Seconds the energy covers (first to last sample that took part).
  double covered_seconds() const;
  // energy_j / covered_seconds; with a single power reading, that reading; nullopt otherwise.
  std::optional<double> average_power_w() const;
  int counter_wraps() const { return wraps_; }
  int counter_resets() const { return resets_; }

 private:
  const std::optional<double> counter_range_j_;
  // Trapezoid over power.
  std::optional<double> last_power_t_, last_power_w_;
  double integrated_j_ = 0, integrated_s_ = 0;
  int power_readings_ = 0;
  double first_power_w_ = 0;
  // Counter.
  std::optional<double> last_counter_t_, last_counter_j_, last_counter_power_w_;
  double counter_j_ = 0, counter_s_ = 0;
  int counter_intervals_ = 0;
  int wraps_ = 0, resets_ = 0;
};

}  // namespace xv::worker::device_health
