// Safetensors round trips and clear errors for broken files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/checkpoint/safetensors.h"

namespace xv::trainer {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

TEST(SafetensorsTest, RoundTripKeepsDtypesShapesAndValues) {
  std::map<std::string, torch::Tensor> in = {
      {"a/f32", torch::randn({3, 5})},
      {"b/bf16", torch::randn({4}).to(torch::kBFloat16)},
      {"c/i64", torch::arange(7, torch::kInt64).view({7, 1})},
      {"d/scalar", torch::tensor({2.5f})},
  };
  const std::string path = TempPath("roundtrip");
  ASSERT_TRUE(SaveSafetensors(path, in, {{"format", "pt"}}).ok());
  std::map<std::string, torch::Tensor> out;
  xv::Status st = LoadSafetensors(path, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.size(), in.size());
  for (auto& [k, v] : in) {
    EXPECT_EQ(out[k].scalar_type(), v.scalar_type()) << k;
    EXPECT_EQ(out[k].sizes(), v.sizes()) << k;
    EXPECT_TRUE(torch::equal(out[k], v)) << k;
  }
  std::remove(path.c_str());
}

TEST(SafetensorsTest, ReadsTheReferenceFiles) {
  std::map<std::string, torch::Tensor> t;
  ASSERT_TRUE(LoadSafetensors(testing::ReferenceDir() + "/gpt_tiny_gqa.safetensors", &t).ok());
  EXPECT_EQ(t.at("input/idx").scalar_type(), torch::kInt64);
  EXPECT_EQ(t.at("output/logits").sizes(), (std::vector<int64_t>{2, 24, 80}));
  EXPECT_EQ(t.at("param/value_embeds.1.weight").sizes(), (std::vector<int64_t>{80, 32}));
}

TEST(SafetensorsTest, TruncatedFileNamesFileTensorAndOffset) {
  const std::string path = TempPath("truncated");
  ASSERT_TRUE(SaveSafetensors(path, {{"w", torch::ones({64})}}).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  std::map<std::string, torch::Tensor> out;
  xv::Status st = LoadSafetensors(path, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'w'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("offset"), std::string::npos) << st.message();
  std::remove(path.c_str());
}

TEST(SafetensorsTest, GarbageHeaderIsRejected) {
  const std::string path = TempPath("garbage");
  {
    std::ofstream f(path, std::ios::binary);
    uint64_t len = 5;
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << "{nope";
  }
  std::map<std::string, torch::Tensor> out;
  xv::Status st = LoadSafetensors(path, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("header JSON"), std::string::npos) << st.message();
  std::remove(path.c_str());
  EXPECT_EQ(LoadSafetensors(path, &out).code(), xv::Status::Code::kNotFound);
}

// Headers lying about shapes (found while writing tests/fuzz): a product of dimensions that
// overflows 64 bits wrapped to 0 elements, passed the size check against empty data_offsets and
// reached torch::empty; a shape that is not an array was read as its values.
TEST(SafetensorsTest, HeaderWithOverflowingOrNonArrayShapeIsRefused) {
  const std::string path = TempPath("lying-shape");
  auto write_header = [&](const std::string& header) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header;
  };
  std::map<std::string, torch::Tensor> out;
  for (const std::string shape :
       {"[4294967296,4294967296]", "[0,4611686018427387904,4611686018427387904]",
        "[4611686018427387904]"}) {
    write_header(R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,0]}})");
    xv::Status st;
    ASSERT_NO_THROW(st = LoadSafetensors(path, &out)) << shape;
    EXPECT_EQ(st.code(), xv::Status::Code::kDataLoss) << shape;
    EXPECT_NE(st.message().find("tensor 'w': shape " + shape), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("64 bits"), std::string::npos) << st.message();
  }
  write_header(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})");
  xv::Status st = LoadSafetensors(path, &out);
  EXPECT_EQ(st.code(), xv::Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("shape is not an array"), std::string::npos) << st.message();
  EXPECT_TRUE(out.empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace xv::trainer
