// DeviceHealthMonitor: what the worker's attempt runner uses around each attempt.
//   - WaitUntilCool: the thermal guard. Before an attempt starts, when the device is above
//     max_start_temp_c, it polls every poll_s (logging) until it is at or below it, at most
//     max_start_wait_s; then the attempt starts anyway (with a warning): a hot device delays work,
//     it never stalls the queue.
//   - StartSampling / Sampling::Stop: a thread samples the source every interval_s while the
//     trainer runs and summarises the run (HealthAccumulator).
// Thread-safety: one attempt at a time (the executor thread); a Sampling owns its thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>

#include "common/mutex.h"
#include "worker/device_health/health_accumulator.h"
#include "worker/device_health/health_source.h"

namespace xv::worker::device_health {

struct MonitorOptions {
  double interval_s = 0.5;        // sampling period during an attempt (--health-interval)
  double max_start_temp_c = 0;    // thermal guard threshold; <= 0 = off (--max-start-temp)
  double max_start_wait_s = 600;  // the guard gives up after this long (--max-start-wait)
  double poll_s = 5;              // the guard's polling period
};

// One attempt's sampler. Stop (or the destructor) ends the thread.
class Sampling {
 public:
  Sampling(HealthSource* source, double interval_s);
  ~Sampling();
  Sampling(const Sampling&) = delete;
  Sampling& operator=(const Sampling&) = delete;
  // Takes a last sample, stops the thread and returns the summary. Call once.
  HealthSummary Stop();

 private:
  void Loop();
  void TakeSample();
  HealthSource* const source_;
  const double interval_s_;
  HealthAccumulator acc_;  // touched by the thread until it is joined
  Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class DeviceHealthMonitor {
 public:
  DeviceHealthMonitor(std::unique_ptr<HealthSource> source, MonitorOptions options);

  const std::string source_kind() const { return source_->kind(); }
  const std::string description() const { return source_->description(); }
  const MonitorOptions& options() const { return options_; }

  struct GuardResult {
    std::optional<double> start_temp_c;  // the last reading (nullopt: no temperature)
    double waited_s = 0;
    bool cancelled = false;  // `cancelled()` turned true while waiting
    bool gave_up = false;    // still too hot after max_start_wait_s
  };
  // The thermal guard (see above). `cancelled` is polled every ~100 ms. `label` names the attempt
  // in the log lines.
  GuardResult WaitUntilCool(const std::function<bool()>& cancelled, const std::string& label);

  // Starts sampling for one attempt. The monitor must outlive the Sampling.
  std::unique_ptr<Sampling> StartSampling();

 private:
  std::unique_ptr<HealthSource> source_;
  const MonitorOptions options_;
};

}  // namespace xv::worker::device_health
