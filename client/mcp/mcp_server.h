// McpServer: the Model Context Protocol server behind `xvctl mcp` (docs/agent.md). It speaks
// JSON-RPC 2.0 over MCP's stdio transport: one JSON message per line in, one per line out, nothing
// else on the output stream (logs go to stderr). Methods: initialize, ping, tools/list, tools/call;
// the notifications notifications/initialized and notifications/cancelled are accepted and ignored
// (a call runs to its end: `wait` is bounded by its own timeout_s).
//
// Errors, as JSON-RPC error objects: -32700 a line that is not JSON; -32600 not a request (not an
// object, jsonrpc not "2.0", method not a string, id neither string nor integer, a batch array);
// -32601 an unknown method; -32602 bad params, naming the field ("params.name: ...") or the unknown
// tool. A notification (no id) never gets a reply, not even an error. A tool's own failure (the
// daemon refused, an argument out of range) is a successful response whose result has
// isError: true (MCP's "tool execution error", SEP-1303), so the model reads the message.
//
// The server checks each call's arguments against the tool's inputSchema before the handler runs,
// as far as the schema's top level goes: arguments must be an object; keys not in "properties" and
// missing "required" keys are refused; a property with "type" (string, integer, number, boolean,
// array, object; or a list of them, or "anyOf" branches with a "type" each) must have one of them,
// with "minimum"/"maximum" and "enum" honoured. Nested shapes are the handler's to check. Refusals
// are tool errors naming the field ("arguments.replicates: ...").
//
// Thread-safety: none; one thread calls Serve (or HandleLine). Tool handlers run on that thread.
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::client {

// What a tool call returns: `structured` (a JSON object) is sent as structuredContent and, pretty
// printed, as the one text content block; `is_error` marks a tool execution error.
struct McpToolResult {
  bool is_error = false;
  nlohmann::json structured = nlohmann::json::object();

  // A successful result carrying `object` (must be a JSON object).
  static McpToolResult Json(nlohmann::json object);
  // A tool error: structured {"error": message, "code": "INVALID_ARGUMENT" ...}; the text content
  // is the message itself.
  static McpToolResult Error(const Status& status);
};

// Passed to a handler during one tools/call: sends MCP progress notifications to the client when
// the call carried params._meta.progressToken (otherwise Progress does nothing).
class McpCallContext {
 public:
  McpCallContext(std::ostream* out, nlohmann::json progress_token)
      : out_(out), progress_token_(std::move(progress_token)) {}
  // notifications/progress {progressToken, progress, total (when > 0), message}. `progress` must
  // grow from one call to the next (MCP); a value not above the last one sent is skipped.
  void Progress(double progress, double total, const std::string& message);

 private:
  std::ostream* out_;
  nlohmann::json progress_token_;
  std::optional<double> last_progress_;
};

struct McpTool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;  // a JSON Schema object: {"type": "object", "properties": ...}
  // Runs the call with the checked arguments (an object). Must not throw.
  std::function<McpToolResult(const nlohmann::json& arguments, McpCallContext* ctx)> handler;
};

struct McpServerInfo {
  std::string name = "xv";
  std::string version;
  std::string instructions;  // sent in the initialize result: how to use the tools
};

// The protocol versions the server speaks; the first is its own, answered to a client that asks
// for one not in the list.
const std::vector<std::string>& McpProtocolVersions();

// Encodes one message as a line: compact JSON (strings that are not valid UTF-8 have the bad bytes
// replaced, so a trainer's garbled stderr never breaks the stream) and '\n'.
std::string McpMessageLine(const nlohmann::json& message);

class McpServer {
 public:
  McpServer(McpServerInfo info, std::vector<McpTool> tools);

  // Reads lines from `in` until EOF and answers each on `out` (flushed after every message).
  // Blank lines are skipped. Returns Ok at EOF.
  Status Serve(std::istream& in, std::ostream& out);

  // Handles one line (without its '\n'; a trailing '\r' is ignored): writes the notifications a
  // tool sends and then the response, if the line asks for one, to `out`.
  void HandleLine(const std::string& line, std::ostream& out);

  // True once a client sent initialize.
  bool initialized() const { return initialized_; }

 private:
  // The result of a request, or a JSON-RPC error object in *error.
  nlohmann::json Dispatch(const std::string& method, const nlohmann::json& params,
                          std::ostream& out, nlohmann::json* error);
  nlohmann::json Initialize(const nlohmann::json& params, nlohmann::json* error);
  nlohmann::json ListTools() const;
  nlohmann::json CallTool(const nlohmann::json& params, std::ostream& out, nlohmann::json* error);

  McpServerInfo info_;
  std::vector<McpTool> tools_;
  bool initialized_ = false;
};

// Checks `arguments` against the top level of `schema` (see the file comment). Returns
// InvalidArgument naming "arguments.<key>" on the first problem.
Status CheckToolArguments(const nlohmann::json& schema, const nlohmann::json& arguments);

}  // namespace xv::client
