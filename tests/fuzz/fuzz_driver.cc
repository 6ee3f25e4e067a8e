#include "fuzz_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

// Present only when a sanitizer runtime is linked in: called before it ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace xv::fuzz {

namespace {

// What the crash handler and the watchdog need, process-wide (one RunFuzzer at a time).
struct CurrentInput {
  const char* data = nullptr;
  std::atomic<size_t> size{0};
  std::atomic<int64_t> started_ns{0};  // 0: no input running
  std::atomic<bool> reported{false};
  char crash_path[4096] = {0};
  char timeout_path[4096] = {0};
  char banner[512] = {0};  // "target NAME, seed S, input I"
};
CurrentInput g_current;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void WriteStderr(const char* s) {
  ssize_t ignored = ::write(2, s, std::strlen(s));
  (void)ignored;
}

// Async-signal-safe: hex of the current input into `path`.
void WriteCurrentInput(const char* path) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  static const char kDigits[] = "0123456789abcdef";
  char line[129];
  const size_t size = g_current.size.load();
  for (size_t i = 0; i < size; i += 64) {
    size_t n = 0;
    for (size_t j = i; j < size && j < i + 64; ++j) {
      const auto b = static_cast<unsigned char>(g_current.data[j]);
      line[n++] = kDigits[b >> 4];
      line[n++] = kDigits[b & 15];
    }
    line[n++] = '\n';
    ssize_t ignored = ::write(fd, line, n);
    (void)ignored;
  }
  ::close(fd);
}

void ReportCrash(const char* what) {
  if (g_current.reported.exchange(true)) return;
  if (g_current.started_ns.load() == 0 || g_current.data == nullptr) return;
  WriteCurrentInput(g_current.crash_path);
  WriteStderr("\n*** xv fuzz: ");
  WriteStderr(what);
  WriteStderr(" in ");
  WriteStderr(g_current.banner);
  WriteStderr("; the input is in ");
  WriteStderr(g_current.crash_path);
  WriteStderr(" (rerun with XV_FUZZ_REPLAY=<that file>)\n");
}

void OnFatalSignal(int sig) {
  ReportCrash(sig == SIGABRT ? "abort" : "fatal signal");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void OnSanitizerDeath() { ReportCrash("sanitizer report"); }

void InstallCrashHandlers() {
  // Under a sanitizer its own handlers report faults (with the stack) and then call the death
  // callback; taking SIGSEGV from it would lose the report. abort() stays ours.
  const bool sanitized = __sanitizer_set_death_callback != nullptr;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    if (sanitized && sig != SIGABRT) continue;
    struct sigaction sa {};
    sa.sa_handler = OnFatalSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER | SA_ONSTACK;
    ::sigaction(sig, &sa, nullptr);
  }
  // A stack overflow needs its own stack to report on.
  static std::vector<char> alt_stack(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, nullptr);
  if (sanitized) __sanitizer_set_death_callback(OnSanitizerDeath);
}

// Ends the process when one input runs longer than the limit (a hang or an endless loop).
class Watchdog {
 public:
  explicit Watchdog(double limit_s) : limit_ns_(static_cast<int64_t>(limit_s * 1e9)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      const int64_t started = g_current.started_ns.load();
      if (stop_ || started == 0 || NowNs() - started < limit_ns_) continue;
      if (!g_current.reported.exchange(true)) {
        WriteCurrentInput(g_current.timeout_path);
        WriteStderr("\n*** xv fuzz: timeout in ");
        WriteStderr(g_current.banner);
        WriteStderr("; the input is in ");
        WriteStderr(g_current.timeout_path);
        WriteStderr("\n");
      }
      std::abort();
    }
  }

  const int64_t limit_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Little-endian and big-endian encodings of boundary values, and their decimal text.
const std::vector<int64_t>& InterestingIntegers() {
  static const std::vector<int64_t> v = {0,
                                         1,
                                         -1,
                                         2,
                                         7,
                                         8,
                                         16,
                                         32,
                                         64,
                                         100,
                                         127,
                                         128,
                                         255,
                                         256,
                                         1000,
                                         1024,
                                         4096,
                                         32767,
                                         32768,
                                         65535,
                                         65536,
                                         2147483647,
                                         -2147483648LL,
                                         4294967295LL,
                                         4294967296LL,
                                         (1LL << 53) + 1,
                                         9223372036854775807LL,
                                         static_cast<int64_t>(0x8000000000000000ULL)};
  return v;
}

const std::vector<std::string>& InterestingTexts() {
  static const std::vector<std::string> v = {"0",
                                             "-1",
                                             "-0",
                                             "1e309",
                                             "-1e309",
                                             "nan",
                                             "NaN",
                                             "inf",
                                             "-inf",
                                             ".inf",
                                             "1e-320",
                                             "18446744073709551616",
                                             "9223372036854775808",
                                             "-9223372036854775809",
                                             "4294967296",
                                             "2147483648",
                                             "0x7fffffff",
                                             "1.7976931348623157e308",
                                             "",
                                             "\xff\xfe",
                                             "\xc3\x28",
                                             "\\u0000",
                                             "\0",
                                             "\r",
                                             "\n",
                                             "\t",
                                             "  ",
                                             "[",
                                             "]",
                                             "{",
                                             "}",
                                             "\"",
                                             "'",
                                             ",",
                                             ":",
                                             "=",
                                             "#",
                                             "---",
                                             "|",
                                             "&a",
                                             "*a",
                                             "!!str",
                                             "~",
                                             "null",
                                             "true"};
  return v;
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<std::string>& seeds,
          const std::vector<std::string>& dictionary, size_t max_len)
      : rng_(seed), seeds_(seeds), dictionary_(dictionary), max_len_(max_len) {}

  // A mutant of a random seed: 1 to 8 stacked mutations.
  std::string Next() {
    std::string s = seeds_.empty() ? std::string() : seeds_[Below(seeds_.size())];
    const int stack = 1 + static_cast<int>(Below(8));
    for (int i = 0; i < stack; ++i) MutateOnce(&s);
    if (s.size() > max_len_) s.resize(max_len_);
    return s;
  }

 private:
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  size_t Pos(const std::string& s) { return Below(s.size() + 1); }

  void MutateOnce(std::string* s) {
    switch (Below(12)) {
      case 0:  // bit flip
        if (!s->empty()) (*s)[Below(s->size())] ^= static_cast<char>(1u << Below(8));
        break;
      case 1:  // random byte
        if (!s->empty()) (*s)[Below(s->size())] = static_cast<char>(Below(256));
        break;
      case 2: {  // insert random bytes
        const size_t n = 1 + Below(8);
        std::string bytes;
        for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(Below(256)));
        s->insert(Pos(*s), bytes);
        break;
      }
      case 3: {  // delete a range
        if (s->empty()) break;
        const size_t at = Below(s->size());
        s->erase(at, 1 + Below(std::min<size_t>(64, s->size() - at)));
        break;
      }
      case 4: {  // duplicate a range
        if (s->empty()) break;
        const size_t at = Below(s->size());
        const std::string piece = s->substr(at, 1 + Below(64));
        s->insert(Pos(*s), piece);
        break;
      }
      case 5: {  // splice: our head, another seed's tail
        if (seeds_.empty()) break;
        const std::string& other = seeds_[Below(seeds_.size())];
        *s = s->substr(0, Pos(*s)) + other.substr(Below(other.size() + 1));
        break;
      }
      case 6: {  // interesting integer, binary, over the input
        const int64_t v = InterestingIntegers()[Below(InterestingIntegers().size())];
        const size_t width = size_t{1} << Below(4);  // 1, 2, 4, 8 bytes
        if (s->size() < width) break;
        const size_t at = Below(s->size() - width + 1);
        const bool big_endian = Below(2) == 0;
        for (size_t i = 0; i < width; ++i) {
          const size_t shift = 8 * (big_endian ? width - 1 - i : i);
          (*s)[at + i] = static_cast<char>((static_cast<uint64_t>(v) >> shift) & 0xff);
        }
        break;
      }
      case 7: {  // interesting number as text, replacing a run of digits or inserted
        const std::string text =
            Below(2) == 0
                ? std::to_string(InterestingIntegers()[Below(InterestingIntegers().size())])
                : InterestingTexts()[Below(InterestingTexts().size())];
        ReplaceDigitsOrInsert(s, text);
        break;
      }
      case 8:
      case 9: {  // dictionary token: inserted, or written over
        if (dictionary_.empty()) break;
        const std::string& token = dictionary_[Below(dictionary_.size())];
        const size_t at = Pos(*s);
        if (Below(2) == 0) {
          s->insert(at, token);
        } else {
          s->replace(at, std::min(token.size(), s->size() - at), token);
        }
        break;
      }
      case 10:  // truncation
        s->resize(Below(s->size() + 1));
        break;
      default: {  // swap two bytes
        if (s->size() < 2) break;
        std::swap((*s)[Below(s->size())], (*s)[Below(s->size())]);
        break;
      }
    }
  }

  void ReplaceDigitsOrInsert(std::string* s, const std::string& text) {
    const size_t start = Pos(*s);
    size_t i = start;
    while (i < s->size() && !std::isdigit(static_cast<unsigned char>((*s)[i]))) ++i;
    if (i == s->size() || Below(4) == 0) {
      s->insert(start, text);
      return;
    }
    size_t j = i;
    while (j < s->size() && (std::isdigit(static_cast<unsigned char>((*s)[j])) || (*s)[j] == '.' ||
                             (*s)[j] == '-' || (*s)[j] == 'e')) {
      ++j;
    }
    s->replace(i, j - i, text);
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>& seeds_;
  const std::vector<std::string>& dictionary_;
  const size_t max_len_;
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

void CopyInto(char* dst, size_t cap, const std::string& src) {
  std::snprintf(dst, cap, "%s", src.c_str());
}

}  // namespace

// The number in variable `name` (or `fallback`); a clear error naming the variable otherwise.
template <typename T>
T EnvNumber(const char* name, T fallback) {
  const std::string text = EnvOr(name, "");
  if (text.empty()) return fallback;
  std::istringstream in(text);
  T value{};
  if (!(in >> value) || !in.eof() || value < 0) {
    throw std::invalid_argument(std::string(name) + ": expected a number >= 0, got '" + text + "'");
  }
  return value;
}

FuzzOptions FuzzOptions::FromEnv(double default_seconds) {
  FuzzOptions o;
  o.seed = EnvNumber<uint64_t>("XV_FUZZ_SEED", 1);
  o.runs = EnvNumber<int64_t>("XV_FUZZ_RUNS", 2000000);
  o.seconds = EnvNumber<double>("XV_FUZZ_SECONDS", default_seconds);
  o.input_timeout_s = EnvNumber<double>("XV_FUZZ_INPUT_TIMEOUT_S", 10);
  o.max_len = EnvNumber<size_t>("XV_FUZZ_MAX_LEN", 65536);
  o.replay = EnvOr("XV_FUZZ_REPLAY", "");
  std::string out = EnvOr("XV_FUZZ_OUT", "");
  if (out.empty()) {
    out = (std::filesystem::temp_directory_path() / ("xv-fuzz-" + std::to_string(::getpid())))
              .string();
  }
  o.out_dir = out;
  return o;
}

std::vector<std::string> ReadCorpusDir(const std::string& dir) {
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> seeds;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    seeds.push_back(buf.str());
  }
  return seeds;
}

std::string ToHex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
    if (i % 64 == 63 || i + 1 == bytes.size()) out.push_back('\n');
  }
  return out;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  int high = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;  // newlines, spaces
    }
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<char>(high * 16 + v));
      high = -1;
    }
  }
  return out;
}

FuzzReport RunFuzzer(const std::string& name, FuzzTarget target,
                     const std::vector<std::string>& seeds,
                     const std::vector<std::string>& dictionary, const FuzzOptions& options) {
  FuzzReport report;
  std::filesystem::create_directories(options.out_dir);
  const std::string stem = options.out_dir + "/" + name;
  CopyInto(g_current.crash_path, sizeof(g_current.crash_path), stem + "-crash.hex");
  CopyInto(g_current.timeout_path, sizeof(g_current.timeout_path), stem + "-timeout.hex");
  g_current.reported = false;
  InstallCrashHandlers();
  Watchdog watchdog(options.input_timeout_s);

  std::vector<std::string> inputs_from_replay;
  if (!options.replay.empty()) {
    std::ifstream in(options.replay);
    std::stringstream buf;
    buf << in.rdbuf();
    inputs_from_replay.push_back(FromHex(buf.str()));
  }
  const bool replaying = !options.replay.empty();
  const std::vector<std::string>& fixed = replaying ? inputs_from_replay : seeds;

  Mutator mutator(options.seed, seeds, dictionary, options.max_len);
  const int64_t start = NowNs();
  const int64_t budget_ns = static_cast<int64_t>(options.seconds * 1e9);
  for (int64_t i = 0;; ++i) {
    const bool from_fixed = i < static_cast<int64_t>(fixed.size());
    if (!from_fixed && (replaying || i >= options.runs || NowNs() - start >= budget_ns)) break;
    const std::string input = from_fixed ? fixed[i] : mutator.Next();
    CopyInto(g_current.banner, sizeof(g_current.banner),
             "target " + name + ", XV_FUZZ_SEED=" + std::to_string(options.seed) + ", input " +
                 std::to_string(i) +
                 (replaying    ? " (replayed from " + options.replay + ")"
                  : from_fixed ? " (a seed)"
                               : " (a mutant)"));
    g_current.data = input.data();
    g_current.size = input.size();
    g_current.started_ns = NowNs();
    std::string failure;
    try {
      target(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    g_current.started_ns = 0;
    ++report.inputs;
    if (failure.empty()) continue;
    ++report.failures;
    const std::string message = std::string(g_current.banner) + ": " + failure;
    if (report.first_failure.empty()) report.first_failure = message;
    if (report.failure_files.size() < 20) {
      const std::string path = stem + "-failure-" + std::to_string(report.failures) + ".hex";
      std::ofstream(path) << ToHex(input);
      report.failure_files.push_back(path);
      std::cerr << "xv fuzz: " << message << "\n  input (" << input.size() << " bytes) in " << path
                << "\n";
    }
  }
  g_current.data = nullptr;
  std::error_code ec;
  std::filesystem::remove(options.out_dir, ec);  // only when empty: nothing to look at
  report.seconds = static_cast<double>(NowNs() - start) / 1e9;
  std::cerr << "xv fuzz: target " << name << ": " << report.inputs << " inputs (" << seeds.size()
            << " seeds) in " << report.seconds << " s, " << report.failures
            << " failures, XV_FUZZ_SEED=" << options.seed << "\n";
  return report;
}

}  // namespace xv::fuzz
