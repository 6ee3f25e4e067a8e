// The tools of `xvctl mcp` that steer a campaign beyond submit/wait (docs/agent.md § Tools), each
// a call of the gRPC API the CLI uses (client/commands/ablate_command.cc, plan_command.cc,
// campaign_command.cc, watch_command.cc):
//  - ablate, confirm: Submit with round kind ablation / confirm;
//  - campaign_pause, campaign_resume: Campaigns.PauseCampaign / ResumeCampaign;
//  - plan_submit, plan_show, plan_control (cancel, pause, resume): the Plans service;
//  - events: Experiments.Watch replayed after a cursor, a bounded page of stored events.
// Also what submit-like tools answer about cost (SubmissionCost) and the campaign argument they
// share (CampaignNameOf). Thread-safety: the tools share `client` (thread-safe) and nothing else.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/daemon_client.h"
#include "client/mcp/mcp_server.h"
#include "common/status.h"

namespace xv::client {

// The tools listed above.
std::vector<McpTool> CampaignControlTools(std::shared_ptr<DaemonClient> client);

// How many runs a submission queued (replicates and head controls included) and when they should
// be done: {runs, candidate_runs, control_runs, reused (rows that reuse an earlier result and do
// not run), eta_s, eta_basis}. The estimate (EtaEstimate, mcp_answers.h) takes the wall time
// (total_seconds) of the campaign's 20 most recent succeeded runs (any campaign's when it has
// none) and the workers that are connected and not draining (idle or busy). Best effort: a failed
// lookup leaves that part out.
nlohmann::json SubmissionCost(DaemonClient* client, const v1::SubmitResponse& resp);

// A campaign argument as Submit takes it (a name): a string is the name; an integer is an id,
// looked up. NotFound naming `field` for an unknown id.
Status CampaignNameOf(DaemonClient* client, const nlohmann::json& value, const std::string& field,
                      std::string* name);

}  // namespace xv::client
