// `xvctl show ID`: one experiment in full: its recipe against the campaign head, its figures, a
// summary of its events and, for a failure, the failure and the tail of its stderr.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// What `show` read of an experiment's stored events (Experiments.Watch replayed from cursor 0).
struct EventsSummary {
  std::map<std::string, int> counts;  // kind -> events
  std::vector<std::string> states;  // "queued", "assigned (attempt 1)", "failed: oom: ..." in order
  bool complete = false;            // the replay reached the experiment's final state
  // An autoresearch trainer's last `source` event (worker/autoresearch_trainer.h): the sha256 of
  // the rewritten train.py that ran and the file it came from ("" when none).
  std::string source_sha256;
  std::string source_file;
};

// Each override of the experiment against the head recipe: {"knob": {"run": v, "head": w}}
// (head null when the head recipe does not have the knob).
nlohmann::json RecipeDiffJson(const v1::Experiment& e, const std::string& head_recipe_json);

// The text of `show`: header, recipe diff, figures, events, failure and stderr tail (the last
// `tail_lines` lines).
std::string RenderExperimentDetail(const v1::Experiment& e, const v1::Campaign& campaign,
                                   const EventsSummary& events, int tail_lines = 20);

// `show --json`: ExperimentJson plus "recipe_diff", "head_recipe_hash", "events" (counts and
// states) and "stderr_tail".
nlohmann::json ExperimentDetailJson(const v1::Experiment& e, const v1::Campaign& campaign,
                                    const EventsSummary& events);

}  // namespace xv::client
