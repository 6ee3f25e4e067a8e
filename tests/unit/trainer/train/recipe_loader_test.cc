// xv-train's recipe loading: YAML or the worker's JSON spec, --set overrides in order, errors
// naming the file or the field.
#include "trainer/train/recipe_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace xv::trainer {
namespace {

namespace fs = std::filesystem;

class RecipeLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("xv_recipe_loader_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(RecipeLoaderTest, YamlThenOverridesInOrder) {
  std::string path = Write("r.yaml", "depth: 4\nmatrix_lr: 0.02\n");
  Recipe r;
  Status s = LoadRecipe(path, "", {"matrix_lr=0.03", "depth=6", "matrix_lr=0.05"}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.depth, 6);
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.05);
}

TEST_F(RecipeLoaderTest, JsonSpecPlainOrWrapped) {
  Recipe base;
  base.depth = 3;
  base.window_pattern = "SL";
  nlohmann::json j = RecipeToJson(base);
  Recipe r;
  ASSERT_TRUE(LoadRecipe("", Write("plain.json", j.dump()), {}, &r).ok());
  EXPECT_EQ(r.depth, 3);
  EXPECT_EQ(r.window_pattern, "SL");
  nlohmann::json wrapped = {{"recipe", j}, {"experiment_id", 7}};
  Recipe r2;
  ASSERT_TRUE(LoadRecipe("", Write("wrapped.json", wrapped.dump()), {"depth=5"}, &r2).ok());
  EXPECT_EQ(r2.depth, 5);
}

TEST_F(RecipeLoaderTest, ErrorsNameTheFileOrField) {
  Recipe r;
  Status s = LoadRecipe("", "", {}, &r);
  EXPECT_FALSE(s.ok());
  std::string yaml = Write("r.yaml", "depth: 4\n");
  s = LoadRecipe(yaml, Write("r.json", "{}"), {}, &r);
  EXPECT_FALSE(s.ok());
  s = LoadRecipe(yaml, "", {"matrix_lr"}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("KEY=VALUE"), std::string::npos) << s.message();
  s = LoadRecipe(yaml, "", {"matrix_lr=-1"}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("matrix_lr"), std::string::npos) << s.message();
  s = LoadRecipe((dir_ / "missing.yaml").string(), "", {}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.yaml"), std::string::npos) << s.message();
  s = LoadRecipe("", Write("bad.json", "{not json"), {}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.json"), std::string::npos) << s.message();
  s = LoadRecipe(Write("unknown.yaml", "depht: 4\n"), "", {}, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("depht"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace xv::trainer
