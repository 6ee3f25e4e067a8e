#include "client/mcp/mcp_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/bounded_json.h"
#include "common/message_field_name.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

using nlohmann::json;

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

// A line longer than this is refused unread (a recipe is small; a runaway client is not).
constexpr size_t kMaxLineBytes = 16u << 20;
// A message nested deeper than this is a parse error (-32700) naming the limit; an argument nested
// deeper than kMaxArgumentDepth within a shallower message is a tool error naming the argument.
constexpr int kMaxLineDepth = 2 * kMaxJsonDepth;
constexpr int kMaxArgumentDepth = 32;
// A string argument longer than this is refused naming the argument (a schema's maxLength, when it
// gives one, is used instead). Names, paths and override texts are far shorter.
constexpr size_t kMaxStringArgumentBytes = 64u << 10;

// Reads one line (without its '\n') into *line, keeping at most `max_bytes` bytes: the rest of a
// longer line is read and dropped, and *size receives the line's whole length. False at EOF with
// nothing read.
bool ReadBoundedLine(std::istream& in, size_t max_bytes, std::string* line, size_t* size) {
  line->clear();
  *size = 0;
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  while (true) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (*size < max_bytes) line->push_back(static_cast<char>(c));
    ++*size;
  }
}

// The nesting depth of a parsed value (0 for a scalar), counted no further than `stop_after`.
int ValueDepth(const json& v, int stop_after) {
  if (!v.is_structured() || stop_after <= 0) return 0;
  int deepest = 0;
  for (const auto& item : v) {
    deepest = std::max(deepest, ValueDepth(item, stop_after - 1));
    if (deepest + 1 >= stop_after) break;
  }
  return deepest + 1;
}

json ErrorObject(int code, const std::string& message) {
  return {{"code", code}, {"message", message}};
}

void WriteError(McpOutput* out, const json& id, const json& error) {
  out->Write({{"jsonrpc", "2.0"}, {"id", id}, {"error", error}});
}

// "string", "integer", ... as JSON Schema names the type of `v`.
const char* SchemaTypeName(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

bool HasSchemaType(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") {
    // 3.0 is an integer to JSON Schema.
    return v.is_number_integer() || v.is_number_unsigned() ||
           (v.is_number_float() && std::isfinite(v.get<double>()) &&
            std::floor(v.get<double>()) == v.get<double>());
  }
  return type == SchemaTypeName(v);
}

// A short, printable rendering of a (depth-bounded) argument value for a message.
std::string Brief(const json& v) {
  std::string s = McpMessageLine(v);
  s.pop_back();  // '\n'
  if (s.size() <= 80) return EscapeForTerminal(s);
  return EscapeForTerminal(Utf8Prefix(s, 77)) + "... (" + std::to_string(s.size()) + " bytes)";
}

// Where `line` first nests deeper than `limit` arrays and objects, as a path of object keys and
// array indices ("params.arguments.policy[0][0]", at most 6 parts), found by one linear scan that
// parses nothing; empty when no key leads there. Lets a too-deep message name its argument.
std::string PathOfDeepNesting(std::string_view line, int limit) {
  struct Level {
    bool object;
    std::string key;
    int index;
  };
  std::vector<Level> stack;
  std::string text, last_string;
  bool in_string = false, escaped = false;
  for (const char c : line) {
    if (in_string) {
      if (escaped) {
        escaped = false;
        text += c;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        last_string = text;
      } else if (text.size() < 64) {
        text += c;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      text.clear();
    } else if (c == ':' && !stack.empty() && stack.back().object) {
      stack.back().key = last_string;
    } else if (c == ',' && !stack.empty() && !stack.back().object) {
      ++stack.back().index;
    } else if (c == '{' || c == '[') {
      if (static_cast<int>(stack.size()) >= limit) break;  // the value opening here is too deep
      stack.push_back({c == '{', "", 0});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    }
  }
  std::string path;
  int parts = 0;
  for (const Level& l : stack) {
    if (++parts > 6) break;
    if (l.object) {
      if (l.key.empty()) break;
      if (!path.empty()) path += ".";
      path += EscapeForTerminal(l.key);
    } else {
      path += "[" + std::to_string(l.index) + "]";
    }
  }
  return path;
}

}  // namespace

McpToolResult McpToolResult::Json(nlohmann::json object) {
  McpToolResult r;
  r.structured = std::move(object);
  return r;
}

McpToolResult McpToolResult::Error(const Status& status) {
  McpToolResult r;
  r.is_error = true;
  r.structured = {{"error", status.message()}, {"code", StatusCodeName(status.code())}};
  return r;
}

void McpOutput::Write(const nlohmann::json& message) {
  const std::string line = McpMessageLine(message);
  MutexLock lock(&mu_);
  *out_ << line;
  out_->flush();
}

void McpCancellation::Cancel() {
  MutexLock lock(&mu_);
  if (cancelled_.exchange(true)) return;
  cancelled_at_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

bool McpCancellation::SleepFor(double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, seconds)));
  MutexLock lock(&mu_);
  cv_.wait_until(mu_, until, [this] { return cancelled_.load(); });
  return !cancelled_.load();
}

double McpCancellation::SecondsSinceCancel() {
  MutexLock lock(&mu_);
  if (!cancelled_.load()) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at_).count();
}

bool McpCallContext::SleepFor(double seconds) {
  if (cancellation_) return cancellation_->SleepFor(seconds);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, seconds)));
  return true;
}

void McpCallContext::Progress(double progress, double total, const std::string& message) {
  if (progress_token_.is_null() || out_ == nullptr || cancelled()) return;
  if (last_progress_ && progress <= *last_progress_) return;
  last_progress_ = progress;
  json params = {{"progressToken", progress_token_}, {"progress", progress}};
  if (total > 0) params["total"] = total;
  if (!message.empty()) params["message"] = message;
  out_->Write({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", params}});
}

const std::vector<std::string>& McpProtocolVersions() {
  static const std::vector<std::string>* versions =
      new std::vector<std::string>{"2025-06-18", "2025-03-26", "2024-11-05"};
  return *versions;
}

std::string McpMessageLine(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status CheckToolArguments(const nlohmann::json& schema, const nlohmann::json& arguments) {
  if (!arguments.is_object()) {
    return Status::InvalidArgument("arguments: expected an object, got " +
                                   std::string(SchemaTypeName(arguments)));
  }
  const json empty = json::object();
  const json& props = schema.contains("properties") && schema["properties"].is_object()
                          ? schema["properties"]
                          : empty;
  for (const auto& [key, value] : arguments.items()) {
    if (!props.contains(key)) {
      std::string known;
      for (const auto& [k, unused] : props.items()) known += (known.empty() ? "" : ", ") + k;
      return Status::InvalidArgument(
          "arguments." + FieldNameForMessage(key) +
          ": unknown argument (known: " + (known.empty() ? "none" : known) + ")");
    }
    const json& prop = props[key];
    const std::string field = "arguments." + key;
    if (ValueDepth(value, kMaxArgumentDepth + 1) > kMaxArgumentDepth) {
      return Status::InvalidArgument(field + ": nested deeper than " +
                                     std::to_string(kMaxArgumentDepth) +
                                     " levels of arrays and objects");
    }
    if (value.is_string()) {
      const size_t limit = prop.contains("maxLength") && prop["maxLength"].is_number_unsigned()
                               ? prop["maxLength"].get<size_t>()
                               : kMaxStringArgumentBytes;
      const size_t size = value.get_ref<const std::string&>().size();
      if (size > limit) {
        return Status::InvalidArgument(field + ": a string of " + std::to_string(size) +
                                       " bytes, over the limit of " + std::to_string(limit));
      }
    }
    // "type": ["string", "integer"] or "anyOf": [{"type": ...}, ...]: the value has one of them.
    std::vector<std::string> alternatives;
    if (prop.contains("type") && prop["type"].is_array()) {
      for (const auto& t : prop["type"]) alternatives.push_back(t.get<std::string>());
    }
    if (prop.contains("anyOf") && prop["anyOf"].is_array()) {
      for (const auto& branch : prop["anyOf"]) {
        if (branch.contains("type") && branch["type"].is_string()) {
          alternatives.push_back(branch["type"].get<std::string>());
        }
      }
    }
    if (!alternatives.empty() &&
        std::none_of(alternatives.begin(), alternatives.end(),
                     [&arg = value](const std::string& t) { return HasSchemaType(arg, t); })) {
      std::string list;
      for (const auto& t : alternatives) list += (list.empty() ? "" : " or ") + t;
      return Status::InvalidArgument(field + ": expected " + list + ", got " +
                                     SchemaTypeName(value) + " " + Brief(value));
    }
    if (prop.contains("type") && prop["type"].is_string()) {
      const std::string type = prop["type"].get<std::string>();
      if (!HasSchemaType(value, type)) {
        return Status::InvalidArgument(field + ": expected " + (type == "integer" ? "an " : "a ") +
                                       type + ", got " + SchemaTypeName(value) + " " +
                                       Brief(value));
      }
      if ((type == "integer" || type == "number")) {
        const double v = value.get<double>();
        if (prop.contains("minimum") && v < prop["minimum"].get<double>()) {
          return Status::InvalidArgument(field + ": must be >= " + Brief(prop["minimum"]) +
                                         ", got " + Brief(value));
        }
        if (prop.contains("maximum") && v > prop["maximum"].get<double>()) {
          return Status::InvalidArgument(field + ": must be <= " + Brief(prop["maximum"]) +
                                         ", got " + Brief(value));
        }
      }
    }
    if (prop.contains("enum") && prop["enum"].is_array()) {
      const json& allowed = prop["enum"];
      if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + Brief(a);
        return Status::InvalidArgument(field + ": must be one of " + list + ", got " +
                                       Brief(value));
      }
    }
  }
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const auto& r : schema["required"]) {
      if (r.is_string() && !arguments.contains(r.get<std::string>())) {
        return Status::InvalidArgument("arguments." + r.get<std::string>() + ": required");
      }
    }
  }
  return Status::Ok();
}

McpServer::McpServer(McpServerInfo info, std::vector<McpTool> tools,
                     std::vector<McpResource> resources)
    : info_(std::move(info)), tools_(std::move(tools)), resources_(std::move(resources)) {}

McpServer::~McpServer() { CancelAndJoinAll(); }

Status McpServer::Serve(std::istream& in, std::ostream& out_stream) {
  McpOutput out(&out_stream);
  std::string line;
  size_t size = 0;
  while (ReadBoundedLine(in, kMaxLineBytes, &line, &size)) {
    if (size > kMaxLineBytes) {
      WriteError(&out, nullptr,
                 ErrorObject(kInvalidRequest, "message of " + std::to_string(size) +
                                                  " bytes: larger than the limit of " +
                                                  std::to_string(kMaxLineBytes)));
      continue;
    }
    Handle(line, &out, /*concurrent=*/true);
    ReapFinishedCalls();
  }
  // No more requests: the calls still running end (a `wait` within its timeout) and are answered,
  // so `printf '...' | xvctl mcp` gets every answer.
  JoinAll();
  return Status::Ok();
}

void McpServer::HandleLine(const std::string& line, std::ostream& out_stream) {
  McpOutput out(&out_stream);
  Handle(line, &out, /*concurrent=*/false);
}

void McpServer::Handle(const std::string& raw, McpOutput* out, bool concurrent) {
  std::string line = raw;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.find_first_not_of(" \t") == std::string::npos) return;
  json msg;
  if (JsonNestingDepth(line, kMaxLineDepth + 1) > kMaxLineDepth) {
    const std::string path = PathOfDeepNesting(line, kMaxLineDepth);
    WriteError(out, nullptr,
               ErrorObject(kParseError,
                           "parse error: " + (path.empty() ? std::string("the message") : path) +
                               " is nested deeper than " + std::to_string(kMaxLineDepth) +
                               " levels of arrays and objects"));
    return;
  }
  if (!ParseBoundedJson(line, "line", &msg, kMaxLineDepth).ok()) {
    WriteError(out, nullptr,
               ErrorObject(kParseError,
                           "parse error: the line is not one JSON value (MCP stdio: "
                           "one JSON-RPC message per line)"));
    return;
  }
  if (msg.is_array()) {
    WriteError(out, nullptr,
               ErrorObject(kInvalidRequest,
                           "invalid request: batches (JSON arrays) are not supported by MCP "
                           "2025-06-18; send one message per line"));
    return;
  }
  if (!msg.is_object()) {
    WriteError(out, nullptr,
               ErrorObject(kInvalidRequest, "invalid request: expected a JSON-RPC object"));
    return;
  }
  const bool has_id = msg.contains("id");
  json id = has_id ? msg["id"] : json(nullptr);
  const bool id_ok = id.is_string() || id.is_number_integer() || id.is_number_unsigned();
  if (!msg.contains("method")) {
    // A response from the client (to a request we never send) or nonsense: no reply for the former.
    if (msg.contains("result") || msg.contains("error")) return;
    WriteError(out, id_ok ? id : json(nullptr),
               ErrorObject(kInvalidRequest, "invalid request: method: required"));
    return;
  }
  if (!msg["method"].is_string()) {
    WriteError(out, id_ok ? id : json(nullptr),
               ErrorObject(kInvalidRequest, "invalid request: method: expected a string"));
    return;
  }
  const std::string method = msg["method"].get<std::string>();
  if (!msg.contains("jsonrpc") || msg["jsonrpc"] != "2.0") {
    if (!has_id) return;
    WriteError(out, id_ok ? id : json(nullptr),
               ErrorObject(kInvalidRequest, "invalid request: jsonrpc: must be \"2.0\""));
    return;
  }
  if (has_id && !id_ok) {
    WriteError(
        out, nullptr,
        ErrorObject(kInvalidRequest, "invalid request: id: must be a string or an integer, got " +
                                         std::string(SchemaTypeName(id))));
    return;
  }
  const json params = msg.contains("params") ? msg["params"] : json::object();
  if (!has_id) {
    // A notification: never answered.
    if (method == "notifications/cancelled") {
      CancelCall(params);
    } else if (method != "notifications/initialized") {
      spdlog::debug("mcp: ignoring notification {}", FieldNameForMessage(method));
    }
    return;
  }
  if (!params.is_object()) {
    WriteError(out, id, ErrorObject(kInvalidParams, "params: expected an object"));
    return;
  }
  json error;
  json result;
  try {
    if (method == "tools/call") {
      const McpTool* tool = FindTool(params, &error);
      if (tool != nullptr && concurrent) {
        StartCall(id, *tool, params, out);
        return;
      }
      if (tool != nullptr) result = CallTool(*tool, params, out, nullptr);
    } else {
      result = Dispatch(method, params, out, &error);
    }
  } catch (const std::exception& e) {
    spdlog::error("mcp: {} failed: {}", FieldNameForMessage(method), e.what());
    error = ErrorObject(kInternalError, std::string("internal error: ") + e.what());
  }
  if (!error.is_null()) {
    WriteError(out, id, error);
  } else {
    out->Write({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
  }
}

nlohmann::json McpServer::Dispatch(const std::string& method, const nlohmann::json& params,
                                   McpOutput*, nlohmann::json* error) {
  if (method == "initialize") return Initialize(params, error);
  if (method == "ping") return json::object();
  if (method == "tools/list") return ListTools();
  if (method == "resources/list") return ListResources();
  if (method == "resources/read") return ReadResource(params, error);
  if (method == "resources/templates/list") return {{"resourceTemplates", json::array()}};
  *error = ErrorObject(kMethodNotFound, "method not found: " + FieldNameForMessage(method) +
                                            " (this server offers initialize, ping, tools/list, "
                                            "tools/call, resources/list, resources/read)");
  return nullptr;
}

nlohmann::json McpServer::Initialize(const nlohmann::json& params, nlohmann::json* error) {
  std::string version = McpProtocolVersions().front();
  if (params.contains("protocolVersion")) {
    if (!params["protocolVersion"].is_string()) {
      *error = ErrorObject(kInvalidParams, "params.protocolVersion: expected a string");
      return nullptr;
    }
    const std::string asked = params["protocolVersion"].get<std::string>();
    const auto& known = McpProtocolVersions();
    if (std::find(known.begin(), known.end(), asked) != known.end()) version = asked;
  }
  if (params.contains("capabilities") && !params["capabilities"].is_object()) {
    *error = ErrorObject(kInvalidParams, "params.capabilities: expected an object");
    return nullptr;
  }
  initialized_ = true;
  json capabilities = {{"tools", json::object()}};
  if (!resources_.empty()) capabilities["resources"] = json::object();
  json result = {{"protocolVersion", version},
                 {"capabilities", capabilities},
                 {"serverInfo", {{"name", info_.name}, {"version", info_.version}}}};
  if (!info_.instructions.empty()) result["instructions"] = info_.instructions;
  return result;
}

nlohmann::json McpServer::ListTools() const {
  json list = json::array();
  for (const auto& t : tools_) {
    json tool = {{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}};
    if (!t.title.empty()) tool["title"] = t.title;
    if (!t.output_schema.is_null()) tool["outputSchema"] = t.output_schema;
    tool["annotations"] = {{"readOnlyHint", t.hints.read_only},
                           {"destructiveHint", t.hints.destructive},
                           {"idempotentHint", t.hints.idempotent},
                           {"openWorldHint", false}};
    list.push_back(std::move(tool));
  }
  return {{"tools", list}};
}

nlohmann::json McpServer::ListResources() const {
  json list = json::array();
  for (const auto& r : resources_) {
    json item = {{"uri", r.uri}, {"name", r.name}, {"mimeType", r.mime_type}};
    if (!r.title.empty()) item["title"] = r.title;
    if (!r.description.empty()) item["description"] = r.description;
    list.push_back(std::move(item));
  }
  return {{"resources", list}};
}

nlohmann::json McpServer::ReadResource(const nlohmann::json& params, nlohmann::json* error) const {
  if (!params.contains("uri") || !params["uri"].is_string()) {
    *error = ErrorObject(kInvalidParams, "params.uri: required, a string (see resources/list)");
    return nullptr;
  }
  const std::string uri = params["uri"].get<std::string>();
  for (const auto& r : resources_) {
    if (r.uri != uri) continue;
    return {{"contents",
             json::array({{{"uri", r.uri}, {"mimeType", r.mime_type}, {"text", r.read()}}})}};
  }
  std::string known;
  for (const auto& r : resources_) known += (known.empty() ? "" : ", ") + r.uri;
  // MCP's "resource not found" code.
  *error = ErrorObject(-32002, "params.uri: no resource '" + FieldNameForMessage(uri) +
                                   "' (resources: " + (known.empty() ? "none" : known) + ")");
  (*error)["data"] = {{"uri", uri}};
  return nullptr;
}

const McpTool* McpServer::FindTool(const nlohmann::json& params, nlohmann::json* error) const {
  if (!params.contains("name")) {
    *error = ErrorObject(kInvalidParams, "params.name: required (the tool to call)");
    return nullptr;
  }
  if (!params["name"].is_string()) {
    *error = ErrorObject(kInvalidParams, "params.name: expected a string");
    return nullptr;
  }
  const std::string name = params["name"].get<std::string>();
  auto tool =
      std::find_if(tools_.begin(), tools_.end(), [&](const McpTool& t) { return t.name == name; });
  if (tool == tools_.end()) {
    std::string known;
    for (const auto& t : tools_) known += (known.empty() ? "" : ", ") + t.name;
    *error = ErrorObject(kInvalidParams, "params.name: unknown tool '" + FieldNameForMessage(name) +
                                             "' (tools: " + known + ")");
    return nullptr;
  }
  return &*tool;
}

nlohmann::json McpServer::CallTool(const McpTool& tool, const nlohmann::json& params,
                                   McpOutput* out,
                                   std::shared_ptr<McpCancellation> cancellation) const {
  json arguments = params.contains("arguments") ? params["arguments"] : json::object();
  if (arguments.is_null()) arguments = json::object();
  json token = nullptr;
  if (params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains("progressToken")) {
    token = params["_meta"]["progressToken"];
  }
  McpToolResult r;
  Status st = CheckToolArguments(tool.input_schema, arguments);
  if (!st.ok()) {
    r = McpToolResult::Error(st);
  } else {
    McpCallContext ctx(out, token, std::move(cancellation));
    r = tool.handler(arguments, &ctx);
  }
  std::string text;
  if (r.is_error && r.structured.contains("error") && r.structured["error"].is_string()) {
    text = r.structured["error"].get<std::string>();
  } else {
    text = r.structured.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})},
          {"structuredContent", r.structured},
          {"isError", r.is_error}};
}

void McpServer::StartCall(const nlohmann::json& id, const McpTool& tool,
                          const nlohmann::json& params, McpOutput* out) {
  const std::string key = id.dump();
  auto cancellation = std::make_shared<McpCancellation>();
  MutexLock lock(&mu_);
  auto existing = calls_.find(key);
  if (existing != calls_.end() && !existing->second.finished) {
    WriteError(out, id,
               ErrorObject(kInvalidRequest,
                           "invalid request: id: " + key + " is in use by a call still running"));
    return;
  }
  size_t running = 0;
  for (const auto& [unused, c] : calls_) running += c.finished ? 0 : 1;
  if (running >= kMaxCallsInFlight) {
    WriteError(out, id,
               ErrorObject(kInternalError, "too many calls at once: " + std::to_string(running) +
                                               " are running (the limit is " +
                                               std::to_string(kMaxCallsInFlight) +
                                               "); wait for an answer or cancel a call"));
    return;
  }
  if (existing != calls_.end()) {
    // The same id, answered already: its thread is about to end.
    existing->second.thread.join();
    calls_.erase(existing);
  }
  CallInFlight& call = calls_[key];
  call.cancellation = cancellation;
  call.tool = tool.name;
  call.thread = std::thread([this, id, key, &tool, params, out, cancellation] {
    json response;
    try {
      response = {
          {"jsonrpc", "2.0"}, {"id", id}, {"result", CallTool(tool, params, out, cancellation)}};
    } catch (const std::exception& e) {
      spdlog::error("mcp: tools/call {} failed: {}", tool.name, e.what());
      response = {
          {"jsonrpc", "2.0"},
          {"id", id},
          {"error", ErrorObject(kInternalError, std::string("internal error: ") + e.what())}};
    }
    {
      // Marked finished before the answer goes out, so a client that reuses the id at once is
      // not refused.
      MutexLock done(&mu_);
      auto it = calls_.find(key);
      if (it != calls_.end()) it->second.finished = true;
    }
    if (cancellation->cancelled()) {
      spdlog::info(
          "mcp: call {} ({}) was cancelled by the client and ended {:.2f} s later; its answer is "
          "dropped",
          EscapeForTerminal(key), tool.name, cancellation->SecondsSinceCancel());
      return;
    }
    out->Write(response);
  });
}

void McpServer::CancelCall(const nlohmann::json& params) {
  if (!params.is_object() || !params.contains("requestId")) return;
  const std::string key = params["requestId"].dump();
  MutexLock lock(&mu_);
  auto it = calls_.find(key);
  if (it == calls_.end() || it->second.finished) {
    spdlog::debug("mcp: notifications/cancelled for {}: no such call running",
                  EscapeForTerminal(key));
    return;
  }
  it->second.cancellation->Cancel();
  std::string reason;
  if (params.contains("reason") && params["reason"].is_string()) {
    reason = EscapeForTerminal(Utf8Prefix(params["reason"].get<std::string>(), 200));
  }
  spdlog::info("mcp: call {} ({}) cancelled by the client{}{}", EscapeForTerminal(key),
               it->second.tool, reason.empty() ? "" : ": ", reason);
}

void McpServer::ReapFinishedCalls() {
  std::vector<std::thread> ended;
  {
    MutexLock lock(&mu_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (!it->second.finished) {
        ++it;
        continue;
      }
      ended.push_back(std::move(it->second.thread));
      it = calls_.erase(it);
    }
  }
  for (auto& t : ended) {
    if (t.joinable()) t.join();
  }
}

void McpServer::JoinAll() { JoinAllCancelling(false); }

void McpServer::CancelAndJoinAll() { JoinAllCancelling(true); }

void McpServer::JoinAllCancelling(bool cancel) {
  std::vector<std::thread> all;
  {
    MutexLock lock(&mu_);
    for (auto& [unused, call] : calls_) {
      if (cancel) call.cancellation->Cancel();
      all.push_back(std::move(call.thread));
    }
    calls_.clear();
  }
  for (auto& t : all) {
    if (t.joinable()) t.join();
  }
}

}  // namespace xv::client
