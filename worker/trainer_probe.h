// TrainerProbe: the worker's measured ceilings of its device (issue 3). At start, before it
// registers, the worker runs `<trainer> probe --device cpu|cuda` (bf16 matmul TFLOP/s, attention
// time, memory bandwidth; trainer/device/device_probe.h) and sends the JSON in Register.probe_json.
// The result is cached in <work dir>/probe-cache.json keyed by the device fingerprint and the
// trainer binary (path, size, modification time), so a restarted worker on the same device with
// the same trainer does not probe again.
// Thread-safety: functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "worker/attempt_runner.h"
#include "worker/child_process.h"
#include "xv/v1/types.pb.h"

namespace xv::worker {

// Runs `<inv.trainer_bin> args...` with the device's visible-devices variables, at most timeout_s
// (then KILLs its group). *out receives stdout; a failure (launch, exit code, signal, timeout)
// carries the last stderr lines.
Status RunTrainerSubcommand(const TrainerInvocation& inv, ProcessLauncher* launcher,
                            const std::vector<std::string>& args, double timeout_s,
                            std::string* out);

// The cache key: the fingerprint JSON and the trainer binary's identity.
std::string ProbeCacheKey(const TrainerInvocation& inv, const v1::Device& device);

// The probe JSON (one line, compact) for this device: from the cache when its key matches, else
// by running the probe (and caching a success). "" on failure, which is logged: the worker then
// registers without a probe. *from_cache (optional) says where it came from.
std::string ObtainDeviceProbe(const TrainerInvocation& inv, ProcessLauncher* launcher,
                              const v1::Device& device, double timeout_s, bool* from_cache);

}  // namespace xv::worker
