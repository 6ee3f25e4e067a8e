#include "worker/device_health/hwmon_source.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace xv::worker::device_health {
namespace {

namespace fs = std::filesystem;

// The first whitespace-separated number of a sysfs file; nullopt when missing or not a number.
std::optional<double> ReadNumber(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string text;
  f >> text;
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  return v;
}

std::string ReadWord(const std::string& path) {
  std::ifstream f(path);
  std::string text;
  if (f) f >> text;
  return text;
}

class HwmonSource final : public HealthSource {
 public:
  HwmonSource(std::string device_dir, std::string hwmon_dir)
      : device_dir_(std::move(device_dir)), hwmon_dir_(std::move(hwmon_dir)) {}
  std::string kind() const override { return "hwmon"; }
  std::string description() const override { return hwmon_dir_; }

  Status Read(HealthSample* s) override {
    std::optional<double> uw = ReadNumber(hwmon_dir_ + "/power1_average");
    if (!uw) uw = ReadNumber(hwmon_dir_ + "/power1_input");
    if (uw) s->power_w = *uw / 1e6;
    if (auto uj = ReadNumber(hwmon_dir_ + "/energy1_input")) s->energy_counter_j = *uj / 1e6;
    std::optional<double> mc = ReadNumber(hwmon_dir_ + "/temp2_input");
    if (!mc) mc = ReadNumber(hwmon_dir_ + "/temp1_input");
    if (mc) s->temp_c = *mc / 1000.0;
    if (auto hz = ReadNumber(hwmon_dir_ + "/freq1_input")) s->sm_clock_mhz = *hz / 1e6;
    if (auto busy = ReadNumber(device_dir_ + "/gpu_busy_percent")) s->busy_percent = *busy;
    if (auto bytes = ReadNumber(device_dir_ + "/mem_info_vram_used")) {
      s->mem_used_mib = *bytes / 1048576.0;
    }
    if (!s->power_w && !s->temp_c) {
      return Status::Unavailable(hwmon_dir_ + ": neither power1_average/power1_input nor " +
                                 "temp1_input/temp2_input is readable");
    }
    return Status::Ok();
  }

 private:
  const std::string device_dir_;
  const std::string hwmon_dir_;
};

}  // namespace

std::vector<std::string> ListAmdCardDevices(const std::string& sysfs_root) {
  std::vector<std::pair<long, std::string>> cards;
  std::error_code ec;
  const fs::path drm = fs::path(sysfs_root) / "class" / "drm";
  for (fs::directory_iterator it(drm, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // cardK only; connectors (card0-DP-1) and render nodes are skipped.
    if (name.size() <= 4 || name.rfind("card", 0) != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos) {
      continue;
    }
    const std::string device = (it->path() / "device").string();
    if (ReadWord(device + "/vendor") != "0x1002") continue;
    cards.emplace_back(std::strtol(name.c_str() + 4, nullptr, 10), device);
  }
  std::sort(cards.begin(), cards.end());
  std::vector<std::string> out;
  for (auto& c : cards) out.push_back(std::move(c.second));
  return out;
}

Status OpenHwmonSource(const std::string& sysfs_root, int index,
                       std::unique_ptr<HealthSource>* out) {
  std::vector<std::string> cards = ListAmdCardDevices(sysfs_root);
  if (index < 0 || index >= static_cast<int>(cards.size())) {
    return Status::NotFound(sysfs_root + "/class/drm: no AMD card for device " +
                            std::to_string(index) + " (found " + std::to_string(cards.size()) +
                            ")");
  }
  const std::string& device = cards[index];
  std::vector<std::string> hwmons;
  std::error_code ec;
  for (fs::directory_iterator it(device + "/hwmon", ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("hwmon", 0) == 0) hwmons.push_back(it->path());
  }
  if (hwmons.empty()) return Status::NotFound(device + "/hwmon: no hwmon directory");
  std::sort(hwmons.begin(), hwmons.end());
  *out = std::make_unique<HwmonSource>(device, hwmons.front());
  return Status::Ok();
}

}  // namespace xv::worker::device_health
