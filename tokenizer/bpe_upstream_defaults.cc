#include "tokenizer/bpe_upstream_defaults.h"

namespace xv::tok {

std::vector<std::string> UpstreamSpecialTokens() {
  std::vector<std::string> specials;
  for (int i = 0; i < kUpstreamSpecialTokenCount; ++i) {
    specials.push_back("<|reserved_" + std::to_string(i) + "|>");
  }
  return specials;
}

}  // namespace xv::tok
