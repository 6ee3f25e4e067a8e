// A fixture sysfs tree for the hwmon reader, written by the test under a temp directory: the only
// stand-in for a device in these tests (worker/device_health/hwmon_source.h lists the files). Each
// value is written as the kernel writes it (integers in µW, m°C, Hz, bytes).
// Thread-safety: none; one test thread (values may be rewritten while a sampler reads them: each
// write replaces the file through a rename, so a reader sees the old or the new value whole).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace xv::worker::device_health {

class SysfsFixture {
 public:
  SysfsFixture() {
    root_ = std::filesystem::temp_directory_path() /
            ("xv-sysfs-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(root_);
  }
  ~SysfsFixture() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_.string(); }

  // <root>/class/drm/card<K>/device with `vendor`, and its hwmon/hwmon<M> directory.
  std::string AddCard(int k, const std::string& vendor = "0x1002", int hwmon = 0) {
    const auto dev = root_ / "class" / "drm" / ("card" + std::to_string(k)) / "device";
    std::filesystem::create_directories(dev / "hwmon" / ("hwmon" + std::to_string(hwmon)));
    Write((dev / "vendor").string(), vendor);
    return dev.string();
  }
  static std::string Hwmon(const std::string& device, int hwmon = 0) {
    return device + "/hwmon/hwmon" + std::to_string(hwmon);
  }
  static void Write(const std::string& path, const std::string& value) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << value << "\n";
    std::filesystem::rename(tmp, path);
  }

 private:
  std::filesystem::path root_;
  static inline int counter_ = 0;
};

}  // namespace xv::worker::device_health
