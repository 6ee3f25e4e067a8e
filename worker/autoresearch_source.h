// AutoresearchSource: the knobs of an autoresearch fork are module constants of its train.py
// (`MATRIX_LR = 0.04`, `WINDOW_PATTERN = "SSSL"`); this file finds them and rewrites them from a
// resolved recipe, so that an override reaches the fork instead of being a silent no-op
// (docs/autoresearch.md has the table).
//
// Top-level constants: a line that starts at column 0 with an upper-case name
// ([A-Z][A-Z0-9_]*), an optional annotation, `=` (not `==`) and a value that ends on the same line
// (brackets and quotes balanced; a trailing `# comment` is kept). A name assigned more than once is
// rewritten at every assignment. A constant whose value continues on the next line cannot be
// rewritten and is refused by name.
//
// The knob map: every recipe knob (common/recipe_knobs.h) has a constant, upstream's name where
// upstream has one (train_sequence_len -> MAX_SEQ_LEN, time_budget_s -> TIME_BUDGET, and the
// other names upper-cased: matrix_lr -> MATRIX_LR, adam_betas -> ADAM_BETAS, ...), and how it
// reaches the fork:
//  - kConstant: written into the constant. When the file has no such constant and the recipe's
//    value differs from xv's default (upstream's value, which the fork then hard-codes), the
//    attempt is refused before the trainer starts, naming the knob, the constant and the file;
//  - kPrepare: the `prepare` module gives it (MAX_SEQ_LEN, EVAL_SEQ_LEN, TIME_BUDGET,
//    EVAL_TOKENS from XV_*); a constant of that name in train.py is rewritten too, its absence is
//    fine. seed (SEED) and vocab_size (VOCAB_SIZE; the data directory's tokenizer decides) work
//    the same way. Upstream's train.py trains at and builds its model for MAX_SEQ_LEN while
//    prepare's evaluate_bpb evaluates at its own length, so MAX_SEQ_LEN is the training length
//    (train_sequence_len, or sequence_len when that is 0) and sequence_len, the campaign's
//    evaluation length, is prepare's EVAL_SEQ_LEN: an unmodified fork trains at one context and
//    is evaluated at the campaign's;
//  - kWorker: the worker decides it (device: the visible GPU; threads: OMP_NUM_THREADS); never
//    written into the file.
// Values become Python literals: numbers as JSON writes them (shortest round trip), strings
// double-quoted, booleans True/False, lists as tuples ((0.8, 0.95)).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv::worker {

// The val_bpb definition of python/xv_autoresearch/prepare.py's evaluate_bpb: xv-train's
// (trainer/eval/bpb_evaluator.h kBpbMetricVersion; tests/unit/python checks all three agree).
inline constexpr const char* kPrepareModuleMetricVersion = "bpb-raw-bytes-v2";

enum class KnobSupply { kConstant, kPrepare, kWorker };

struct KnobConstant {
  std::string knob;      // recipe knob name
  std::string constant;  // the fork's module constant ("" for kWorker)
  KnobSupply supply = KnobSupply::kConstant;
  // When the knob's value is 0, the constant takes this knob's value instead ("" = none):
  // train_sequence_len 0 means sequence_len.
  std::string zero_means;
};

// The map for every recipe knob, in the knob table's order.
const std::vector<KnobConstant>& AutoresearchKnobMap();

// One top-level assignment of a source file.
struct SourceConstant {
  std::string name;
  size_t line = 0;         // 1-based
  size_t value_begin = 0;  // byte offsets of the value text in the file
  size_t value_end = 0;
  bool multi_line = false;  // the value continues on the next line (not rewritable)
};

// Every top-level assignment of `source`, in file order.
std::vector<SourceConstant> FindTopLevelConstants(const std::string& source);

// A JSON value as a Python literal (see the file comment). Objects are not knob values: "None".
std::string PythonLiteral(const nlohmann::json& value);

struct RewrittenSource {
  std::string text;                                           // the rewritten file
  std::string sha256;                                         // of `text`
  std::vector<std::pair<std::string, std::string>> assigned;  // constant -> literal, map order
};

// Rewrites `source` (named `source_name` in errors) from `recipe` (the resolved recipe object;
// nested objects such as `derived` are ignored) against `defaults` (the default recipe object).
// Errors (INVALID_ARGUMENT): a kConstant knob whose constant is missing while its value differs
// from the default ("matrix_lr: train.py has no top-level constant MATRIX_LR; the fork would
// ignore the override (recipe 0.02, default 0.04): add `MATRIX_LR = ...` to the file, or leave
// matrix_lr at its default"), or a constant to rewrite that spans several lines.
Status RewriteSourceConstants(const std::string& source, const std::string& source_name,
                              const nlohmann::json& recipe, const nlohmann::json& defaults,
                              RewrittenSource* out);

}  // namespace xv::worker
