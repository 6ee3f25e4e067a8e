// McpServer: the Model Context Protocol server behind `xvctl mcp` (docs/agent.md). It speaks
// JSON-RPC 2.0 over MCP's stdio transport: one JSON message per line in, one per line out, nothing
// else on the output stream (logs go to stderr). Methods: initialize, ping, tools/list, tools/call,
// resources/list, resources/read; the notifications notifications/initialized and
// notifications/cancelled are accepted (neither is answered).
//
// Concurrency (Serve): every tools/call runs on a thread of its own, so a long call (`wait`) never
// holds up the next one (`status`); the other methods are answered on the reading thread at once.
// Messages are written whole, one at a time (one mutex over the output stream), so lines never
// interleave. notifications/cancelled {requestId} marks that call cancelled: its handler sees
// McpCallContext::cancelled() (and SleepFor returns early), its progress notifications stop, and
// its answer is dropped (MCP: the receiver of a cancellation should not respond), with a line on
// stderr saying how long the call ran after it was cancelled. At most kMaxCallsInFlight calls run
// at once; another one is refused (-32603 naming the limit), and an id already in use by a call in
// flight is refused (-32600). At EOF every call in flight is cancelled and joined before Serve
// returns. HandleLine serves one line synchronously (the tool runs on the calling thread), for
// tests.
//
// Errors, as JSON-RPC error objects: -32700 a line that is not JSON; -32600 not a request (not an
// object, jsonrpc not "2.0", method not a string, id neither string nor integer, a batch array);
// -32601 an unknown method; -32602 bad params, naming the field ("params.name: ...") or the unknown
// tool or resource. A notification (no id) never gets a reply, not even an error. A tool's own
// failure (the daemon refused, an argument out of range) is a successful response whose result has
// isError: true (MCP's "tool execution error", SEP-1303), so the model reads the message.
//
// The server checks each call's arguments against the tool's inputSchema before the handler runs,
// as far as the schema's top level goes: arguments must be an object; keys not in "properties" and
// missing "required" keys are refused; a property with "type" (string, integer, number, boolean,
// array, object; or a list of them, or "anyOf" branches with a "type" each) must have one of them,
// with "minimum"/"maximum" and "enum" honoured. Nested shapes are the handler's to check. Refusals
// are tool errors naming the field ("arguments.replicates: ...").
//
// Thread-safety: Serve and HandleLine are called from one thread; tool handlers run concurrently
// (on their own threads under Serve) and must be safe to run at the same time as each other.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace xv::client {

// What a tool call returns: `structured` (a JSON object) is sent as structuredContent and, as
// compact JSON, as the one text content block; `is_error` marks a tool execution error.
struct McpToolResult {
  bool is_error = false;
  nlohmann::json structured = nlohmann::json::object();

  // A successful result carrying `object` (must be a JSON object).
  static McpToolResult Json(nlohmann::json object);
  // A tool error: structured {"error": message, "code": "INVALID_ARGUMENT" ...}; the text content
  // is the message itself.
  static McpToolResult Error(const Status& status);
};

// The server's output stream: each message is written as one line and flushed under one mutex, so
// messages from concurrent calls never interleave. Thread-safety: safe to share.
class McpOutput {
 public:
  explicit McpOutput(std::ostream* out) : out_(out) {}
  void Write(const nlohmann::json& message);

 private:
  Mutex mu_;
  std::ostream* const out_ GUARDED_BY(mu_);
};

// A call's cancellation flag: set once (notifications/cancelled, or EOF on the input), read by the
// handler; SleepFor wakes at once when it is set. Thread-safety: safe to share.
class McpCancellation {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Sleeps `seconds` (or less); true when the whole time passed, false when cancelled.
  bool SleepFor(double seconds);
  // Seconds since Cancel (0 while not cancelled).
  double SecondsSinceCancel();

 private:
  std::atomic<bool> cancelled_{false};
  Mutex mu_;
  std::condition_variable_any cv_;
  std::chrono::steady_clock::time_point cancelled_at_ GUARDED_BY(mu_);
};

// Passed to a handler during one tools/call: sends MCP progress notifications to the client when
// the call carried params._meta.progressToken (otherwise Progress does nothing), and says whether
// the client cancelled the call. Belongs to the call's thread.
class McpCallContext {
 public:
  McpCallContext(McpOutput* out, nlohmann::json progress_token,
                 std::shared_ptr<McpCancellation> cancellation)
      : out_(out),
        progress_token_(std::move(progress_token)),
        cancellation_(std::move(cancellation)) {}
  // notifications/progress {progressToken, progress, total (when > 0), message}. `progress` must
  // grow from one call to the next (MCP); a value not above the last one sent is skipped, and
  // nothing is sent once the call is cancelled.
  void Progress(double progress, double total, const std::string& message);
  // True once the client cancelled this call: the handler should return soon (its answer is
  // dropped).
  bool cancelled() const { return cancellation_ && cancellation_->cancelled(); }
  // Sleeps up to `seconds`; false (early) when the call is cancelled.
  bool SleepFor(double seconds);

 private:
  McpOutput* out_;
  nlohmann::json progress_token_;
  std::shared_ptr<McpCancellation> cancellation_;
  std::optional<double> last_progress_;
};

// MCP tool annotations (hints to the host; tools/list sends them as "annotations").
struct McpToolHints {
  bool read_only = false;  // readOnlyHint: changes nothing
  bool destructive =
      false;                // destructiveHint: may end or undo work (meaningful when not read-only)
  bool idempotent = false;  // idempotentHint: calling it again with the same arguments adds nothing
};

struct McpTool {
  std::string name;
  std::string title;
  std::string description;
  nlohmann::json input_schema;  // a JSON Schema object: {"type": "object", "properties": ...}
  // The shape of structuredContent (sent as outputSchema when not null). A tool error's
  // {"error", "code"} must fit it too: declare properties, require none.
  nlohmann::json output_schema;
  McpToolHints hints;
  // Runs the call with the checked arguments (an object). Must not throw.
  std::function<McpToolResult(const nlohmann::json& arguments, McpCallContext* ctx)> handler;
};

// A read-only document offered through resources/list and resources/read.
struct McpResource {
  std::string uri;  // e.g. "xv://docs/agent.md"
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;              // "text/markdown", "application/json"
  std::function<std::string()> read;  // the text; must not throw
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
  // Calls that may run at once under Serve.
  static constexpr size_t kMaxCallsInFlight = 32;

  McpServer(McpServerInfo info, std::vector<McpTool> tools,
            std::vector<McpResource> resources = {});
  ~McpServer();

  // Reads lines from `in` until EOF and answers each on `out` (flushed after every message),
  // tools/call concurrently (see the file comment). Blank lines are skipped. Returns Ok at EOF,
  // once every call in flight has ended and been answered.
  Status Serve(std::istream& in, std::ostream& out);

  // Handles one line (without its '\n'; a trailing '\r' is ignored) synchronously: writes the
  // notifications a tool sends and then the response, if the line asks for one, to `out`.
  void HandleLine(const std::string& line, std::ostream& out);

  // True once a client sent initialize.
  bool initialized() const { return initialized_; }

 private:
  struct CallInFlight {
    std::shared_ptr<McpCancellation> cancellation;
    std::string tool;
    std::thread thread;
    bool finished = false;
  };

  // One line: answered on `out`; tools/call on a thread of its own when `concurrent`.
  void Handle(const std::string& line, McpOutput* out, bool concurrent);
  // The result of a request, or a JSON-RPC error object in *error.
  nlohmann::json Dispatch(const std::string& method, const nlohmann::json& params, McpOutput* out,
                          nlohmann::json* error);
  nlohmann::json Initialize(const nlohmann::json& params, nlohmann::json* error);
  nlohmann::json ListTools() const;
  nlohmann::json ListResources() const;
  nlohmann::json ReadResource(const nlohmann::json& params, nlohmann::json* error) const;
  // Finds the tool of a tools/call (or sets *error); nullptr on error.
  const McpTool* FindTool(const nlohmann::json& params, nlohmann::json* error) const;
  // Runs the tool and builds the tools/call result.
  nlohmann::json CallTool(const McpTool& tool, const nlohmann::json& params, McpOutput* out,
                          std::shared_ptr<McpCancellation> cancellation) const;
  // Starts a tools/call on its own thread; its response is written by that thread.
  void StartCall(const nlohmann::json& id, const McpTool& tool, const nlohmann::json& params,
                 McpOutput* out);
  // notifications/cancelled: marks the call `request_id` cancelled (nothing when none runs).
  void CancelCall(const nlohmann::json& params);
  // Joins the threads of calls that have ended.
  void ReapFinishedCalls();
  // Joins every call in flight (cancelling them first with CancelAndJoinAll).
  void JoinAll();
  void CancelAndJoinAll();
  void JoinAllCancelling(bool cancel);

  McpServerInfo info_;
  std::vector<McpTool> tools_;
  std::vector<McpResource> resources_;
  bool initialized_ = false;
  Mutex mu_;
  // Calls running under Serve, by their id's JSON text.
  std::map<std::string, CallInFlight> calls_ GUARDED_BY(mu_);
};

// Checks `arguments` against the top level of `schema` (see the file comment). Returns
// InvalidArgument naming "arguments.<key>" on the first problem.
Status CheckToolArguments(const nlohmann::json& schema, const nlohmann::json& arguments);

}  // namespace xv::client
