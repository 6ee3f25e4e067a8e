#include "worker/device_health/health_source.h"

#include "worker/device_health/hwmon_source.h"
#include "worker/device_health/nvml_source.h"

namespace xv::worker::device_health {
namespace {

class NoHealthSource final : public HealthSource {
 public:
  explicit NoHealthSource(std::string description) : description_(std::move(description)) {}
  std::string kind() const override { return "none"; }
  std::string description() const override { return description_; }
  Status Read(HealthSample*) override {
    return Status::Unavailable("no health source: " + description_);
  }

 private:
  const std::string description_;
};

}  // namespace

std::unique_ptr<HealthSource> NewNoHealthSource(std::string description) {
  return std::make_unique<NoHealthSource>(std::move(description));
}

std::unique_ptr<HealthSource> OpenHealthSource(const HealthSourceOptions& o,
                                               std::string* why_none) {
  auto none = [&](const std::string& why) {
    if (why_none) *why_none = why;
    return NewNoHealthSource(why);
  };
  std::string kind = o.source;
  if (kind == "auto") {
    kind = o.vendor == "nvidia" ? "nvml" : o.vendor == "amd" ? "hwmon" : "none";
  }
  if (kind == "none") {
    return none(o.source == "none" ? "--health-source none"
                                   : "no health source for a " + o.vendor + " device");
  }
  const int index = o.device_index < 0 ? 0 : o.device_index;
  std::unique_ptr<HealthSource> src;
  Status st;
  if (kind == "nvml") {
    st = OpenNvmlSource(o.nvml_library, index, o.device_name, &src);
  } else if (kind == "hwmon") {
    st = OpenHwmonSource(o.sysfs_root, index, &src);
  } else {
    st = Status::InvalidArgument("--health-source: expected auto, nvml, hwmon or none, got '" +
                                 o.source + "'");
  }
  if (!st.ok()) return none(st.message());
  return src;
}

}  // namespace xv::worker::device_health
