// The HealthSummary of an attempt as the v1::DeviceHealth the worker sends with Finished.
// Thread-safety: pure function.
#pragma once

#include "worker/device_health/health_accumulator.h"
#include "xv/v1/types.pb.h"

namespace xv::worker::device_health {

// Optional figures that were not measured stay unset in `out`.
void HealthSummaryToProto(const HealthSummary& h, v1::DeviceHealth* out);

}  // namespace xv::worker::device_health
