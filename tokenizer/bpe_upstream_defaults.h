// Upstream (karpathy/autoresearch prepare.py) tokenizer constants: the GPT-4-style split pattern
// with \p{N}{1,2}, the vocabulary size, the four reserved special tokens (BOS = <|reserved_0|>),
// and the per-document cap and total character budget applied while training the tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xv::tok {

// The split pattern, byte for byte as upstream's SPLIT_PATTERN.
inline constexpr char kUpstreamSplitPattern[] =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// Total vocabulary: 256 single bytes + 7932 merges + 4 special tokens.
inline constexpr uint32_t kUpstreamVocabSize = 8192;
inline constexpr int kUpstreamSpecialTokenCount = 4;

// Training reads at most this many characters (Unicode code points) of each document ...
inline constexpr int64_t kUpstreamDocCapChars = 10000;
// ... and stops after the document that brings the total to this many characters.
inline constexpr int64_t kUpstreamMaxChars = 1000000000;

// "<|reserved_0|>" .. "<|reserved_3|>"; the first one is BOS. Special ids follow the ranks:
// special i has id n_ranks + i.
std::vector<std::string> UpstreamSpecialTokens();
inline constexpr char kUpstreamBosToken[] = "<|reserved_0|>";

}  // namespace xv::tok
