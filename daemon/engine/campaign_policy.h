// CampaignPolicy: a campaign's acceptance policy (daemon/sched/acceptance_policy.h) plus the two
// keys the daemon itself reads, stored together as JSON in campaigns.policy_json:
//   decide: auto | manual     auto (default): the daemon decides a round when all its experiments
//                             are terminal; manual: rounds wait for the Decide RPC.
//   pool_head_runs: bool      false (default): only this round's controls are head runs; true:
//                             earlier runs of the identical head config in the campaign count
//                             too (they were measured at other times, under other loads: issue
//                             14 made false the default).
// A stored "{}" means "no policy" (campaigns made implicitly by a Submit with a recipe): no head
// controls, no automatic decisions.
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "daemon/sched/acceptance_policy.h"

namespace xv::daemon {

struct CampaignPolicy {
  bool set = false;  // false: "{}", no policy
  sched::AcceptancePolicy acceptance;
  bool manual = false;
  bool pool_head_runs = false;
};

// Parses the policy as people write it: a YAML or JSON mapping ("" gives the defaults, set).
// Errors name the field ("policy: confidence: ...", "policy: decide: ...").
Status ParseCampaignPolicyText(const std::string& text, CampaignPolicy* out);

// Parses campaigns.policy_json ("{}" or "" -> not set).
Status ParseStoredCampaignPolicy(const std::string& json_text, CampaignPolicy* out);

// The stored form; ParseStoredCampaignPolicy(CampaignPolicyToJson(p)) == p for a set policy.
std::string CampaignPolicyToJson(const CampaignPolicy& policy);

}  // namespace xv::daemon
