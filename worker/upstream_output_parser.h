// UpstreamOutputParser: turns the stdout of an upstream autoresearch `train.py` (or a fork of it)
// into xv events (docs/events.md), so such a program runs as a `command` trainer beside xv-train.
//
// What it reads, line by line (a line may hold several '\r'-separated segments: upstream prints its
// progress with end="\r"):
//  - progress:  `step 00042 (12.3%) | loss: 3.456789 | lrm: 1.00 | dt: 312ms | tok/sec: 1,234,567 |
//               mfu: 38.2% | epoch: 1 | remaining: 263s`
//    -> a `step` event {step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, epoch, progress (0..1),
//    remaining_s}; fields a fork leaves out are left out, unknown `key: value` parts are ignored.
//    Step events are rate-limited to one per `min_step_interval_s` (the last one always goes out).
//    A loss that is nan/inf or above 100 -> a `nan` event {step, what: "loss", value} and the run
//    counts as diverged;
//  - `FAIL` (upstream's fast-fail print before exit(1)) -> an `error` event {kind: "diverged"};
//  - the summary block: after a `---` line, `key: number` lines (val_bpb, training_seconds,
//    total_seconds, peak_vram_mb, mfu_percent, total_tokens_M, num_steps, num_params_M, depth, and
//    any other numeric key a fork adds) -> one `summary` event when the block ends (a line that is
//    not `key: value`, or Finish), with `tok_per_sec` (mean of the progress figures after step 10,
//    else total tokens / training seconds), `metric_version` ("upstream" unless set) and
//    `output_format: "upstream"` added. A non-finite val_bpb counts as diverged. num_steps, depth
//    and a progress line's epoch are integers: a value with no int64 value (nan, inf, 1e30) is
//    null in the summary and left out of the step event;
//  - anything else -> a `log` event {text}. A segment that looks like upstream output but does not
//    parse (a `step ...` line without a step number or loss, a `key: value` line of the summary
//    block whose value is not a number) is relayed as a log, counted in malformed_lines(), and
//    never stops the parse.
//
// Thread-safety: none; one parser per attempt, one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace xv::worker {

class UpstreamOutputParser {
 public:
  explicit UpstreamOutputParser(double min_step_interval_s = 0.25)
      : min_step_interval_s_(min_step_interval_s) {}

  // One line of stdout without its '\n'. `now_s` is the wall clock in unix seconds (the events'
  // `t`). Returns the events it completes, in order.
  std::vector<nlohmann::json> ParseLine(std::string_view line, double now_s);
  // The end of the stream: the held-back last step, a pending summary, and an `error` event when
  // the run diverged without printing FAIL.
  std::vector<nlohmann::json> Finish(double now_s);

  // The summary's metric_version ("upstream" unless set): an autoresearch trainer evaluates with
  // xv's prepare module, whose val_bpb is xv's (worker/autoresearch_source.h).
  void set_metric_version(std::string version) { metric_version_ = std::move(version); }

  bool diverged() const { return diverged_; }
  // Why it counts as diverged ("non-finite loss (nan) at step 42"); "" when it did not.
  const std::string& divergence_detail() const { return divergence_detail_; }
  // A summary event with a val_bpb was produced.
  bool summary_emitted() const { return summary_emitted_; }
  int malformed_lines() const { return malformed_lines_; }
  // The first few malformed segments, for the worker's log.
  const std::vector<std::string>& malformed_examples() const { return malformed_examples_; }

 private:
  void ParseSegment(std::string_view segment, double now_s, std::vector<nlohmann::json>* out);
  bool ParseProgress(std::string_view segment, double now_s, std::vector<nlohmann::json>* out);
  void FlushStep(std::vector<nlohmann::json>* out);
  void EndSummaryBlock(double now_s, std::vector<nlohmann::json>* out);
  void MarkDiverged(const std::string& detail);
  void CountMalformed(std::string_view segment);

  const double min_step_interval_s_;
  std::string metric_version_ = "upstream";
  std::optional<nlohmann::json> held_step_;  // the newest step event not yet sent
  double last_step_sent_t_ = -1e300;
  int64_t last_step_ = -1;
  double timed_tok_per_sec_sum_ = 0;
  int64_t timed_tok_per_sec_n_ = 0;
  bool in_summary_ = false;
  nlohmann::json summary_ = nlohmann::json::object();
  bool summary_emitted_ = false;
  bool diverged_ = false;
  bool error_emitted_ = false;
  std::string divergence_detail_;
  int malformed_lines_ = 0;
  std::vector<std::string> malformed_examples_;
};

}  // namespace xv::worker
