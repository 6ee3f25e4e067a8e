// xv-bench-tokenizer: on one corpus and machine, in one run:
//   - BPE training time for vocab 8192: xv (TrainBpe, 8188 ranks + 4 specials, upstream pattern) vs
//     SentencePiece (`spm_train --model_type=bpe --vocab_size=8192`, same thread count);
//   - encode MB/s on the corpus: xv (one thread, fresh tokenizer so the chunk cache starts cold) vs
//     `spm_encode` (single-threaded), and xv with all threads;
//   - the ratios, xv's MB/s per core, and whether the goals (train >= 3x, encode >= 2x, >= 20 MB/s
//   per
//     core) are met.
// Corpus (default): /usr/share/games/fortunes/* (Debian `fortunes`; fortunes split on "%" lines)
// and /usr/share/common-licenses/* (one document per file). Files that are not valid UTF-8 are
// skipped.
//
// Usage: xv-bench-tokenizer [--threads N] [--spm-train PATH] [--spm-encode PATH] [--work-dir DIR]
//                           [--repeat N] [DIR_OR_FILE ...]
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/bpe_split_pattern.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/bpe_trainer.h"

namespace fs = std::filesystem;
using xv::Status;
using xv::tok::BpeTokenizer;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

double ProcessCpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double ChildrenCpu() {
  rusage u;
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

// Wall and CPU seconds of one measured run (CPU summed over all threads or child processes).
struct Timing {
  double wall = -1;
  double cpu = -1;
};

Timing Median(std::vector<Timing> runs) {
  if (runs.empty()) return Timing();
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.cpu < b.cpu; });
  Timing m = runs[runs.size() / 2];
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.wall < b.wall; });
  m.wall = runs[runs.size() / 2].wall;
  return m;
}

// Fortune files: documents separated by lines holding only "%". Other files: one document.
void AddDocuments(const fs::path& path, std::vector<std::string>* docs, size_t* skipped) {
  std::string text = ReadFile(path);
  if (text.empty()) return;
  if (!xv::tok::ValidateUtf8(text).ok()) {
    ++*skipped;
    return;
  }
  const bool fortune = path.string().find("/fortunes/") != std::string::npos;
  if (!fortune) {
    docs->push_back(std::move(text));
    return;
  }
  std::string doc;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line == "%") {
      if (!doc.empty()) docs->push_back(std::move(doc));
      doc.clear();
    } else {
      doc += line;
      doc += '\n';
    }
  }
  if (!doc.empty()) docs->push_back(std::move(doc));
}

void CollectCorpus(const std::vector<std::string>& inputs, std::vector<std::string>* docs,
                   size_t* files, size_t* skipped) {
  for (const auto& input : inputs) {
    std::vector<fs::path> paths;
    if (fs::is_directory(input)) {
      for (const auto& entry : fs::directory_iterator(input)) {
        if (entry.is_symlink() || !entry.is_regular_file()) continue;  // fortunes' *.u8 links
        if (entry.path().extension() == ".dat") continue;              // strfile indexes
        paths.push_back(entry.path());
      }
    } else if (fs::is_regular_file(input)) {
      paths.push_back(input);
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      ++*files;
      AddDocuments(p, docs, skipped);
    }
  }
}

// Runs a shell command line; returns its wall and CPU time (wall -1 when it failed).
Timing TimeCommand(const std::string& command) {
  const double start = Now();
  const double cpu_start = ChildrenCpu();
  const int status = std::system(command.c_str());
  Timing t{Now() - start, ChildrenCpu() - cpu_start};
  if (status != 0) {
    std::fprintf(stderr, "command failed (status %d): %s\n", status, command.c_str());
    return Timing();
  }
  return t;
}

Timing EncodeTiming(const BpeTokenizer& tok, const std::vector<std::string>& docs, int threads,
                    size_t* tokens) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> total{0};
  const double start = Now();
  const double cpu_start = ProcessCpu();
  auto work = [&] {
    size_t local = 0;
    std::vector<uint32_t> ids;
    for (size_t i = next.fetch_add(1); i < docs.size(); i = next.fetch_add(1)) {
      ids.clear();
      tok.EncodeOrdinaryAppend(docs[i], &ids);
      local += ids.size();
    }
    total += local;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  *tokens = total;
  return Timing{Now() - start, ProcessCpu() - cpu_start};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string spm_train = "spm_train", spm_encode = "spm_encode";
  std::string work_dir = (fs::temp_directory_path() / ("xv-bench-tok-" + std::to_string(getpid())));
  int repeat = 3;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") {
      threads = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--spm-train") {
      spm_train = value();
    } else if (a == "--spm-encode") {
      spm_encode = value();
    } else if (a == "--work-dir") {
      work_dir = value();
    } else if (a == "--repeat") {
      repeat = std::max(1, std::atoi(value().c_str()));
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: xv-bench-tokenizer [--threads N] [--spm-train PATH] [--spm-encode PATH] "
          "[--work-dir DIR] [--repeat N] [DIR_OR_FILE ...]\n");
      return 0;
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.empty()) inputs = {"/usr/share/games/fortunes", "/usr/share/common-licenses"};

  std::vector<std::string> docs;
  size_t files = 0, skipped = 0;
  CollectCorpus(inputs, &docs, &files, &skipped);
  size_t corpus_bytes = 0;
  for (const auto& d : docs) corpus_bytes += d.size();
  if (docs.empty()) {
    std::fprintf(stderr, "no documents found in the inputs\n");
    return 1;
  }
  fs::create_directories(work_dir);
  const std::string corpus_path = (fs::path(work_dir) / "corpus.txt").string();
  {
    std::ofstream out(corpus_path, std::ios::binary);
    for (const auto& d : docs) {
      out << d;
      if (d.empty() || d.back() != '\n') out << '\n';
    }
  }
  const double mb = corpus_bytes / 1e6;
  std::printf("corpus: %zu files (%zu skipped: not UTF-8), %zu documents, %.2f MB\n", files,
              skipped, docs.size(), mb);
  std::printf("machine: %u hardware threads; benchmark threads: %d\n",
              std::thread::hardware_concurrency(), threads);

  // ---- Training, vocab 8192 ----
  xv::tok::BpeTrainOptions options;  // upstream: 8188 ranks + 4 specials, doc cap 10000 chars
  options.threads = threads;
  std::vector<Timing> xv_train_runs;
  xv::tok::BpeTrainResult trained;
  for (int r = 0; r < repeat; ++r) {
    const double start = Now();
    const double cpu_start = ProcessCpu();
    Status st = xv::tok::TrainBpe(options, docs, nullptr, &trained);
    xv_train_runs.push_back(Timing{Now() - start, ProcessCpu() - cpu_start});
    if (!st.ok()) {
      std::fprintf(stderr, "xv training failed: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  const Timing xv_train = Median(xv_train_runs);

  const std::string model_prefix = (fs::path(work_dir) / "spm").string();
  const std::string spm_train_cmd =
      spm_train + " --input=" + corpus_path + " --model_prefix=" + model_prefix +
      " --model_type=bpe --vocab_size=8192 --num_threads=" + std::to_string(threads) +
      " --minloglevel=2 > " + work_dir + "/spm_train.log 2>&1";
  const Timing spm_train_t = TimeCommand(spm_train_cmd);
  const bool spm_ok = spm_train_t.wall > 0;

  // ---- Encoding ----
  std::unique_ptr<BpeTokenizer> tok;
  std::vector<Timing> one_thread_runs, all_thread_runs;
  size_t tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    // A fresh tokenizer each run: its per-thread chunk cache starts empty.
    Status st = BpeTokenizer::FromRanks(trained.ranks, trained.pattern, trained.specials, &tok);
    if (!st.ok()) {
      std::fprintf(stderr, "tokenizer: %s\n", st.ToString().c_str());
      return 1;
    }
    one_thread_runs.push_back(EncodeTiming(*tok, docs, 1, &tokens));
    st = BpeTokenizer::FromRanks(trained.ranks, trained.pattern, trained.specials, &tok);
    if (!st.ok()) {
      std::fprintf(stderr, "tokenizer: %s\n", st.ToString().c_str());
      return 1;
    }
    size_t tokens_mt = 0;
    all_thread_runs.push_back(EncodeTiming(*tok, docs, threads, &tokens_mt));
  }
  const Timing xv_encode = Median(one_thread_runs);
  const Timing xv_encode_mt = Median(all_thread_runs);

  std::vector<Timing> spm_encode_runs;
  for (int r = 0; r < repeat && spm_ok; ++r) {
    const Timing t =
        TimeCommand(spm_encode + " --model=" + model_prefix + ".model --output_format=id < " +
                    corpus_path + " > " + work_dir + "/spm_ids.txt");
    if (t.wall > 0) spm_encode_runs.push_back(t);
  }
  const Timing spm_encode_t = Median(spm_encode_runs);
  const bool spm_encode_ok = spm_encode_t.wall > 0;

  auto ratio = [](double a, double b) { return b > 0 && a > 0 ? a / b : 0.0; };
  std::printf("\n%-40s %12s %14s %7s\n", "median of runs", "xv", "sentencepiece", "ratio");
  std::printf("%-40s %11.3fs %13.3fs %6.1fx\n", "BPE training, vocab 8192: wall", xv_train.wall,
              spm_train_t.wall, ratio(spm_train_t.wall, xv_train.wall));
  std::printf("%-40s %11.3fs %13.3fs %6.1fx\n", "BPE training, vocab 8192: CPU (all threads)",
              xv_train.cpu, spm_train_t.cpu, ratio(spm_train_t.cpu, xv_train.cpu));
  const double xv_mbs_wall = mb / xv_encode.wall, xv_mbs_cpu = mb / xv_encode.cpu;
  const double spm_mbs_wall = spm_encode_ok ? mb / spm_encode_t.wall : 0;
  const double spm_mbs_cpu = spm_encode_ok ? mb / spm_encode_t.cpu : 0;
  std::printf("%-40s %8.1f MB/s %10.1f MB/s %6.1fx\n", "encode, 1 thread: wall", xv_mbs_wall,
              spm_mbs_wall, ratio(xv_mbs_wall, spm_mbs_wall));
  std::printf("%-40s %8.1f MB/s %10.1f MB/s %6.1fx\n", "encode, 1 thread: per CPU-second",
              xv_mbs_cpu, spm_mbs_cpu, ratio(xv_mbs_cpu, spm_mbs_cpu));
  std::printf("%-40s %8.1f MB/s (wall), %.1f MB/s per core (CPU)\n",
              ("xv encode, " + std::to_string(threads) + " threads").c_str(),
              mb / xv_encode_mt.wall, mb / xv_encode_mt.cpu);
  std::printf("xv: %zu ranks + %zu specials, %lld unique chunks, %zu tokens (%.2f bytes/token)\n",
              trained.ranks.size(), trained.specials.size(),
              static_cast<long long>(trained.stats.unique_chunks), tokens,
              static_cast<double>(corpus_bytes) / std::max<size_t>(tokens, 1));
  std::printf("\ngoals (CPU-time figures; wall figures depend on machine load):\n");
  std::printf("  train >= 3x faster than sentencepiece: %s (%.1fx)\n",
              ratio(spm_train_t.cpu, xv_train.cpu) >= 3 ? "met" : "NOT met",
              ratio(spm_train_t.cpu, xv_train.cpu));
  std::printf("  encode >= 2x faster than sentencepiece: %s (%.1fx)\n",
              ratio(xv_mbs_cpu, spm_mbs_cpu) >= 2 ? "met" : "NOT met",
              ratio(xv_mbs_cpu, spm_mbs_cpu));
  std::printf("  encode >= 20 MB/s per core: %s (%.1f MB/s)\n",
              xv_mbs_cpu >= 20 ? "met" : "NOT met", xv_mbs_cpu);
  std::error_code ec;
  fs::remove_all(work_dir, ec);
  return 0;
}
