#include "worker/device_health/device_health_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace xv::worker::device_health {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Sampling::Sampling(HealthSource* source, double interval_s)
    : source_(source), interval_s_(interval_s > 0.01 ? interval_s : 0.01), acc_(source->kind()) {
  if (source_->kind() != "none") thread_ = std::thread([this] { Loop(); });
}

Sampling::~Sampling() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampling::TakeSample() {
  HealthSample s;
  s.t_s = SteadySeconds();
  if (source_->Read(&s).ok()) {
    acc_.Add(s);
  } else {
    acc_.AddError();
  }
}

void Sampling::Loop() {
  auto next = std::chrono::steady_clock::now();
  while (true) {
    TakeSample();
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(interval_s_));
    MutexLock lock(&mu_);
    if (cv_.wait_until(mu_, next, [&] {
          mu_.AssertHeld();
          return stop_;
        })) {
      return;
    }
  }
}

HealthSummary Sampling::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    TakeSample();  // the end of the run, so energy covers it whole
  }
  return acc_.Summary();
}

DeviceHealthMonitor::DeviceHealthMonitor(std::unique_ptr<HealthSource> source,
                                         MonitorOptions options)
    : source_(std::move(source)), options_(options) {}

std::unique_ptr<Sampling> DeviceHealthMonitor::StartSampling() {
  return std::make_unique<Sampling>(source_.get(), options_.interval_s);
}

DeviceHealthMonitor::GuardResult DeviceHealthMonitor::WaitUntilCool(
    const std::function<bool()>& cancelled, const std::string& label) {
  GuardResult r;
  if (source_->kind() == "none") return r;
  const double t0 = SteadySeconds();
  double next_log = t0;
  while (true) {
    HealthSample s;
    r.start_temp_c.reset();
    if (source_->Read(&s).ok()) r.start_temp_c = s.temp_c;
    r.waited_s = SteadySeconds() - t0;
    if (options_.max_start_temp_c <= 0 || !r.start_temp_c ||
        *r.start_temp_c <= options_.max_start_temp_c) {
      if (r.waited_s > 0.5) {
        spdlog::info("{}: device at {:.0f} C after {:.0f} s; starting", label,
                     r.start_temp_c.value_or(-1), r.waited_s);
      }
      return r;
    }
    if (r.waited_s >= options_.max_start_wait_s) {
      spdlog::warn(
          "{}: device still at {:.0f} C (above --max-start-temp {:.0f}) after {:.0f} s; "
          "starting anyway",
          label, *r.start_temp_c, options_.max_start_temp_c, r.waited_s);
      r.gave_up = true;
      return r;
    }
    if (SteadySeconds() >= next_log) {
      spdlog::info(
          "{}: device at {:.0f} C, above --max-start-temp {:.0f}; waiting (at most {:.0f} "
          "s more)",
          label, *r.start_temp_c, options_.max_start_temp_c,
          options_.max_start_wait_s - r.waited_s);
      next_log = SteadySeconds() + 30;
    }
    const double until =
        SteadySeconds() + std::min(options_.poll_s, options_.max_start_wait_s - r.waited_s);
    while (SteadySeconds() < until) {
      if (cancelled()) {
        r.cancelled = true;
        r.waited_s = SteadySeconds() - t0;
        return r;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace xv::worker::device_health
