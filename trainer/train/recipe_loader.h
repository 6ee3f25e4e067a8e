// Loading a recipe for xv-train: YAML (--recipe) or JSON (--recipe-json, the worker's spec), then
// --set KEY=VALUE overrides in order, then validation and size resolution. Every error names the
// file or the field. Torch-free. Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

#include "common/recipe.h"
#include "common/status.h"

namespace xv::trainer {

// Exactly one of yaml_path / json_path must be non-empty. `sets` are "key=value" strings.
Status LoadRecipe(const std::string& yaml_path, const std::string& json_path,
                  const std::vector<std::string>& sets, Recipe* out);

}  // namespace xv::trainer
