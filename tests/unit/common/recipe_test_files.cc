#include "recipe_test_files.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace xv::testing {

namespace {

std::string EnvDir(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? v : fallback;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path << " (run through ctest, or set the XV_* variables)";
    return "";
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string ReadSourceFile(const std::string& relative_path) {
  return ReadFile(EnvDir("XV_SOURCE_DIR", ".") + "/" + relative_path);
}

const nlohmann::json& ReferenceManifest() {
  static const nlohmann::json manifest = [] {
    const std::string text =
        ReadFile(EnvDir("XV_REFERENCE_DIR", "tests/reference") + "/manifest.json");
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
  }();
  return manifest;
}

}  // namespace xv::testing
