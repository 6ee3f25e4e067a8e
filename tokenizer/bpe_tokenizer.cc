#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <queue>
#include <unordered_set>

#include "tokenizer/bpe_upstream_defaults.h"
#include "tokenizer/tiktoken_metadata.h"

namespace xv::tok {

namespace {

constexpr uint32_t kNoRank = 0xFFFFFFFFu;

// Open-addressing map from a (left rank, right rank) pair to the rank of the concatenated bytes.
// Key and value share a 16-byte entry so that a probe touches one cache line.
class PairRankTable {
 public:
  void Build(size_t expected) {
    size_t capacity = 16;
    while (capacity < expected * 2 + 16) capacity <<= 1;
    entries_.assign(capacity, Entry{kEmpty, kNoRank});
    mask_ = capacity - 1;
  }
  void Insert(uint32_t left, uint32_t right, uint32_t rank) {
    const uint64_t key = (static_cast<uint64_t>(left) << 32) | right;
    size_t slot = Hash(key) & mask_;
    while (entries_[slot].key != kEmpty && entries_[slot].key != key) slot = (slot + 1) & mask_;
    entries_[slot] = Entry{key, rank};
  }
  uint32_t Find(uint32_t left, uint32_t right) const {
    const uint64_t key = (static_cast<uint64_t>(left) << 32) | right;
    size_t slot = Hash(key) & mask_;
    while (true) {
      const Entry& e = entries_[slot];
      if (e.key == key) return e.rank;
      if (e.key == kEmpty) return kNoRank;
      slot = (slot + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ULL;
  struct Entry {
    uint64_t key;
    uint32_t rank;
  };
  static size_t Hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  std::vector<Entry> entries_;
  size_t mask_ = 0;
};

uint64_t HashBytes(std::string_view bytes) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ bytes.size();
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t word = 0;
    std::memcpy(&word, p, n);
    h = (h ^ word) * 0xc4ceb9fe1a85ec53ULL;
  }
  // Final mix (murmur3's fmix64): the table index takes the low bits, which must depend on every
  // byte.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// Per-thread cache of chunk bytes -> ids: an open-addressing table whose slots are one cache line
// each and hold the chunk and its ids inline, so a hit costs one hash and (usually) one cache miss.
// Chunks longer than kInlineKeyBytes or with more than kInlineIds ids are not cached. Bounded:
// cleared when full.
class ChunkCache {
 public:
  static constexpr size_t kInlineKeyBytes = 22;
  static constexpr size_t kInlineIds = 8;

  ChunkCache() { Reset(1 << 12); }

  // Appends the cached ids of `chunk` to `ids` and returns true, or returns false on a miss.
  bool Lookup(std::string_view chunk, uint64_t hash, std::vector<uint32_t>* ids) const {
    size_t slot = hash & mask_;
    while (true) {
      const Slot& s = slots_[slot];
      if (s.key_len == 0) return false;
      if (s.hash == hash && s.key_len == chunk.size() &&
          std::memcmp(s.key, chunk.data(), chunk.size()) == 0) {
        ids->insert(ids->end(), s.ids, s.ids + s.ids_len);
        return true;
      }
      slot = (slot + 1) & mask_;
    }
  }

  // Caches `chunk` -> ids[0, n) when it fits a slot.
  void Insert(std::string_view chunk, uint64_t hash, const uint32_t* ids, size_t n) {
    if (chunk.size() > kInlineKeyBytes || n > kInlineIds) return;
    if ((used_ + 1) * 2 > slots_.size()) {
      if (slots_.size() < kMaxSlots) {
        Grow();
      } else {
        Reset(slots_.size());
      }
    }
    size_t slot = hash & mask_;
    while (slots_[slot].key_len != 0) slot = (slot + 1) & mask_;
    Slot& s = slots_[slot];
    s.hash = hash;
    s.key_len = static_cast<uint8_t>(chunk.size());
    s.ids_len = static_cast<uint8_t>(n);
    std::memcpy(s.key, chunk.data(), chunk.size());
    std::memcpy(s.ids, ids, n * sizeof(uint32_t));
    ++used_;
  }

 private:
  struct alignas(64) Slot {
    uint64_t hash;
    uint8_t key_len;  // 0 = empty (chunks are never empty)
    uint8_t ids_len;
    char key[kInlineKeyBytes];
    uint32_t ids[kInlineIds];
  };
  static_assert(sizeof(Slot) == 64, "one cache line per slot");
  static constexpr size_t kMaxSlots = 1 << 17;

  void Reset(size_t capacity) {
    slots_.assign(capacity, Slot());
    mask_ = capacity - 1;
    used_ = 0;
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot());
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_len == 0) continue;
      size_t slot = s.hash & mask_;
      while (slots_[slot].key_len != 0) slot = (slot + 1) & mask_;
      slots_[slot] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};
constexpr size_t kMaxCachedChunkBytes = 64;
constexpr size_t kMaxCachesPerThread = 4;

ChunkCache& CacheFor(uint64_t instance_id) {
  thread_local std::unordered_map<uint64_t, std::unique_ptr<ChunkCache>> caches;
  auto it = caches.find(instance_id);
  if (it != caches.end()) return *it->second;
  if (caches.size() >= kMaxCachesPerThread) caches.clear();
  auto& slot = caches[instance_id];
  slot = std::make_unique<ChunkCache>();
  return *slot;
}

}  // namespace

struct BpeTokenizer::Impl {
  std::unordered_map<std::string_view, uint32_t> rank_of_bytes;
  PairRankTable pair_rank;
  uint32_t byte_rank[256];
};

BpeTokenizer::~BpeTokenizer() = default;

Status BpeTokenizer::FromRanks(TokenRanks ranks, std::string pattern,
                               std::vector<std::string> specials,
                               std::unique_ptr<BpeTokenizer>* out, const std::string& bos_token) {
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());
  XV_RETURN_IF_ERROR(SplitPattern::Compile(pattern, &tok->split_));
  tok->ranks_ = std::move(ranks);
  tok->specials_ = std::move(specials);
  tok->impl_ = std::make_unique<Impl>();
  Impl& impl = *tok->impl_;
  const TokenRanks& r = tok->ranks_;
  if (r.size() >= kNoRank - 16) return Status::InvalidArgument("ranks: too many");
  impl.rank_of_bytes.reserve(r.size() * 2);
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].empty())
      return Status::InvalidArgument("ranks: rank " + std::to_string(i) + " is empty");
    if (!impl.rank_of_bytes.emplace(std::string_view(r[i]), static_cast<uint32_t>(i)).second) {
      return Status::InvalidArgument("ranks: rank " + std::to_string(i) +
                                     " duplicates the bytes of rank " +
                                     std::to_string(impl.rank_of_bytes[r[i]]));
    }
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    auto it = impl.rank_of_bytes.find(std::string_view(&c, 1));
    if (it == impl.rank_of_bytes.end()) {
      return Status::InvalidArgument("ranks: byte " + std::to_string(b) +
                                     " is not a token (byte-level BPE needs all 256 bytes)");
    }
    impl.byte_rank[b] = it->second;
  }
  // Every way of writing a token as two tokens: tiktoken looks up the concatenated bytes of two
  // adjacent parts, and both parts are always tokens, so this table answers the same question.
  size_t splits = 0;
  for (const auto& bytes : r) splits += bytes.size() - 1;
  impl.pair_rank.Build(splits);
  for (size_t i = 0; i < r.size(); ++i) {
    const std::string_view bytes = r[i];
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto left = impl.rank_of_bytes.find(bytes.substr(0, k));
      if (left == impl.rank_of_bytes.end()) continue;
      auto right = impl.rank_of_bytes.find(bytes.substr(k));
      if (right == impl.rank_of_bytes.end()) continue;
      impl.pair_rank.Insert(left->second, right->second, static_cast<uint32_t>(i));
    }
  }
  std::unordered_set<std::string> seen;
  for (const auto& s : tok->specials_) {
    if (s.empty()) return Status::InvalidArgument("special tokens: empty name");
    if (!seen.insert(s).second) return Status::InvalidArgument("special tokens: '" + s + "' twice");
  }
  tok->bos_id_ = tok->vocab_size();
  if (!tok->specials_.empty()) {
    const std::string& bos = bos_token.empty() ? tok->specials_.front() : bos_token;
    auto it = std::find(tok->specials_.begin(), tok->specials_.end(), bos);
    if (it == tok->specials_.end()) {
      return Status::InvalidArgument("bos token '" + bos + "' is not a special token");
    }
    tok->bos_id_ = tok->n_ranks() + static_cast<uint32_t>(it - tok->specials_.begin());
  } else if (!bos_token.empty()) {
    return Status::InvalidArgument("bos token '" + bos_token + "' given but there are no specials");
  }
  static std::atomic<uint64_t> next_instance{1};
  tok->instance_id_ = next_instance.fetch_add(1);
  *out = std::move(tok);
  return Status::Ok();
}

Status BpeTokenizer::Load(const std::string& ranks_path, const std::string& meta_json_path,
                          std::unique_ptr<BpeTokenizer>* out) {
  TokenRanks ranks;
  XV_RETURN_IF_ERROR(ReadTiktokenRanks(ranks_path, &ranks));
  std::string pattern = kUpstreamSplitPattern;
  std::vector<std::string> specials = UpstreamSpecialTokens();
  std::string bos = kUpstreamBosToken;
  if (!meta_json_path.empty()) {
    TokenizerMeta meta;
    XV_RETURN_IF_ERROR(ReadTokenizerMeta(meta_json_path, &meta));
    if (meta.n_ranks != ranks.size()) {
      return Status::InvalidArgument(meta_json_path + ": special tokens start at id " +
                                     std::to_string(meta.n_ranks) + " but " + ranks_path +
                                     " holds " + std::to_string(ranks.size()) + " ranks");
    }
    pattern = meta.pattern;
    specials = meta.specials;
    bos = meta.bos;
  }
  Status st = FromRanks(std::move(ranks), pattern, specials, out, bos);
  if (!st.ok()) return st.WithContext(ranks_path + ": ");
  return Status::Ok();
}

int64_t BpeTokenizer::RankOf(std::string_view bytes) const {
  auto it = impl_->rank_of_bytes.find(bytes);
  return it == impl_->rank_of_bytes.end() ? -1 : static_cast<int64_t>(it->second);
}

namespace {

// Byte-pair merge of one chunk with tiktoken's rule (lowest rank first, leftmost on ties).
// Short chunks: a scan per merge, as tiktoken does. Long chunks: a lazy min-heap over a linked
// list.
void MergeSmall(const PairRankTable& table, uint32_t* tokens, size_t n,
                std::vector<uint32_t>* out) {
  // pair_rank[i] = rank of tokens[i] + tokens[i + 1].
  uint32_t pair_rank[kMaxCachedChunkBytes * 2];
  for (size_t i = 0; i + 1 < n; ++i) pair_rank[i] = table.Find(tokens[i], tokens[i + 1]);
  while (n > 1) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (pair_rank[i] < best) {
        best = pair_rank[i];
        at = i;
      }
    }
    if (best == kNoRank) break;
    tokens[at] = best;
    for (size_t i = at + 1; i + 1 < n; ++i) {
      tokens[i] = tokens[i + 1];
      pair_rank[i] = pair_rank[i + 1];
    }
    --n;
    if (at > 0) pair_rank[at - 1] = table.Find(tokens[at - 1], tokens[at]);
    if (at + 1 < n) pair_rank[at] = table.Find(tokens[at], tokens[at + 1]);
  }
  out->insert(out->end(), tokens, tokens + n);
}

void MergeLarge(const PairRankTable& table, const uint32_t* byte_rank, std::string_view chunk,
                std::vector<uint32_t>* out) {
  const size_t n = chunk.size();
  std::vector<uint32_t> token(n), next(n), prev(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    token[i] = byte_rank[static_cast<unsigned char>(chunk[i])];
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = static_cast<uint32_t>(i - 1);  // wraps for i == 0; never read there
  }
  struct Candidate {
    uint32_t rank, left, right, left_token, right_token;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](uint32_t left) {
    const uint32_t right = next[left];
    if (right >= n) return;
    const uint32_t rank = table.Find(token[left], token[right]);
    if (rank != kNoRank) heap.push({rank, left, right, token[left], token[right]});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        token[c.left] != c.left_token || token[c.right] != c.right_token) {
      continue;
    }
    token[c.left] = c.rank;
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    if (c.left > 0) push(prev[c.left]);
    push(c.left);
  }
  for (size_t i = 0; i < n; i = next[i]) out->push_back(token[i]);
}

}  // namespace

void BpeTokenizer::EncodeChunk(std::string_view chunk, void* cache_ptr,
                               std::vector<uint32_t>* ids) const {
  const Impl& impl = *impl_;
  if (chunk.size() == 1) {
    ids->push_back(impl.byte_rank[static_cast<unsigned char>(chunk[0])]);
    return;
  }
  if (chunk.size() > kMaxCachedChunkBytes) {
    auto whole = impl.rank_of_bytes.find(chunk);
    if (whole != impl.rank_of_bytes.end()) {
      ids->push_back(whole->second);
    } else {
      MergeLarge(impl.pair_rank, impl.byte_rank, chunk, ids);
    }
    return;
  }
  auto& cache = *static_cast<ChunkCache*>(cache_ptr);
  const uint64_t hash = HashBytes(chunk);
  if (cache.Lookup(chunk, hash, ids)) return;
  const size_t before = ids->size();
  auto whole = impl.rank_of_bytes.find(chunk);
  if (whole != impl.rank_of_bytes.end()) {
    ids->push_back(whole->second);
  } else {
    uint32_t tokens[kMaxCachedChunkBytes];
    for (size_t i = 0; i < chunk.size(); ++i) {
      tokens[i] = impl.byte_rank[static_cast<unsigned char>(chunk[i])];
    }
    MergeSmall(impl.pair_rank, tokens, chunk.size(), ids);
  }
  cache.Insert(chunk, hash, ids->data() + before, ids->size() - before);
}

void BpeTokenizer::EncodeValidUtf8(std::string_view text, std::vector<uint32_t>* ids) const {
  ChunkCache* cache = &CacheFor(instance_id_);
  split_->ForEach(text, [&](std::string_view chunk) { EncodeChunk(chunk, cache, ids); });
}

void BpeTokenizer::EncodeOrdinaryAppend(std::string_view text, std::vector<uint32_t>* ids) const {
  while (!text.empty()) {
    size_t bad = 0;
    if (ValidateUtf8(text, &bad).ok()) {
      EncodeValidUtf8(text, ids);
      return;
    }
    EncodeValidUtf8(text.substr(0, bad), ids);
    // Emit the invalid bytes (up to the next byte that can start a valid sequence) one by one.
    size_t end = bad + 1;
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    for (size_t i = bad; i < end; ++i) {
      ids->push_back(impl_->byte_rank[static_cast<unsigned char>(text[i])]);
    }
    text.remove_prefix(end);
  }
}

std::vector<uint32_t> BpeTokenizer::EncodeOrdinary(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeOrdinaryAppend(text, &ids);
  return ids;
}

Status BpeTokenizer::EncodeOrdinaryChecked(std::string_view text,
                                           std::vector<uint32_t>* ids) const {
  ids->clear();
  XV_RETURN_IF_ERROR(ValidateUtf8(text));
  EncodeValidUtf8(text, ids);
  return Status::Ok();
}

Status BpeTokenizer::Decode(const std::vector<uint32_t>& ids, std::string* bytes) const {
  bytes->clear();
  const uint32_t n = n_ranks();
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id < n) {
      bytes->append(ranks_[id]);
    } else if (id < vocab_size()) {
      bytes->append(specials_[id - n]);
    } else {
      return Status::InvalidArgument("ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                                     " is outside the vocabulary (size " +
                                     std::to_string(vocab_size()) + ")");
    }
  }
  return Status::Ok();
}

std::vector<int32_t> BpeTokenizer::TokenByteLengths() const {
  std::vector<int32_t> lengths(vocab_size(), 0);
  for (size_t i = 0; i < ranks_.size(); ++i) lengths[i] = static_cast<int32_t>(ranks_[i].size());
  return lengths;
}

}  // namespace xv::tok
