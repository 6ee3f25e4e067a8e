// FuzzDriver: a small deterministic mutation fuzzer that runs in CI under GoogleTest (gcc, no
// libFuzzer). Each target has libFuzzer's signature, `int Target(const uint8_t* data, size_t
// size)`, so a libFuzzer build can reuse it unchanged (LLVMFuzzerTestOneInput calling the target).
//
// A target calls the real product parser on the bytes and checks its contract; a broken contract
// throws FuzzContractViolation (XV_FUZZ_CHECK) — an uncaught exception is a crash under libFuzzer,
// and a reported failure here.
//
// RunFuzzer feeds the target every seed, then mutated inputs (bit flips, random bytes, byte inserts
// and deletes, duplicated ranges, splices between seeds, interesting integers in binary and in
// text, the target's dictionary tokens, truncation) drawn from a seeded PRNG: the same seed gives
// the same inputs. It stops after `runs` inputs or `seconds`, whichever comes first. It reports:
//  - an exception escaping the target (a contract violation or a parser that throws): recorded,
//    the input written as hex to <out_dir>/<target>-failure-<n>.hex, and the run goes on;
//  - a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, an ASan/UBSan report): the signal handler
//    (or the sanitizer's death callback) writes the input to <out_dir>/<target>-crash.hex and says
//    so on stderr before the process dies;
//  - a timeout: one input running longer than `input_timeout_s` -> <target>-timeout.hex, then
//  abort.
// Each report names the PRNG seed and the input's index, so `XV_FUZZ_SEED` reproduces the run, and
// `XV_FUZZ_REPLAY=<file.hex>` runs the target on that one input.
//
// Options come from the environment (FuzzOptions::FromEnv):
//   XV_FUZZ_SEED (default 1), XV_FUZZ_RUNS (default 2000000), XV_FUZZ_SECONDS (per target,
//   default given by the caller), XV_FUZZ_INPUT_TIMEOUT_S (default 10), XV_FUZZ_MAX_LEN (default
//   65536), XV_FUZZ_OUT (default: a fresh directory under $TMPDIR), XV_FUZZ_REPLAY.
//
// Thread-safety: one RunFuzzer at a time per process (the crash handler reads process-wide state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace xv::fuzz {

using FuzzTarget = int (*)(const uint8_t* data, size_t size);

// Thrown by a target when the product broke its contract on an input.
class FuzzContractViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define XV_FUZZ_CHECK(cond, what)                                                          \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw ::xv::fuzz::FuzzContractViolation(std::string(__FILE__) + ":" +                \
                                              std::to_string(__LINE__) + ": " #cond ": " + \
                                              std::string(what));                          \
    }                                                                                      \
  } while (0)

struct FuzzOptions {
  uint64_t seed = 1;
  int64_t runs = 2000000;
  double seconds = 10.0;
  double input_timeout_s = 10.0;
  size_t max_len = 65536;
  std::string out_dir;  // created when missing; removed again when nothing was written to it
  std::string replay;   // a .hex file: run only that input

  // Reads the XV_FUZZ_* variables above; `default_seconds` when XV_FUZZ_SECONDS is unset.
  static FuzzOptions FromEnv(double default_seconds);
};

struct FuzzReport {
  int64_t inputs = 0;  // seeds included
  int64_t failures = 0;
  std::vector<std::string> failure_files;  // the .hex files written
  std::string first_failure;               // the first failure's message
  double seconds = 0;
};

// Reads every regular file of `dir` (sorted by name) as a seed; empty when the directory is absent.
std::vector<std::string> ReadCorpusDir(const std::string& dir);

// Runs `target` on the seeds and on mutants of them (see above). `dictionary`: tokens the
// mutator inserts or writes over the input (keywords of the format). `name` names the target in
// reports and file names. At most 20 failures are written; the count goes on.
FuzzReport RunFuzzer(const std::string& name, FuzzTarget target,
                     const std::vector<std::string>& seeds,
                     const std::vector<std::string>& dictionary, const FuzzOptions& options);

// Hex text of `bytes` (two lowercase digits a byte, a newline every 64 bytes) and back.
std::string ToHex(const std::string& bytes);
std::string FromHex(const std::string& hex);

}  // namespace xv::fuzz
