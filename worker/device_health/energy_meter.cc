#include "worker/device_health/energy_meter.h"

namespace xv::worker::device_health {

void EnergyMeter::Add(double t_s, std::optional<double> power_w, std::optional<double> counter_j) {
  if (power_w) {
    if (power_readings_++ == 0) first_power_w_ = *power_w;
    if (last_power_t_ && t_s >= *last_power_t_) {
      const double dt = t_s - *last_power_t_;
      integrated_j_ += 0.5 * (*power_w + *last_power_w_) * dt;
      integrated_s_ += dt;
    }
    last_power_t_ = t_s;
    last_power_w_ = power_w;
  }
  if (counter_j) {
    if (last_counter_t_ && t_s >= *last_counter_t_) {
      const double dt = t_s - *last_counter_t_;
      double delta = *counter_j - *last_counter_j_;
      if (delta < 0) {
        const double wrapped =
            counter_range_j_ ? *counter_j + *counter_range_j_ - *last_counter_j_ : -1.0;
        if (counter_range_j_ && wrapped >= 0 && wrapped < *counter_range_j_ / 2) {
          delta = wrapped;
          ++wraps_;
        } else {
          // Reset (driver reload, counter cleared): what this interval used is unknown to the
          // counter; take it from power when both ends have a reading.
          ++resets_;
          delta = (power_w && last_counter_power_w_)
                      ? 0.5 * (*power_w + *last_counter_power_w_) * dt
                      : 0.0;
        }
      }
      counter_j_ += delta;
      counter_s_ += dt;
      ++counter_intervals_;
    }
    last_counter_t_ = t_s;
    last_counter_j_ = counter_j;
    last_counter_power_w_ = power_w;
  }
}

std::optional<double> EnergyMeter::energy_j() const {
  if (counter_intervals_ > 0) return counter_j_;
  if (power_readings_ >= 2 && integrated_s_ > 0) return integrated_j_;
  return std::nullopt;
}

std::string EnergyMeter::method() const {
  if (counter_intervals_ > 0) return "counter";
  if (power_readings_ >= 2 && integrated_s_ > 0) return "integrated";
  return "";
}

double EnergyMeter::covered_seconds() const {
  if (counter_intervals_ > 0) return counter_s_;
  return integrated_s_;
}

std::optional<double> EnergyMeter::average_power_w() const {
  std::optional<double> e = energy_j();
  if (e && covered_seconds() > 0) return *e / covered_seconds();
  if (power_readings_ == 1) return first_power_w_;
  return std::nullopt;
}

}  // namespace xv::worker::device_health
