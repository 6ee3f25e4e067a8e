// xvctl mcp: a Model Context Protocol server on stdin/stdout for AI agents (docs/agent.md). Takes
// the daemon address like every command (--daemon, --state-dir, $XV_DAEMON); the daemon need not
// be up when it starts: each tool call dials it and says how to start it when it does not answer.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/mcp/mcp_resources.h"
#include "client/mcp/mcp_server.h"
#include "client/mcp/mcp_tools.h"

#ifndef XV_VERSION
#define XV_VERSION "dev"
#endif

namespace xv::client {
namespace {

int RunMcp(const ClientOptions& options) {
  // stdout carries the protocol only; everything else (gRPC, logs) goes to stderr.
  std::ios::sync_with_stdio(false);
  // stderr is the server's log: say when calls are cancelled (XV_LOG_LEVEL still wins).
  const char* level = std::getenv("XV_LOG_LEVEL");
  if (level == nullptr || *level == '\0') spdlog::set_level(spdlog::level::info);
  auto client = std::make_shared<DaemonClient>(options);
  McpServerInfo info;
  info.version = XV_VERSION;
  info.instructions = XvMcpInstructions();
  McpServer server(info, XvMcpTools(client, options), XvMcpResources());
  std::cerr << "xvctl mcp: serving MCP on stdin/stdout for xvd at " << client->address()
            << std::endl;
  Status st = server.Serve(std::cin, std::cout);
  if (!st.ok()) return ReportError(st);
  return kExitOk;
}

}  // namespace

void AddMcpCommand(CLI::App* app, const ClientOptions* options) {
  CLI::App* sub = app->add_subcommand(
      "mcp", "serve the Model Context Protocol on stdin/stdout: xv's tools for AI agents");
  sub->footer(
      "An MCP client starts it; stdout carries only JSON-RPC messages, one per line, and logs go "
      "to stderr.\nClient config: {\"mcpServers\": {\"xv\": {\"command\": \"xvctl\", \"args\": "
      "[\"mcp\"]}}}\n(add \"--state-dir\", \"DIR\" or \"--daemon\", \"ADDR\" before \"mcp\" for "
      "another daemon). Tools, the loop and the rules: docs/agent.md (also served as the resource "
      "xv://docs/agent.md)");
  sub->callback([options] {
    int rc = RunMcp(*options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
