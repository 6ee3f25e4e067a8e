#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <queue>
#include <thread>
#include <unordered_map>

#include "tokenizer/bpe_split_pattern.h"

namespace xv::tok {

namespace {

using Pair = uint64_t;  // (left id << 32) | right id: comparing Pairs compares (left, right)
Pair MakePair(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

struct PairHash {
  size_t operator()(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
};

// Open-addressing hash map from a Pair to a value, for the merge loop's hot lookups. Entries are
// never removed (a merged pair keeps a zero count). Pair ~0 (never a real pair: ids < 2^32 - 1)
// marks empty.
template <typename V>
class PairMap {
 public:
  explicit PairMap(size_t expected = 1024) {
    size_t capacity = 1024;
    while (capacity < expected * 2) capacity <<= 1;
    keys_.assign(capacity, kEmpty);
    values_.resize(capacity);
    mask_ = capacity - 1;
  }
  // The value of `pair`, default-constructed on first use.
  V& operator[](Pair pair) {
    size_t slot = PairHash()(pair) & mask_;
    while (true) {
      if (keys_[slot] == pair) return values_[slot];
      if (keys_[slot] == kEmpty) break;
      slot = (slot + 1) & mask_;
    }
    if ((size_ + 1) * 2 > keys_.size()) {
      Grow();
      return (*this)[pair];
    }
    keys_[slot] = pair;
    ++size_;
    return values_[slot];
  }
  // The value of `pair`, or nullptr.
  V* Find(Pair pair) {
    size_t slot = PairHash()(pair) & mask_;
    while (true) {
      if (keys_[slot] == pair) return &values_[slot];
      if (keys_[slot] == kEmpty) return nullptr;
      slot = (slot + 1) & mask_;
    }
  }
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != kEmpty) f(keys_[i], values_[i]);
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr Pair kEmpty = ~0ULL;
  void Grow() {
    std::vector<Pair> keys = std::move(keys_);
    std::vector<V> values = std::move(values_);
    keys_.assign(keys.size() * 2, kEmpty);
    values_.clear();
    values_.resize(keys.size() * 2);
    mask_ = keys_.size() - 1;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == kEmpty) continue;
      size_t slot = PairHash()(keys[i]) & mask_;
      while (keys_[slot] != kEmpty) slot = (slot + 1) & mask_;
      keys_[slot] = keys[i];
      values_[slot] = std::move(values[i]);
    }
  }
  std::vector<Pair> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

using ChunkCounts = std::unordered_map<std::string, int64_t>;

// Splits `docs` into chunks on `threads` threads, adding to per-thread counts.
void CountChunks(const SplitPattern& split, const std::vector<std::string>& docs,
                 std::vector<ChunkCounts>* per_thread) {
  const size_t threads = per_thread->size();
  std::atomic<size_t> next{0};
  auto work = [&](size_t t) {
    ChunkCounts& counts = (*per_thread)[t];
    thread_local std::string key;
    for (size_t i = next.fetch_add(1); i < docs.size(); i = next.fetch_add(1)) {
      split.ForEach(docs[i], [&](std::string_view chunk) {
        key.assign(chunk.data(), chunk.size());
        auto it = counts.find(key);
        if (it != counts.end()) {
          ++it->second;
        } else {
          counts.emplace(key, 1);
        }
      });
    }
  };
  if (threads <= 1 || docs.size() < 2) {
    work(0);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

struct HeapEntry {
  int64_t count;
  Pair pair;
  // Max-heap on count; on equal counts the smaller pair comes first (rustbpe's MergeJob order).
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

}  // namespace

Status TrainBpe(const BpeTrainOptions& options, const BpeDocumentSource& documents,
                const BpeProgressCallback& progress, BpeTrainResult* result) {
  const uint32_t n_specials = static_cast<uint32_t>(options.special_tokens.size());
  if (options.vocab_size < 256 + n_specials) {
    return Status::InvalidArgument("vocab_size: must be at least 256 + " +
                                   std::to_string(n_specials) + " special tokens, got " +
                                   std::to_string(options.vocab_size));
  }
  std::unique_ptr<SplitPattern> split;
  XV_RETURN_IF_ERROR(SplitPattern::Compile(options.pattern, &split));
  size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                       : std::max(1u, std::thread::hardware_concurrency());

  BpeTrainProgress stats;
  stats.merges_total = options.vocab_size - n_specials - 256;

  // ---- Phase 1: unique chunks and their counts ----
  std::vector<ChunkCounts> per_thread(threads);
  std::vector<std::string> batch;
  size_t batch_bytes = 0;
  constexpr size_t kBatchDocs = 4096;
  constexpr size_t kBatchBytes = 32 << 20;
  bool done = false;
  while (!done) {
    std::string doc;
    bool end = false;
    XV_RETURN_IF_ERROR(documents(&doc, &end));
    if (!end) {
      size_t bad = 0;
      if (!ValidateUtf8(doc, &bad).ok()) {
        return Status::InvalidArgument("document " + std::to_string(stats.documents) +
                                       ": invalid UTF-8 at byte offset " + std::to_string(bad));
      }
      if (options.doc_cap_chars > 0) {
        doc.resize(PrefixBytesForCodePoints(doc, static_cast<size_t>(options.doc_cap_chars)));
      }
      stats.documents += 1;
      stats.bytes += static_cast<int64_t>(doc.size());
      stats.chars += static_cast<int64_t>(CountCodePoints(doc));
      batch_bytes += doc.size();
      batch.push_back(std::move(doc));
      if (options.max_chars > 0 && stats.chars >= options.max_chars) end = true;
    }
    done = end;
    if (done || batch.size() >= kBatchDocs || batch_bytes >= kBatchBytes) {
      CountChunks(*split, batch, &per_thread);
      batch.clear();
      batch_bytes = 0;
      if (progress) progress(stats);
    }
  }
  ChunkCounts counts = std::move(per_thread[0]);
  for (size_t t = 1; t < threads; ++t) {
    for (auto& [chunk, c] : per_thread[t]) counts[chunk] += c;
    per_thread[t].clear();
  }
  stats.unique_chunks = static_cast<int64_t>(counts.size());

  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> word_counts;
  words.reserve(counts.size());
  word_counts.reserve(counts.size());
  for (auto& [chunk, c] : counts) {
    if (chunk.size() < 2) continue;  // no pairs
    std::vector<uint32_t> ids(chunk.size());
    for (size_t i = 0; i < chunk.size(); ++i) ids[i] = static_cast<unsigned char>(chunk[i]);
    words.push_back(std::move(ids));
    word_counts.push_back(c);
  }
  counts = ChunkCounts();

  // ---- Phase 2: merges ----
  stats.phase = BpeTrainProgress::Phase::kMerging;
  size_t total_pairs = 0;
  for (const auto& ids : words) total_pairs += ids.size() - 1;
  PairMap<int64_t> pair_counts(std::min<size_t>(total_pairs / 4, 1 << 20));
  PairMap<std::vector<uint32_t>> where(
      std::min<size_t>(total_pairs / 4, 1 << 20));  // pair -> words
  for (uint32_t w = 0; w < words.size(); ++w) {
    const auto& ids = words[w];
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const Pair p = MakePair(ids[i], ids[i + 1]);
      pair_counts[p] += word_counts[w];
      auto& list = where[p];
      if (list.empty() || list.back() != w) list.push_back(w);
    }
  }
  std::vector<HeapEntry> heap_storage;
  heap_storage.reserve(pair_counts.size() * 2);
  pair_counts.ForEach([&](Pair p, int64_t c) { heap_storage.push_back({c, p}); });
  std::priority_queue<HeapEntry> heap(std::less<HeapEntry>(), std::move(heap_storage));

  std::vector<std::string> token_bytes(256);
  for (int b = 0; b < 256; ++b) token_bytes[b] = std::string(1, static_cast<char>(b));

  std::vector<Pair> created;
  uint32_t last_reported_percent = 0;
  while (stats.merges_done < stats.merges_total && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    const int64_t* pc = pair_counts.Find(top.pair);
    const int64_t current = pc == nullptr ? 0 : *pc;
    if (top.count != current) {
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    if (current <= 0) break;
    const uint32_t a = static_cast<uint32_t>(top.pair >> 32);
    const uint32_t b = static_cast<uint32_t>(top.pair & 0xFFFFFFFFu);
    const uint32_t new_id = 256 + stats.merges_done;
    token_bytes.push_back(token_bytes[a] + token_bytes[b]);

    std::vector<uint32_t> positions = std::move(where[top.pair]);
    where[top.pair] = std::vector<uint32_t>();
    created.clear();
    auto add = [&](uint32_t x, uint32_t y, int64_t delta) { pair_counts[MakePair(x, y)] += delta; };
    auto add_created = [&](uint32_t x, uint32_t y, int64_t delta, uint32_t w) {
      const Pair p = MakePair(x, y);
      pair_counts[p] += delta;
      auto& list = where[p];
      if (list.empty()) created.push_back(p);
      if (list.empty() || list.back() != w) list.push_back(w);
    };
    for (uint32_t w : positions) {
      auto& ids = words[w];
      const int64_t c = word_counts[w];
      const size_t n = ids.size();
      size_t out = 0;
      size_t i = 0;
      bool merged = false;
      while (i < n) {
        if (i + 1 < n && ids[i] == a && ids[i + 1] == b) {
          merged = true;
          if (out > 0) {
            const uint32_t x = ids[out - 1];
            add(x, a, -c);
            add_created(x, new_id, c, w);
          }
          add(a, b, -c);
          if (i + 2 < n) {
            const uint32_t y = ids[i + 2];
            add(b, y, -c);
            add_created(new_id, y, c, w);
          }
          ids[out++] = new_id;
          i += 2;
        } else {
          ids[out++] = ids[i++];
        }
      }
      if (merged) ids.resize(out);
    }
    for (Pair p : created) {
      const int64_t c = pair_counts[p];
      if (c > 0) heap.push({c, p});
    }
    pair_counts[top.pair] = 0;
    stats.merges_done += 1;
    const uint32_t percent = stats.merges_done * 100 / std::max(1u, stats.merges_total);
    if (progress && percent != last_reported_percent) {
      last_reported_percent = percent;
      progress(stats);
    }
  }
  stats.phase = BpeTrainProgress::Phase::kDone;
  if (progress) progress(stats);

  result->ranks = std::move(token_bytes);
  result->specials = options.special_tokens;
  result->pattern = options.pattern;
  result->stats = stats;
  return Status::Ok();
}

Status TrainBpe(const BpeTrainOptions& options, const std::vector<std::string>& texts,
                const BpeProgressCallback& progress, BpeTrainResult* result) {
  size_t next = 0;
  auto source = [&](std::string* text, bool* done) {
    if (next >= texts.size()) {
      *done = true;
    } else {
      *text = texts[next++];
    }
    return Status::Ok();
  };
  return TrainBpe(options, source, progress, result);
}

}  // namespace xv::tok
