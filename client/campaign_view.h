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

// A table of campaigns: id, name, state, head hash (12 characters), trainer, device filter.
std::string RenderCampaignList(const std::vector<v1::Campaign>& campaigns);

// The text of `campaign show`: header lines, the head history, the rounds table, and for each
// decided round its candidates' statistics (mean, sd, n, head mean/sd/n, improvement, p, band,
// decision, reason).
std::string RenderCampaign(const v1::Campaign& campaign);

}  // namespace xv::client
