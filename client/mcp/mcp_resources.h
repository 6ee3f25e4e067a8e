// What `xvctl mcp` offers an agent to read, as MCP resources and, for hosts that show only tools,
// as the `knobs` tool:
//  - xv://knobs: the recipe knob table (name, type, default, unit, range, section, doc) as JSON,
//    generated from the registry in common/recipe_knobs.h (the one that checks overrides);
//  - xv://docs/agent.md and xv://docs/plans.md: the guides, embedded at build time.
// Thread-safety: pure functions over read-only tables.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/mcp/mcp_server.h"

namespace xv::client {

// URI of the knob table resource.
inline constexpr char kKnobsResourceUri[] = "xv://knobs";

// {"knobs": [{name, type, default, unit, range, section, doc}]} in the registry's order (empty
// unit and range left out); `only` non-empty: just the knobs whose name contains it.
nlohmann::json KnobTableJson(const std::string& only = "");

// The resources above.
std::vector<McpResource> XvMcpResources();

// The `knobs` tool: the knob table (filtered by `name`), or with `doc` one embedded guide.
McpTool KnobsTool();

// A tool error as the agent should read it over MCP: "see docs/recipe.md for the list" (the
// daemon's words for an unknown knob) becomes a pointer to the knobs tool and the xv://knobs
// resource. Other results are returned unchanged.
McpToolResult PointDocsAtMcp(McpToolResult result);

}  // namespace xv::client
