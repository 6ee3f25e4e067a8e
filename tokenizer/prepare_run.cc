#include "tokenizer/prepare_run.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/steady_clock_time.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/corpus_files.h"
#include "tokenizer/corpus_reader.h"
#include "tokenizer/prepare_manifest.h"
#include "tokenizer/prepare_progress.h"
#include "tokenizer/tiktoken_metadata.h"
#include "tokenizer/tiktoken_ranks.h"
#include "tokenizer/token_shard_writer.h"

namespace xv::tok {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Status ValidateOptions(const PrepareOptions& o) {
  if (o.inputs.empty()) return Status::InvalidArgument("--input: at least one file or directory");
  if (o.out_dir.empty()) return Status::InvalidArgument("--out: the data directory is required");
  const uint32_t min_vocab = 256 + static_cast<uint32_t>(kUpstreamSpecialTokenCount);
  if (o.vocab_size < min_vocab) {
    return Status::InvalidArgument("--vocab-size: must be >= " + std::to_string(min_vocab) +
                                   " (256 bytes + 4 specials), got " +
                                   std::to_string(o.vocab_size));
  }
  if (!(o.val_fraction > 0.0 && o.val_fraction < 1.0) && o.val_docs < 0) {
    return Status::InvalidArgument("--val-fraction: must be in (0, 1), got " +
                                   std::to_string(o.val_fraction));
  }
  if (o.val_docs == 0) {
    return Status::InvalidArgument("--val-docs: must be >= 1 (the val shard cannot be empty)");
  }
  if (o.shard_tokens < 1) {
    return Status::InvalidArgument("--shard-tokens: must be >= 1, got " +
                                   std::to_string(o.shard_tokens));
  }
  if (o.threads < 0) {
    return Status::InvalidArgument("--threads: must be >= 0, got " + std::to_string(o.threads));
  }
  return Status::Ok();
}

// splitmix64: a small, portable generator so the shuffle is the same everywhere.
uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<size_t> SeededPermutation(size_t n, uint64_t seed) {
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  uint64_t state = seed;
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(NextRandom(&state) % i);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

// Runs fn(i) for i in [0, n) on `threads` threads, polling `progress` from the calling thread.
template <typename Fn>
Status ParallelFor(size_t n, int threads, PrepareProgress* progress, Fn fn) {
  std::atomic<size_t> next{0};
  std::atomic<int> running{threads};
  std::vector<Status> errors(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (true) {
        const size_t i = next.fetch_add(1);
        if (i >= n) break;
        Status st = fn(i);
        if (!st.ok()) {
          errors[static_cast<size_t>(t)] = st;
          next.store(n);
          break;
        }
      }
      running.fetch_sub(1);
    });
  }
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (progress != nullptr) progress->Report();
  }
  for (auto& th : pool) th.join();
  for (const Status& st : errors) XV_RETURN_IF_ERROR(st);
  return Status::Ok();
}

// Removes the staging directory unless released.
class StagingDir {
 public:
  explicit StagingDir(std::string path) : path_(std::move(path)) {}
  ~StagingDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Status MakeDirectory(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status::IoError(path + ": cannot create directory: " + ec.message());
  return Status::Ok();
}

std::string ShardName(const char* split, size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s-%05zu.xvt", split, index);
  return buf;
}

// The work of RunPrepare; RunPrepare removes an output directory it created when this fails.
Status RunPrepareInto(const PrepareOptions& o, PrepareResult* result_out) {
  const auto start = Clock::now();
  PrepareResult result;
  XV_RETURN_IF_ERROR(ValidateOptions(o));
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::string out_dir = o.out_dir;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();

  // 1. Inputs, and the up-to-date check.
  std::vector<CorpusFile> files;
  std::vector<std::string> skipped;
  XV_RETURN_IF_ERROR(ListCorpusFiles(o.inputs, &files, &skipped));
  result.skipped_files = static_cast<int64_t>(skipped.size());
  const nlohmann::json inputs_json = PrepareManifestInputs(files);
  const nlohmann::json options_json = PrepareManifestOptions(o);
  bool up_to_date = false;
  CheckPrepareManifest(out_dir, inputs_json, options_json, &up_to_date, &result.reason);
  if (up_to_date && !o.force) {
    result.up_to_date = true;
    result.input_files = static_cast<int64_t>(files.size());
    result.total_seconds = SecondsSince(start);
    if (result_out != nullptr) *result_out = result;
    return Status::Ok();
  }
  if (up_to_date) result.reason = "--force";
  result.input_files = static_cast<int64_t>(files.size());

  // 2. Read every file (in parallel), keeping file order.
  uint64_t disk_bytes = 0;
  for (const CorpusFile& f : files) disk_bytes += f.size;
  std::vector<std::vector<std::string>> per_file(files.size());
  {
    PrepareProgress progress("read", disk_bytes, o.progress);
    XV_RETURN_IF_ERROR(
        ParallelFor(files.size(), std::min<int>(threads, 4), &progress, [&](size_t i) {
          Status st = ReadCorpusDocuments(files[i], o.txt_separator, &per_file[i]);
          progress.Add(files[i].size);
          return st;
        }));
    progress.Finish();
  }
  std::vector<std::string> docs;
  for (auto& v : per_file) {
    for (auto& d : v) {
      result.input_bytes += static_cast<int64_t>(d.size());
      docs.push_back(std::move(d));
    }
  }
  per_file.clear();
  result.documents = static_cast<int64_t>(docs.size());
  if (docs.size() < 2) {
    return Status::InvalidArgument("the inputs hold " + std::to_string(docs.size()) +
                                   " document(s); at least 2 are needed (1 train + 1 val)");
  }

  // 3. Shuffle and split: the first n_val documents of the permutation are the val documents.
  const std::vector<size_t> order = SeededPermutation(docs.size(), o.seed);
  int64_t n_val = o.val_docs >= 0
                      ? o.val_docs
                      : std::max<int64_t>(1, std::llround(o.val_fraction * docs.size()));
  if (n_val < 1 || n_val >= static_cast<int64_t>(docs.size())) {
    return Status::InvalidArgument(
        std::string(o.val_docs >= 0 ? "--val-docs" : "--val-fraction") +
        ": the validation documents must number in [1, " + std::to_string(docs.size() - 1) +
        "] for " + std::to_string(docs.size()) + " documents, got " + std::to_string(n_val));
  }
  result.val_documents = n_val;
  result.train_documents = static_cast<int64_t>(docs.size()) - n_val;

  // 4. Staging directory inside the output directory (same filesystem, so renames are atomic).
  XV_RETURN_IF_ERROR(MakeDirectory(out_dir));
  std::string staging_template = out_dir + "/.prepare-staging-XXXXXX";
  if (::mkdtemp(staging_template.data()) == nullptr) {
    return Status::IoError(out_dir +
                           ": cannot create a staging directory: " + std::strerror(errno));
  }
  StagingDir staging(staging_template);
  XV_RETURN_IF_ERROR(MakeDirectory(staging.path() + "/tokenizer"));
  XV_RETURN_IF_ERROR(MakeDirectory(staging.path() + "/shards"));

  // 5. Train the tokenizer on the training documents.
  const auto bpe_start = Clock::now();
  BpeTrainOptions train_options;
  train_options.vocab_size = o.vocab_size;
  train_options.doc_cap_chars = o.doc_cap;
  train_options.max_chars = o.max_chars;
  train_options.threads = threads;
  BpeTrainResult trained;
  {
    uint64_t train_bytes = 0;
    for (size_t k = static_cast<size_t>(n_val); k < order.size(); ++k) {
      train_bytes += docs[order[k]].size();
    }
    // Two phases: counting chunks (bytes) and merging (merges).
    auto counting = std::make_unique<PrepareProgress>("bpe-count", train_bytes, o.progress);
    std::unique_ptr<PrepareProgress> merging;
    size_t next = static_cast<size_t>(n_val);
    BpeDocumentSource source = [&](std::string* text, bool* done) {
      if (next >= order.size()) {
        *done = true;
        return Status::Ok();
      }
      *text = docs[order[next++]];
      *done = false;
      return Status::Ok();
    };
    uint64_t last_bytes = 0, last_merges = 0;
    BpeProgressCallback on_progress = [&](const BpeTrainProgress& p) {
      const uint64_t b = static_cast<uint64_t>(std::max<int64_t>(p.bytes, 0));
      if (b > last_bytes) {
        counting->Add(b - last_bytes);
        last_bytes = b;
      }
      if (p.phase == BpeTrainProgress::Phase::kCounting) {
        counting->Report();
        return;
      }
      counting->Finish();
      if (merging == nullptr) {
        merging = std::make_unique<PrepareProgress>("bpe-merge", p.merges_total, o.progress,
                                                    PrepareProgress::Unit::kCount, "merges");
      }
      if (p.merges_done > last_merges) {
        merging->Add(p.merges_done - last_merges);
        last_merges = p.merges_done;
      }
      merging->Report();
    };
    XV_RETURN_IF_ERROR(TrainBpe(train_options, source, on_progress, &trained));
    counting->Finish();
    if (merging != nullptr) merging->Finish();
  }
  result.bpe_seconds = SecondsSince(bpe_start);

  std::unique_ptr<BpeTokenizer> tokenizer;
  const std::vector<std::string> specials = trained.specials;
  XV_RETURN_IF_ERROR(BpeTokenizer::FromRanks(trained.ranks, trained.pattern, specials, &tokenizer,
                                             kUpstreamBosToken));
  result.vocab_size = tokenizer->vocab_size();
  TokenizerMeta meta;
  meta.pattern = tokenizer->pattern();
  meta.specials = tokenizer->specials();
  meta.bos = kUpstreamBosToken;
  meta.n_ranks = tokenizer->n_ranks();
  meta.vocab_size = tokenizer->vocab_size();
  meta.bos_id = tokenizer->bos_id();
  XV_RETURN_IF_ERROR(
      WriteTiktokenRanks(staging.path() + "/tokenizer/ranks.tiktoken", tokenizer->ranks()));
  XV_RETURN_IF_ERROR(WriteTokenizerMeta(staging.path() + "/tokenizer/tokenizer.json", meta));
  XV_RETURN_IF_ERROR(WriteTokenBytes(staging.path() + "/tokenizer/token_bytes.json",
                                     tokenizer->TokenByteLengths()));

  // 6. Encode every document, BOS first, on all threads.
  const auto encode_start = Clock::now();
  std::vector<std::vector<int32_t>> ids(docs.size());
  {
    PrepareProgress progress("encode", static_cast<uint64_t>(result.input_bytes), o.progress);
    constexpr size_t kChunk = 64;
    const size_t chunks = (docs.size() + kChunk - 1) / kChunk;
    const int32_t bos = static_cast<int32_t>(tokenizer->bos_id());
    XV_RETURN_IF_ERROR(ParallelFor(chunks, threads, &progress, [&](size_t c) {
      std::vector<uint32_t> encoded;
      uint64_t bytes = 0;
      for (size_t i = c * kChunk; i < std::min(docs.size(), (c + 1) * kChunk); ++i) {
        encoded.clear();
        tokenizer->EncodeOrdinaryAppend(docs[i], &encoded);
        std::vector<int32_t>& out = ids[i];
        out.reserve(encoded.size() + 1);
        out.push_back(bos);
        for (uint32_t id : encoded) out.push_back(static_cast<int32_t>(id));
        bytes += docs[i].size();
      }
      progress.Add(bytes);
      return Status::Ok();
    }));
    progress.Finish();
  }
  result.encode_seconds = SecondsSince(encode_start);
  docs.clear();
  docs.shrink_to_fit();

  // 7. Shards: val first (the first n_val of the permutation), then train in permutation order.
  std::vector<std::string> outputs = {"tokenizer/ranks.tiktoken", "tokenizer/tokenizer.json",
                                      "tokenizer/token_bytes.json"};
  {
    std::unique_ptr<TokenShardWriter> writer;
    const std::string name = ShardName("val", 0);
    XV_RETURN_IF_ERROR(
        TokenShardWriter::Create(staging.path() + "/shards/" + name, result.vocab_size, &writer));
    for (int64_t k = 0; k < n_val; ++k) XV_RETURN_IF_ERROR(writer->AddDocument(ids[order[k]]));
    XV_RETURN_IF_ERROR(writer->Finish());
    result.val_tokens = static_cast<int64_t>(writer->token_count());
    outputs.push_back("shards/" + name);
  }
  {
    std::unique_ptr<TokenShardWriter> writer;
    auto close_shard = [&]() -> Status {
      if (writer == nullptr) return Status::Ok();
      XV_RETURN_IF_ERROR(writer->Finish());
      result.train_tokens += static_cast<int64_t>(writer->token_count());
      writer.reset();
      return Status::Ok();
    };
    for (size_t k = static_cast<size_t>(n_val); k < order.size(); ++k) {
      if (writer == nullptr) {
        const std::string name = ShardName("train", static_cast<size_t>(result.train_shards++));
        XV_RETURN_IF_ERROR(TokenShardWriter::Create(staging.path() + "/shards/" + name,
                                                    result.vocab_size, &writer));
        outputs.push_back("shards/" + name);
      }
      XV_RETURN_IF_ERROR(writer->AddDocument(ids[order[k]]));
      if (static_cast<int64_t>(writer->token_count()) >= o.shard_tokens) {
        XV_RETURN_IF_ERROR(close_shard());
      }
    }
    XV_RETURN_IF_ERROR(close_shard());
  }
  ids.clear();

  // 8. Manifest, then move into place: old outputs out, new ones in, prepare.json last.
  nlohmann::json outputs_json = nlohmann::json::array();
  for (const std::string& rel : outputs) {
    nlohmann::json entry;
    XV_RETURN_IF_ERROR(DescribePrepareOutput(staging.path(), rel, &entry));
    outputs_json.push_back(entry);
  }
  result.total_seconds = SecondsSince(start);
  nlohmann::ordered_json manifest;
  manifest["format"] = "xv-prepare";
  manifest["version"] = 1;
  manifest["inputs"] = inputs_json;
  manifest["options"] = options_json;
  manifest["outputs"] = outputs_json;
  manifest["stats"] = {
      {"input_files", result.input_files},     {"input_bytes", result.input_bytes},
      {"documents", result.documents},         {"train_documents", result.train_documents},
      {"val_documents", result.val_documents}, {"train_tokens", result.train_tokens},
      {"val_tokens", result.val_tokens},       {"train_shards", result.train_shards},
      {"vocab_size", result.vocab_size},       {"bos_id", meta.bos_id},
      {"bpe_seconds", result.bpe_seconds},     {"encode_seconds", result.encode_seconds}};

  const std::string manifest_path = out_dir + "/" + kPrepareManifestName;
  std::error_code ec;
  fs::remove(manifest_path, ec);
  if (ec) return Status::IoError(manifest_path + ": cannot remove: " + ec.message());
  for (const char* sub : {"tokenizer", "shards"}) {
    const std::string target = out_dir + "/" + sub;
    fs::remove_all(target, ec);
    if (ec) return Status::IoError(target + ": cannot remove the old output: " + ec.message());
    fs::rename(staging.path() + "/" + sub, target, ec);
    if (ec)
      return Status::IoError(target + ": cannot move the new output into place: " + ec.message());
  }
  XV_RETURN_IF_ERROR(WriteFileAtomically(manifest_path, manifest.dump(1) + "\n"));
  if (result_out != nullptr) *result_out = result;
  return Status::Ok();
}

}  // namespace

Status RunPrepare(const PrepareOptions& o, PrepareResult* result_out) {
  std::error_code ec;
  const bool existed = !o.out_dir.empty() && fs::exists(o.out_dir, ec);
  Status st = RunPrepareInto(o, result_out);
  if (!st.ok() && !existed && !o.out_dir.empty()) {
    fs::remove(o.out_dir, ec);  // only when we created it and it is empty again
  }
  return st;
}

}  // namespace xv::tok
