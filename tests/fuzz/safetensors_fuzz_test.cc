// Hostile safetensors files: LoadSafetensors on a tiny valid file written by SaveSafetensors (every
// dtype it reads, an empty tensor, metadata) and on mutants of it, for XV_FUZZ_SECONDS (default
// 10 s). Its own binary: it links LibTorch (fuzz_driver.h has the options).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "trainer/checkpoint/safetensors.h"

namespace xv::fuzz {
namespace {

std::string SaveToBytes(const std::map<std::string, torch::Tensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("xv-fuzz-seed-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  EXPECT_TRUE(trainer::SaveSafetensors(path, tensors, metadata).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  std::filesystem::remove(path);
  return buf.str();
}

TEST(SafetensorsFuzz, LoadSafetensors) {
  std::vector<std::string> seeds;
  seeds.push_back(SaveToBytes({{"w", torch::arange(6, torch::kFloat32).reshape({2, 3})},
                               {"b", torch::ones({2}, torch::kBFloat16)},
                               {"i", torch::tensor({-1, 7}, torch::kInt64)},
                               {"m", torch::tensor({true, false, true})},
                               {"e", torch::empty({0, 4}, torch::kFloat16)}},
                              {{"format", "pt"}}));
  seeds.push_back(SaveToBytes({{"x", torch::full({1}, 2.5, torch::kFloat64)},
                               {"y", torch::zeros({3}, torch::kInt8)},
                               {"z", torch::zeros({2}, torch::kUInt8)},
                               {"s", torch::zeros({1}, torch::kInt16)},
                               {"t", torch::zeros({1}, torch::kInt32)}},
                              {}));
  for (const auto& s :
       ReadCorpusDir(std::string(XV_FUZZ_SOURCE_DIR) + "/tests/fuzz/corpus/safetensors")) {
    seeds.push_back(s);
  }
  const std::vector<std::string> dict = {"\"dtype\":",
                                         "\"shape\":",
                                         "\"data_offsets\":",
                                         "\"__metadata__\":",
                                         "\"F32\"",
                                         "\"BF16\"",
                                         "\"BOOL\"",
                                         "\"I64\"",
                                         "\"F8_E4M3\"",
                                         "[]",
                                         "{}",
                                         "null",
                                         "[0,0]",
                                         "[4294967296,4294967296]",
                                         "[4611686018427387904,4]",
                                         "18446744073709551615",
                                         "9223372036854775807",
                                         "-1",
                                         "1e3",
                                         "[[1]]",
                                         "\"\\u0000\"",
                                         ","};
  const FuzzReport report = RunFuzzer("safetensors", FuzzSafetensors, seeds, dict,
                                      FuzzOptions::FromEnv(/*default_seconds=*/10.0));
  EXPECT_EQ(report.failures, 0) << report.first_failure;
  EXPECT_GT(report.inputs, static_cast<int64_t>(seeds.size()));
}

}  // namespace
}  // namespace xv::fuzz
