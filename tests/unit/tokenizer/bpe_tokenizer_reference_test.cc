// BpeTokenizer against the upstream reference: tiktoken's encode_ordinary ids for every test string
// of tokenizer_ref.json, round trips, token byte lengths, and the long-chunk merge path.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "reference_fixture.h"
#include "tokenizer/bpe_upstream_defaults.h"

namespace xv::tok {
namespace {

using testing::LoadReferenceTokenizer;
using testing::ReadReferenceJson;

TEST(BpeTokenizerReference, ShapeMatchesReference) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->n_ranks(), ref["n_ranks"].get<uint32_t>());
  EXPECT_EQ(tok->vocab_size(), ref["n_ranks"].get<uint32_t>() + 4);
  EXPECT_EQ(tok->bos_id(), ref["special_tokens"][ref["bos"].get<std::string>()].get<uint32_t>());
  EXPECT_EQ(tok->pattern(), ref["pattern"].get<std::string>());
  EXPECT_EQ(tok->pattern(), std::string(kUpstreamSplitPattern));
}

TEST(BpeTokenizerReference, EncodeOrdinaryGivesTiktokenIds) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  ASSERT_GE(ref["tests"].size(), 10u);
  for (const auto& t : ref["tests"]) {
    const std::string text = t["text"].get<std::string>();
    const auto expected = t["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(tok->EncodeOrdinary(text), expected) << "text: " << text;
    std::vector<uint32_t> checked;
    ASSERT_TRUE(tok->EncodeOrdinaryChecked(text, &checked).ok());
    EXPECT_EQ(checked, expected) << "text: " << text;
  }
}

TEST(BpeTokenizerReference, DecodeRoundTripsTestStrings) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  for (const auto& t : ref["tests"]) {
    const std::string text = t["text"].get<std::string>();
    std::string decoded;
    ASSERT_TRUE(tok->Decode(t["ids"].get<std::vector<uint32_t>>(), &decoded).ok());
    EXPECT_EQ(decoded, text);
  }
}

TEST(BpeTokenizerReference, TokenByteLengthsMatchReference) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->TokenByteLengths(), ref["token_bytes"].get<std::vector<int32_t>>());
}

// The reference gives " " + "ab"*20 -> [" a", "b", "ab" x 19]; longer chunks take the heap-based
// merge path and must follow the same rule (lowest rank first, leftmost on ties).
TEST(BpeTokenizerReference, LongChunksFollowTheSameMergeOrder) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  std::vector<uint32_t> prefix;
  for (const auto& t : ref["tests"]) {
    const std::string text = t["text"].get<std::string>();
    if (text.rfind("aaaa", 0) == 0) {
      auto ids = t["ids"].get<std::vector<uint32_t>>();
      prefix.assign(ids.begin() + 50, ids.begin() + 52);  // " a", "b"
      ASSERT_EQ(ids.size(), 50u + 2u + 19u);
      const uint32_t ab = ids.back();
      for (int n : {20, 33, 100, 1000}) {
        std::string chunk = " ";
        for (int i = 0; i < n; ++i) chunk += "ab";
        std::vector<uint32_t> expected = prefix;
        expected.insert(expected.end(), n - 1, ab);
        EXPECT_EQ(tok->EncodeOrdinary(chunk), expected) << "n = " << n;
      }
      // 2000 spaces then a letter: whitespace chunks of every length round-trip.
      std::string spaces(2000, ' ');
      std::string decoded;
      ASSERT_TRUE(tok->Decode(tok->EncodeOrdinary(spaces + "x"), &decoded).ok());
      EXPECT_EQ(decoded, spaces + "x");
    }
  }
  EXPECT_EQ(prefix.size(), 2u) << "reference test string 'aaaa... abab...' not found";
}

// tiktoken's byte_pair_merge written the plain way (rank of the concatenated bytes of two adjacent
// parts; lowest rank first, leftmost on ties), over one chunk.
std::vector<uint32_t> PlainBytePairMerge(const BpeTokenizer& tok, const std::string& chunk) {
  if (tok.RankOf(chunk) >= 0) return {static_cast<uint32_t>(tok.RankOf(chunk))};
  std::vector<std::string> parts;
  for (char c : chunk) parts.push_back(std::string(1, c));
  while (parts.size() > 1) {
    int64_t best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const int64_t r = tok.RankOf(parts[i] + parts[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) {
        best = r;
        at = i;
      }
    }
    if (best < 0) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + at + 1);
  }
  std::vector<uint32_t> ids;
  for (const auto& p : parts) ids.push_back(static_cast<uint32_t>(tok.RankOf(p)));
  return ids;
}

// Single chunks (letters only, so the pattern keeps them whole) of 2..300 bytes: both merge paths
// of the tokenizer (short chunks and long chunks) agree with the plain algorithm.
TEST(BpeTokenizerReference, ChunksOfEveryLengthMatchThePlainMergeAlgorithm) {
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  std::mt19937 rng(7);
  const std::string letters = "etaoinshrdlucmfwypvbgkqjxz";
  for (int i = 0; i < 400; ++i) {
    const size_t n = 2 + rng() % 299;
    std::string chunk;
    for (size_t k = 0; k < n; ++k) chunk += letters[std::min<size_t>(rng() % 40, 25)];
    ASSERT_EQ(tok->EncodeOrdinary(chunk), PlainBytePairMerge(*tok, chunk)) << chunk;
    std::string spaces(n, ' ');
    ASSERT_EQ(tok->EncodeOrdinary(spaces), PlainBytePairMerge(*tok, spaces)) << n << " spaces";
  }
}

std::string RandomUnicode(std::mt19937* rng, size_t code_points) {
  // A mix of ASCII, whitespace/newlines, Latin-1, combining marks, CJK, emoji and Arabic digits.
  static const uint32_t kRanges[][2] = {{0x20, 0x7E},   {0x09, 0x0D},     {0xA0, 0xFF},
                                        {0x300, 0x36F}, {0x4E00, 0x4FFF}, {0x1F600, 0x1F64F},
                                        {0x660, 0x669}, {0x2000, 0x206F}, {0x10000, 0x10FFFF}};
  std::string out;
  std::uniform_int_distribution<int> pick(0, 8 + 6);  // weight ASCII higher
  for (size_t i = 0; i < code_points; ++i) {
    int r = pick(*rng);
    if (r > 8) r = 0;
    uint32_t lo = kRanges[r][0], hi = kRanges[r][1];
    uint32_t cp = std::uniform_int_distribution<uint32_t>(lo, hi)(*rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

TEST(BpeTokenizerRoundTrip, RandomUnicodeRoundTrips) {
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  std::mt19937 rng(20260401);
  for (int i = 0; i < 300; ++i) {
    const std::string text = RandomUnicode(&rng, 1 + rng() % 400);
    ASSERT_TRUE(ValidateUtf8(text).ok());
    std::string decoded;
    auto ids = tok->EncodeOrdinary(text);
    ASSERT_TRUE(tok->Decode(ids, &decoded).ok());
    ASSERT_EQ(decoded, text) << "case " << i;
    for (uint32_t id : ids) ASSERT_LT(id, tok->n_ranks());
  }
}

TEST(BpeTokenizerRoundTrip, InvalidUtf8IsRejectedByCheckedAndKeptAsBytesOtherwise) {
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  const std::string text = std::string("ok text ") + "\xE4\xBD" + " more \xFF\xC0\xAF end";
  std::vector<uint32_t> ids;
  Status st = tok->EncodeOrdinaryChecked(text, &ids);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("byte offset 8"), std::string::npos) << st.message();
  std::string decoded;
  ASSERT_TRUE(tok->Decode(tok->EncodeOrdinary(text), &decoded).ok());
  EXPECT_EQ(decoded, text);
  // The valid prefix encodes exactly as on its own.
  auto prefix_ids = tok->EncodeOrdinary("ok text ");
  auto all_ids = tok->EncodeOrdinary(text);
  ASSERT_GE(all_ids.size(), prefix_ids.size());
  EXPECT_TRUE(std::equal(prefix_ids.begin(), prefix_ids.end(), all_ids.begin()));
}

TEST(BpeTokenizerRoundTrip, SpecialTokenTextIsOrdinaryAndDecodeRejectsOutOfRange) {
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  auto ids = tok->EncodeOrdinary("<|reserved_0|>");
  for (uint32_t id : ids) EXPECT_LT(id, tok->n_ranks());
  std::string decoded;
  ASSERT_TRUE(tok->Decode({tok->bos_id()}, &decoded).ok());
  EXPECT_EQ(decoded, "<|reserved_0|>");
  Status st = tok->Decode({1, 2, tok->vocab_size()}, &decoded);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("ids[2]"), std::string::npos) << st.message();
}

TEST(BpeTokenizerRoundTrip, EmptyInputGivesNoIds) {
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->EncodeOrdinary(std::string_view()).empty());
  EXPECT_TRUE(tok->EncodeOrdinary("").empty());
  std::string decoded = "x";
  ASSERT_TRUE(tok->Decode({}, &decoded).ok());
  EXPECT_EQ(decoded, "");
}

TEST(BpeTokenizerLoad, MismatchedMetadataAndBadRanksAreRejected) {
  const std::string dir = ::testing::TempDir();
  const std::string meta_path = dir + "xv_tok_meta_8192.json";
  {
    std::ofstream out(meta_path);
    out << R"({"pattern": "\\s+", "special_tokens": {"<|reserved_0|>": 8188}})";
  }
  std::unique_ptr<BpeTokenizer> tok;
  Status st =
      BpeTokenizer::Load(testing::ReferenceDir() + "/tokenizer_ref.tiktoken", meta_path, &tok);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("8188"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("600 ranks"), std::string::npos) << st.message();
  std::remove(meta_path.c_str());

  // Ranks without every single byte cannot encode arbitrary text.
  st = BpeTokenizer::FromRanks({"a", "b", "ab"}, kUpstreamSplitPattern, {}, &tok);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("byte"), std::string::npos) << st.message();
  // A bad pattern names the offset.
  TokenRanks bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  st = BpeTokenizer::FromRanks(bytes, "(\\p{L}", {}, &tok);
  EXPECT_NE(st.message().find("pattern offset"), std::string::npos) << st.message();
  // Without specials there is no BOS: bos_id() == vocab_size().
  ASSERT_TRUE(BpeTokenizer::FromRanks(bytes, kUpstreamSplitPattern, {}, &tok).ok());
  EXPECT_EQ(tok->bos_id(), tok->vocab_size());
}

TEST(BpeTokenizerRoundTrip, ConcurrentEncodingGivesTheSameIds) {
  auto ref = ReadReferenceJson();
  auto tok = LoadReferenceTokenizer();
  ASSERT_TRUE(tok);
  std::string text;
  for (const auto& t : ref["tests"]) text += t["text"].get<std::string>() + "\n";
  const auto expected = tok->EncodeOrdinary(text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) mismatches[t] += tok->EncodeOrdinary(text) != expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace xv::tok
