// How xvctl shows campaigns: the JSON of `campaign show/list --json` and the text of `campaign
// show` (head, rounds, and per candidate the decision statistics: means, sd, n, p, band,
// keep/discard). Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// One round as JSON; "decision" is the parsed decision_json (null when undecided or unparsable,
// the raw text then in "decision_text").
nlohmann::json RoundJson(const v1::RoundInfo& round);

// The campaign as JSON: ids, name, state, objective, policy (parsed), device_filter, trainer,
// budget (parsed), base/head recipe hashes, head_recipe (parsed), rounds and head_history.
nlohmann::json CampaignJson(const v1::Campaign& campaign);

// A round's run order in one line (issue 14): "seed S: [0] head #5 a #1 | [1] a #2 head #6";
// "" when the round has none.
std::string RenderRunOrder(const v1::RoundInfo& round);

// A round's drift figures (rounds.drift_json) in one line: "tok/s head 1000 sd 5 (steps 100.0),
// a 990 sd 4 (steps 99.0) -1.0%; controls' trend +0.4% over 12.0 s; corr(val_bpb, tok/s) -0.20";
// "" when there are none.
std::string RenderDrift(const std::string& drift_json);

// A table of campaigns: id, name, state, head hash (12 characters), trainer, device filter.
std::string RenderCampaignList(const std::vector<v1::Campaign>& campaigns);

// The budget contract (campaigns.budget_json, daemon/engine/budget_contract.h) as one line for a
// person, every field shown with its value or what applies when it is unset:
// "time_budget_s=300, startup_allowance_s=300, eval_allowance_s=300 (hard deadline 900 s),
// max_concurrent=2"; "" or "{}" gives the defaults ("time_budget_s=each recipe's own, ...,
// max_concurrent=no limit"). Fields this client does not know are appended as key=value; text
// that is not a JSON object is shown as it is, marked "(not a JSON object)".
std::string RenderBudgetContract(const std::string& budget_json);

// The text of `campaign show`: header lines (the budget line is RenderBudgetContract), the head
// history, the rounds table, each round's run order and drift line, and for each decided round
// its candidates' statistics (mean, sd, n,
// head mean/sd/n, improvement, p, band, decision, reason).
std::string RenderCampaign(const v1::Campaign& campaign);

}  // namespace xv::client
