// TrainerOutputReader: turns a trainer's stdout lines into the events the worker relays
// (docs/events.md), according to the trainer's configured output format
// (worker/trainer_config.h):
//  - xv-events: a line that is a JSON object with a string `type` is relayed verbatim; any other
//    line becomes {"type":"log","t":...,"text":<line>} so nothing the trainer printed is lost (a
//    JSON line nested deeper than kMaxJsonDepth, common/bounded_json.h, is such a line: its text
//    is relayed, never its structure);
//  - upstream: every line goes through UpstreamOutputParser (progress -> step, summary block ->
//    summary, FAIL / nan loss -> nan + error, anything else -> log);
//  - auto: a line that is an xv JSON event is relayed verbatim, any other goes to the upstream
//    parser.
// It also gathers what the exit classification needs: the last `error` event's message, whether the
// output says the run diverged, and whether a summary was seen.
//
// Thread-safety: none; one reader per attempt, one thread.
#pragma once

#include <string>
#include <vector>

#include "worker/exit_classification.h"
#include "worker/trainer_config.h"
#include "worker/upstream_output_parser.h"

namespace xv::worker {

struct TrainerOutputEvent {
  std::string type;  // start | step | nan | eval | summary | error | log | ...
  std::string json;  // the event object as relayed
};

class TrainerOutputReader {
 public:
  explicit TrainerOutputReader(TrainerOutputFormat format, double min_step_interval_s = 0.25);

  // One stdout line without its '\n' (it may still hold '\r'). `now_s`: unix seconds.
  std::vector<TrainerOutputEvent> ReadLine(const std::string& line, double now_s);
  // The end of stdout: whatever the upstream parser still holds.
  std::vector<TrainerOutputEvent> Finish(double now_s);

  // The `message` of the last `error` event ("" when none).
  const std::string& error_message() const { return error_message_; }
  // The output itself says the run diverged (upstream FAIL, a nan/exploding loss line, a nan
  // val_bpb), with why.
  bool diverged() const { return parser_.diverged(); }
  const std::string& divergence_detail() const { return parser_.divergence_detail(); }
  // A `summary` event of xv's, or one with a val_bpb built from upstream's block, was relayed.
  bool saw_summary() const { return saw_summary_ || parser_.summary_emitted(); }
  int malformed_lines() const { return parser_.malformed_lines(); }
  // The metric_version of summaries built from upstream output (default "upstream").
  void SetUpstreamMetricVersion(const std::string& version) { parser_.set_metric_version(version); }
  const std::vector<std::string>& malformed_examples() const {
    return parser_.malformed_examples();
  }

 private:
  void Take(const nlohmann::json& event, std::vector<TrainerOutputEvent>* out);

  const TrainerOutputFormat format_;
  UpstreamOutputParser parser_;
  std::string error_message_;
  bool saw_summary_ = false;  // an xv summary event passed through
};

// The outcome of an attempt once its output is known: when the worker did not kill the trainer
// and the output says it diverged, the attempt is diverged whatever the exit code (upstream exits
// 1 after FAIL). When `require_summary` (command trainers) and the trainer exited 0 without a
// summary, the attempt failed (crashed: "exited 0 without a summary").
AttemptOutcome ApplyOutputVerdict(const AttemptOutcome& by_exit, KillReason reason,
                                  const TrainerOutputReader& output, bool require_summary);

}  // namespace xv::worker
