// Fixture files of the recipe tests: the reference manifest (XV_REFERENCE_DIR), the shipped recipes
// and docs (XV_SOURCE_DIR). Each accessor fails the calling test (ADD_FAILURE) when a file is
// missing.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace xv::testing {

// Contents of $XV_SOURCE_DIR/<relative_path>; "" (and a test failure) when unreadable.
std::string ReadSourceFile(const std::string& relative_path);
// $XV_REFERENCE_DIR/manifest.json parsed; null (and a test failure) when unreadable.
const nlohmann::json& ReferenceManifest();

}  // namespace xv::testing
