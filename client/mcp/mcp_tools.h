// The tools `xvctl mcp` offers an agent (docs/agent.md § Tools): submit, wait, results,
// experiment, campaign_create, campaign_show, campaign_list, decide, cancel, status, workers,
// knobs (mcp_resources.h) and the campaign controls of mcp_campaign_tools.h. Each is a call (or a
// bounded series of calls) to xvd through DaemonClient, answering with compact JSON
// (mcp_answers.h). A refusal by the daemon (an unknown knob, a no-op override, an unknown
// campaign) or an unreachable daemon is a tool error carrying the daemon's message, which names
// the field (a pointer to docs/recipe.md becomes one to the knobs tool).
// Thread-safety: the tools share `client` (thread-safe) and no other state; McpServer runs calls
// concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/client_options.h"
#include "client/daemon_client.h"
#include "client/mcp/mcp_server.h"

namespace xv::client {

// Longest `wait` an agent may ask for, in seconds; the default is kMcpWaitDefaultS, under the 60 s
// after which common MCP hosts (the TypeScript SDK) give up on a call: `wait` answers timed_out
// and the agent calls again.
constexpr double kMcpWaitMaxS = 3600;
constexpr double kMcpWaitDefaultS = 50;

// The tool table over `client`. `options` gives the state directory that `results` reads
// read-only when no daemon answers.
std::vector<McpTool> XvMcpTools(std::shared_ptr<DaemonClient> client, const ClientOptions& options);

// The initialize result's instructions: the loop an agent runs, in a few sentences.
std::string XvMcpInstructions();

}  // namespace xv::client
