// Device discovery: asks the trainer for the fingerprint of the device this worker drives
// (`<trainer> fingerprint --device cpu|cuda`, one JSON object on stdout, see docs/events.md) and
// turns it into a v1::Device. When the trainer cannot tell (missing, crashes, prints no JSON) the
// worker still registers, with a minimal CPU fingerprint built from /proc/cpuinfo and uname.
// Thread-safety: functions without shared state.
#pragma once

#include <string>

#include "worker/attempt_runner.h"
#include "worker/child_process.h"
#include "xv/v1/types.pb.h"

namespace xv::worker {

// Fills *device from a fingerprint JSON object: the proto's field names, or xv-train's
// (driver_version, runtime_version, libtorch_version, env). vendor is normalised to nvidia | amd |
// cpu from the backend; hostname defaults to this host's. Unknown keys are ignored; the text is
// kept verbatim in fingerprint_json. Fails when `json_text` is not a JSON object or has no name.
Status DeviceFromFingerprintJson(const std::string& json_text, v1::Device* device);

// The fallback: name "cpu: <model name>", vendor/backend cpu, index -1, hostname, os.
v1::Device MinimalCpuDevice();

// Runs the trainer's fingerprint subcommand (at most timeout_s) and parses its output; on any
// failure logs a warning and returns MinimalCpuDevice() (with index set for a GPU worker).
v1::Device DiscoverDevice(const TrainerInvocation& inv, ProcessLauncher* launcher,
                          double timeout_s = 120.0);

}  // namespace xv::worker
