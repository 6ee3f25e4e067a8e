// Loads the upstream reference tokenizer (tokenizer_ref.tiktoken + tokenizer_ref.json from
// XV_REFERENCE_DIR) and its test strings for the tokenizer tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"

namespace xv::tok::testing {

inline std::string ReferenceDir() {
  const char* dir = std::getenv("XV_REFERENCE_DIR");
  return dir != nullptr ? dir : "tests/reference";
}

inline nlohmann::json ReadReferenceJson() {
  std::ifstream in(ReferenceDir() + "/tokenizer_ref.json");
  EXPECT_TRUE(in.good()) << "cannot open " << ReferenceDir() << "/tokenizer_ref.json";
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

inline std::unique_ptr<BpeTokenizer> LoadReferenceTokenizer() {
  std::unique_ptr<BpeTokenizer> tok;
  Status st = BpeTokenizer::Load(ReferenceDir() + "/tokenizer_ref.tiktoken",
                                 ReferenceDir() + "/tokenizer_ref.json", &tok);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return tok;
}

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace xv::tok::testing
