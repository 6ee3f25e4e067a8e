#include "trainer/train/recipe_loader.h"

#include <fstream>
#include <sstream>

namespace xv::trainer {

namespace {

Status ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot open recipe file");
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

}  // namespace

Status LoadRecipe(const std::string& yaml_path, const std::string& json_path,
                  const std::vector<std::string>& sets, Recipe* out) {
  if (yaml_path.empty() == json_path.empty()) {
    return Status::InvalidArgument(
        "recipe: give exactly one of --recipe FILE.yaml or --recipe-json FILE.json");
  }
  Recipe r;
  std::string text;
  if (!yaml_path.empty()) {
    XV_RETURN_IF_ERROR(ReadFile(yaml_path, &text));
    XV_RETURN_IF_ERROR(ParseRecipeYaml(text, &r).WithContext(yaml_path + ": "));
  } else {
    XV_RETURN_IF_ERROR(ReadFile(json_path, &text));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument(json_path + ": not valid JSON: " + e.what());
    }
    // A spec file may wrap the recipe: {"recipe": {...}, ...}.
    if (j.is_object() && j.contains("recipe") && j["recipe"].is_object()) j = j["recipe"];
    XV_RETURN_IF_ERROR(ParseRecipeJson(j, &r).WithContext(json_path + ": "));
  }
  for (const auto& kv : sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--set: expected KEY=VALUE, got '" + kv + "'");
    }
    XV_RETURN_IF_ERROR(
        ApplyOverride(kv.substr(0, eq), kv.substr(eq + 1), &r).WithContext("--set " + kv + ": "));
  }
  XV_RETURN_IF_ERROR(ValidateRecipe(r));
  *out = r;
  return Status::Ok();
}

}  // namespace xv::trainer
