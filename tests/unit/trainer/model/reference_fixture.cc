#include "tests/unit/trainer/model/reference_fixture.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

#include "trainer/checkpoint/safetensors.h"

namespace xv::trainer::testing {

std::string ReferenceDir() {
  if (const char* env = std::getenv("XV_REFERENCE_DIR")) return env;
  if (const char* src = std::getenv("XV_SOURCE_DIR")) return std::string(src) + "/tests/reference";
  return "tests/reference";
}

nlohmann::json LoadManifest() {
  std::ifstream in(ReferenceDir() + "/manifest.json");
  EXPECT_TRUE(in.good()) << "cannot open " << ReferenceDir() << "/manifest.json";
  return nlohmann::json::parse(in);
}

std::map<std::string, torch::Tensor> LoadReferenceTensors(const std::string& file) {
  std::map<std::string, torch::Tensor> out;
  xv::Status st = LoadSafetensors(ReferenceDir() + "/" + file, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void UseAllCores() {
  unsigned n = std::thread::hardware_concurrency();
  at::set_num_threads(n > 0 ? static_cast<int>(n) : 1);
}

}  // namespace xv::trainer::testing
