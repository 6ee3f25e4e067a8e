#include "worker/device_health/nvml_source.h"

#include <dlfcn.h>

#include <spdlog/spdlog.h>

namespace xv::worker::device_health {
namespace {

// NVML's C ABI (nvml.h): every call returns nvmlReturn_t (0 = NVML_SUCCESS); a device handle is an
// opaque pointer.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kNvmlClockSm = 1;         // NVML_CLOCK_SM (0 graphics, 2 memory)
struct nvmlMemory_t {                   // bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlClocksThrottleReasons (also nvmlClocksEventReasons in newer headers).
constexpr unsigned long long kReasonSwPowerCap = 0x4ULL;
constexpr unsigned long long kReasonHwSlowdown = 0x8ULL;
constexpr unsigned long long kReasonSwThermal = 0x20ULL;
constexpr unsigned long long kReasonHwThermal = 0x40ULL;
constexpr unsigned long long kReasonHwPowerBrake = 0x80ULL;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using PowerFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using TemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using ClockFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using ThrottleFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);

class NvmlSource final : public HealthSource {
 public:
  ~NvmlSource() override {
    if (shutdown_) shutdown_();
    if (lib_) ::dlclose(lib_);
  }
  std::string kind() const override { return "nvml"; }
  std::string description() const override { return description_; }

  Status Read(HealthSample* s) override {
    unsigned int mw = 0, temp = 0, clock = 0;
    unsigned long long mj = 0, reasons = 0;
    nvmlMemory_t mem{};
    bool any = false;
    if (power_ && power_(dev_, &mw) == kNvmlSuccess) s->power_w = mw / 1000.0, any = true;
    if (energy_ && energy_(dev_, &mj) == kNvmlSuccess) s->energy_counter_j = mj / 1000.0;
    if (temperature_ && temperature_(dev_, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) {
      s->temp_c = temp;
      any = true;
    }
    if (clock_ && clock_(dev_, kNvmlClockSm, &clock) == kNvmlSuccess) s->sm_clock_mhz = clock;
    if (memory_ && memory_(dev_, &mem) == kNvmlSuccess) s->mem_used_mib = mem.used / 1048576.0;
    if (throttle_ && throttle_(dev_, &reasons) == kNvmlSuccess) {
      s->throttle_known = true;
      if (reasons & kReasonSwPowerCap) s->throttle |= kThrottlePowerCap;
      if (reasons & (kReasonSwThermal | kReasonHwThermal)) s->throttle |= kThrottleThermal;
      if (reasons & kReasonHwSlowdown) s->throttle |= kThrottleHwSlowdown;
      if (reasons & kReasonHwPowerBrake) s->throttle |= kThrottlePowerBrake;
    }
    if (!any)
      return Status::Unavailable(description_ + ": NVML returned neither power nor temperature");
    return Status::Ok();
  }

  void* lib_ = nullptr;
  nvmlDevice_t dev_ = nullptr;
  std::string description_;
  ShutdownFn shutdown_ = nullptr;
  PowerFn power_ = nullptr;
  EnergyFn energy_ = nullptr;
  TemperatureFn temperature_ = nullptr;
  ClockFn clock_ = nullptr;
  MemoryFn memory_ = nullptr;
  ThrottleFn throttle_ = nullptr;
};

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

Status OpenNvmlSource(const std::string& library, int index, const std::string& expected_name,
                      std::unique_ptr<HealthSource>* out) {
  if (index < 0) return Status::InvalidArgument("NVML: device index must be >= 0");
  auto src = std::make_unique<NvmlSource>();
  src->lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!src->lib_) {
    const char* err = ::dlerror();
    return Status::Unavailable("cannot load " + library + ": " + (err ? err : "dlopen failed"));
  }
  auto init = Symbol<InitFn>(src->lib_, "nvmlInit_v2");
  auto shutdown = Symbol<ShutdownFn>(src->lib_, "nvmlShutdown");
  auto by_index = Symbol<HandleByIndexFn>(src->lib_, "nvmlDeviceGetHandleByIndex_v2");
  auto error_string = Symbol<ErrorStringFn>(src->lib_, "nvmlErrorString");
  if (!init || !shutdown || !by_index) {
    return Status::Unavailable(library +
                               ": missing nvmlInit_v2, nvmlShutdown or "
                               "nvmlDeviceGetHandleByIndex_v2 (not an NVML library?)");
  }
  auto why = [&](nvmlReturn_t r) {
    const char* e = error_string ? error_string(r) : nullptr;
    return e ? std::string(e) : "NVML error " + std::to_string(r);
  };
  if (nvmlReturn_t r = init(); r != kNvmlSuccess) {
    return Status::Unavailable(library + ": nvmlInit_v2 failed: " + why(r));
  }
  src->shutdown_ = shutdown;
  if (nvmlReturn_t r = by_index(static_cast<unsigned int>(index), &src->dev_); r != kNvmlSuccess) {
    return Status::Unavailable("NVML has no device " + std::to_string(index) + ": " + why(r));
  }
  src->power_ = Symbol<PowerFn>(src->lib_, "nvmlDeviceGetPowerUsage");
  src->energy_ = Symbol<EnergyFn>(src->lib_, "nvmlDeviceGetTotalEnergyConsumption");
  src->temperature_ = Symbol<TemperatureFn>(src->lib_, "nvmlDeviceGetTemperature");
  src->clock_ = Symbol<ClockFn>(src->lib_, "nvmlDeviceGetClockInfo");
  src->memory_ = Symbol<MemoryFn>(src->lib_, "nvmlDeviceGetMemoryInfo");
  src->throttle_ = Symbol<ThrottleFn>(src->lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!src->throttle_) {
    src->throttle_ = Symbol<ThrottleFn>(src->lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  // Energy is a Volta+ feature: probe it once, so older devices integrate power instead.
  unsigned long long mj = 0;
  if (src->energy_ && src->energy_(src->dev_, &mj) != kNvmlSuccess) src->energy_ = nullptr;
  char name[96] = {0};
  auto get_name = Symbol<NameFn>(src->lib_, "nvmlDeviceGetName");
  if (get_name) (void)get_name(src->dev_, name, sizeof(name) - 1);
  src->description_ = "NVML device " + std::to_string(index) + " (" + name + ")";
  if (!expected_name.empty() && name[0] != '\0' && expected_name.find(name) == std::string::npos &&
      std::string(name).find(expected_name) == std::string::npos) {
    spdlog::warn(
        "device health: NVML device {} is '{}' but the trainer reports '{}'; CUDA and NVML may "
        "number devices differently (set CUDA_DEVICE_ORDER=PCI_BUS_ID)",
        index, name, expected_name);
  }
  *out = std::move(src);
  return Status::Ok();
}

}  // namespace xv::worker::device_health
