// McpServer's protocol layer without processes: JSON-RPC framing, errors, notifications, tool
// listing and calls, argument checks against the input schema, progress notifications.
#include "client/mcp/mcp_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

namespace xv::client {
namespace {

using nlohmann::json;

// Two tools: echo (returns its arguments; fails with the daemon-like message when told to) and
// slow (sends two progress notifications).
std::vector<McpTool> TestTools() {
  McpTool echo;
  echo.name = "echo";
  echo.description = "returns its arguments";
  echo.input_schema = {
      {"type", "object"},
      {"properties",
       {{"text", {{"type", "string"}}},
        {"count", {{"type", "integer"}, {"minimum", 1}, {"maximum", 10}}},
        {"mode", {{"type", "string"}, {"enum", json::array({"ok", "refuse", "garble"})}}},
        {"who", {{"anyOf", json::array({{{"type", "string"}}, {{"type", "integer"}}})}}}}},
      {"required", json::array({"text"})}};
  echo.handler = [](const json& args, McpCallContext*) {
    if (args.value("mode", "ok") == "refuse") {
      return McpToolResult::Error(
          Status::InvalidArgument("candidates[0]: unknown knob 'matrix_lrr'"));
    }
    if (args.value("mode", "ok") == "garble") {
      return McpToolResult::Json({{"tail", std::string("bad \xff\xfe bytes")}});
    }
    return McpToolResult::Json({{"echo", args}});
  };
  McpTool slow;
  slow.name = "slow";
  slow.description = "reports progress";
  slow.input_schema = {{"type", "object"}, {"properties", json::object()}};
  slow.handler = [](const json&, McpCallContext* ctx) {
    ctx->Progress(1, 2, "half");
    ctx->Progress(1, 2, "not sent: no progress");
    ctx->Progress(2, 2, "all");
    return McpToolResult::Json({{"done", true}});
  };
  // block: sleeps until the call is cancelled (at most 30 s), then says how it ended.
  McpTool block;
  block.name = "block";
  block.description = "blocks until cancelled";
  block.input_schema = {{"type", "object"}, {"properties", json::object()}};
  block.hints.read_only = true;
  block.output_schema = {{"type", "object"},
                         {"properties", {{"cancelled", {{"type", "boolean"}}}}}};
  block.handler = [](const json&, McpCallContext* ctx) {
    const bool slept = ctx->SleepFor(30);
    return McpToolResult::Json({{"cancelled", !slept}});
  };
  return {echo, slow, block};
}

std::vector<McpResource> TestResources() {
  McpResource guide;
  guide.uri = "xv://docs/guide.md";
  guide.name = "guide";
  guide.title = "The guide";
  guide.description = "how to";
  guide.mime_type = "text/markdown";
  guide.read = [] { return std::string("# Guide\n"); };
  return {guide};
}

class McpServerTest : public ::testing::Test {
 protected:
  McpServerTest() : server_({"xv", "9.9.9", "use the tools"}, TestTools(), TestResources()) {}

  // Every line the server writes for one input line, parsed.
  std::vector<json> Send(const std::string& line) {
    std::ostringstream out;
    server_.HandleLine(line, out);
    std::vector<json> messages;
    std::istringstream lines(out.str());
    std::string l;
    while (std::getline(lines, l)) {
      json j = json::parse(l, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << l;
      messages.push_back(j);
    }
    EXPECT_TRUE(out.str().empty() || out.str().back() == '\n');
    return messages;
  }

  // The one response to a request.
  json Request(const json& request) {
    std::vector<json> m = Send(request.dump());
    EXPECT_EQ(m.size(), 1u) << request.dump();
    return m.empty() ? json() : m.back();
  }

  json Call(const std::string& tool, const json& arguments, int id = 7) {
    return Request({{"jsonrpc", "2.0"},
                    {"id", id},
                    {"method", "tools/call"},
                    {"params", {{"name", tool}, {"arguments", arguments}}}});
  }

  McpServer server_;
};

TEST_F(McpServerTest, InitializeAnswersVersionServerInfoAndCapabilities) {
  json r = Request({{"jsonrpc", "2.0"},
                    {"id", 1},
                    {"method", "initialize"},
                    {"params",
                     {{"protocolVersion", "2025-06-18"},
                      {"capabilities", json::object()},
                      {"clientInfo", {{"name", "test"}, {"version", "1"}}}}}});
  EXPECT_EQ(r["jsonrpc"], "2.0");
  EXPECT_EQ(r["id"], 1);
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "xv");
  EXPECT_EQ(r["result"]["serverInfo"]["version"], "9.9.9");
  EXPECT_TRUE(r["result"]["capabilities"]["tools"].is_object());
  EXPECT_EQ(r["result"]["instructions"], "use the tools");
  EXPECT_TRUE(server_.initialized());
}

TEST_F(McpServerTest, InitializeEchoesASupportedOlderVersionAndAnswersItsOwnOtherwise) {
  json older = Request({{"jsonrpc", "2.0"},
                        {"id", "a"},
                        {"method", "initialize"},
                        {"params", {{"protocolVersion", "2025-03-26"}}}});
  EXPECT_EQ(older["result"]["protocolVersion"], "2025-03-26");
  json unknown = Request({{"jsonrpc", "2.0"},
                          {"id", "b"},
                          {"method", "initialize"},
                          {"params", {{"protocolVersion", "1999-01-01"}}}});
  EXPECT_EQ(unknown["result"]["protocolVersion"], "2025-06-18");
  json bad = Request({{"jsonrpc", "2.0"},
                      {"id", "c"},
                      {"method", "initialize"},
                      {"params", {{"protocolVersion", 2025}}}});
  EXPECT_EQ(bad["error"]["code"], -32602);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("params.protocolVersion"),
            std::string::npos);
}

TEST_F(McpServerTest, IdsAreEchoedExactly) {
  for (const json& id : {json(0), json(42), json(9007199254740993LL), json("req-1"), json("")}) {
    json r = Request({{"jsonrpc", "2.0"}, {"id", id}, {"method", "ping"}});
    EXPECT_EQ(r["id"], id) << r.dump();
    EXPECT_EQ(r["result"], json::object());
  }
}

TEST_F(McpServerTest, NotificationsGetNoReply) {
  EXPECT_TRUE(Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").empty());
  EXPECT_TRUE(
      Send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})")
          .empty());
  // Unknown or malformed notifications are not answered either (there is no id to answer).
  EXPECT_TRUE(Send(R"({"jsonrpc":"2.0","method":"no/such/notification"})").empty());
  EXPECT_TRUE(Send(R"({"jsonrpc":"2.0","method":"tools/call","params":"x"})").empty());
  EXPECT_TRUE(Send(R"({"method":"ping"})").empty());
  // A response from the client is not answered.
  EXPECT_TRUE(Send(R"({"jsonrpc":"2.0","id":5,"result":{}})").empty());
  // Blank lines are skipped.
  EXPECT_TRUE(Send("").empty());
  EXPECT_TRUE(Send("   \r").empty());
}

TEST_F(McpServerTest, MalformedJsonIsAParseErrorWithNullId) {
  for (const std::string line : {"{", "{\"jsonrpc\":\"2.0\",\"id\":1,", "hello", "{'a':1}"}) {
    std::vector<json> m = Send(line);
    ASSERT_EQ(m.size(), 1u) << line;
    EXPECT_EQ(m[0]["error"]["code"], -32700) << line;
    EXPECT_TRUE(m[0]["id"].is_null());
    EXPECT_EQ(m[0]["jsonrpc"], "2.0");
  }
}

TEST_F(McpServerTest, InvalidRequestsAreRefused) {
  json batch = Send(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])").at(0);
  EXPECT_EQ(batch["error"]["code"], -32600);
  EXPECT_NE(batch["error"]["message"].get<std::string>().find("batch"), std::string::npos);
  EXPECT_EQ(Send("42").at(0)["error"]["code"], -32600);
  json no_version = Send(R"({"id":3,"method":"ping"})").at(0);
  EXPECT_EQ(no_version["error"]["code"], -32600);
  EXPECT_EQ(no_version["id"], 3);
  EXPECT_NE(no_version["error"]["message"].get<std::string>().find("jsonrpc"), std::string::npos);
  json object_id = Send(R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})").at(0);
  EXPECT_EQ(object_id["error"]["code"], -32600);
  EXPECT_TRUE(object_id["id"].is_null());
  json method_number = Send(R"({"jsonrpc":"2.0","id":4,"method":12})").at(0);
  EXPECT_EQ(method_number["error"]["code"], -32600);
  EXPECT_EQ(method_number["id"], 4);
}

TEST_F(McpServerTest, UnknownMethodIsMethodNotFoundWithTheId) {
  json r = Request({{"jsonrpc", "2.0"}, {"id", 9}, {"method", "prompts/list"}});
  EXPECT_EQ(r["id"], 9);
  EXPECT_EQ(r["error"]["code"], -32601);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("prompts/list"), std::string::npos);
  EXPECT_FALSE(r.contains("result"));
}

TEST_F(McpServerTest, ToolsListHasNamesDescriptionsAndSchemas) {
  json r = Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
  const json& tools = r["result"]["tools"];
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0]["name"], "echo");
  EXPECT_EQ(tools[0]["description"], "returns its arguments");
  EXPECT_EQ(tools[0]["inputSchema"]["type"], "object");
  EXPECT_EQ(tools[0]["inputSchema"]["required"], json::array({"text"}));
  EXPECT_FALSE(tools[0].contains("outputSchema"));
  EXPECT_EQ(tools[0]["annotations"]["readOnlyHint"], false);
  EXPECT_EQ(tools[0]["annotations"]["destructiveHint"], false);
  EXPECT_EQ(tools[1]["name"], "slow");
  EXPECT_EQ(tools[2]["annotations"]["readOnlyHint"], true);
  EXPECT_EQ(tools[2]["outputSchema"]["properties"]["cancelled"]["type"], "boolean");
}

TEST_F(McpServerTest, ResourcesAreListedAndReadAndAnUnknownUriIsNamed) {
  json init = Request(
      {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", json::object()}});
  EXPECT_TRUE(init["result"]["capabilities"]["resources"].is_object()) << init.dump();
  json list = Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "resources/list"}});
  ASSERT_EQ(list["result"]["resources"].size(), 1u) << list.dump();
  EXPECT_EQ(list["result"]["resources"][0]["uri"], "xv://docs/guide.md");
  EXPECT_EQ(list["result"]["resources"][0]["mimeType"], "text/markdown");
  json read = Request({{"jsonrpc", "2.0"},
                       {"id", 3},
                       {"method", "resources/read"},
                       {"params", {{"uri", "xv://docs/guide.md"}}}});
  ASSERT_EQ(read["result"]["contents"].size(), 1u) << read.dump();
  EXPECT_EQ(read["result"]["contents"][0]["text"], "# Guide\n");
  EXPECT_EQ(read["result"]["contents"][0]["uri"], "xv://docs/guide.md");
  json unknown = Request({{"jsonrpc", "2.0"},
                          {"id", 4},
                          {"method", "resources/read"},
                          {"params", {{"uri", "xv://nope"}}}});
  EXPECT_EQ(unknown["error"]["code"], -32002);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("xv://docs/guide.md"),
            std::string::npos)
      << unknown.dump();
  json missing = Request({{"jsonrpc", "2.0"}, {"id", 5}, {"method", "resources/read"}});
  EXPECT_EQ(missing["error"]["code"], -32602);
}

// Serve runs each tools/call on its own thread: a blocking call does not hold up a ping or another
// call, notifications/cancelled ends it early and its answer is dropped (Serve, which waits for
// the calls still running at EOF, returns long before the 30 s the blocking tool would sleep).
TEST_F(McpServerTest, ServeRunsCallsConcurrentlyAndHonoursCancellation) {
  std::istringstream in(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}})"
      "\n"
      R"({"jsonrpc":"2.0","id":2,"method":"ping"})"
      "\n"
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}})"
      "\n"
      // A cancellation of a call that is not running changes nothing.
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}})"
      "\n");
  std::ostringstream out;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(server_.Serve(in, out).ok());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 10) << "a blocked call held Serve";
  std::istringstream lines(out.str());
  std::set<std::string> answered;
  std::string l;
  while (std::getline(lines, l)) {
    json m = json::parse(l);
    ASSERT_TRUE(m.contains("id")) << l;
    answered.insert(m["id"].dump());
    if (m["id"] == 3) EXPECT_EQ(m["result"]["structuredContent"]["echo"]["text"], "x");
  }
  // 1 was cancelled by the client: not answered.
  EXPECT_EQ(answered, (std::set<std::string>{"2", "3"})) << out.str();
}

TEST_F(McpServerTest, CallContextSleepEndsEarlyWhenCancelled) {
  auto cancellation = std::make_shared<McpCancellation>();
  std::ostringstream sink;
  McpOutput out(&sink);
  McpCallContext ctx(&out, "tok", cancellation);
  EXPECT_TRUE(ctx.SleepFor(0.01));
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancellation->Cancel();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ctx.SleepFor(20));
  canceller.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5);
  EXPECT_TRUE(ctx.cancelled());
  // No progress once cancelled.
  ctx.Progress(1, 2, "late");
  EXPECT_EQ(sink.str(), "");
}

TEST_F(McpServerTest, BadToolsCallParamsAreInvalidParamsNamingTheField) {
  json no_name = Request({{"jsonrpc", "2.0"},
                          {"id", 1},
                          {"method", "tools/call"},
                          {"params", {{"arguments", json::object()}}}});
  EXPECT_EQ(no_name["error"]["code"], -32602);
  EXPECT_NE(no_name["error"]["message"].get<std::string>().find("params.name"), std::string::npos);
  json name_number =
      Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"}, {"params", {{"name", 5}}}});
  EXPECT_EQ(name_number["error"]["code"], -32602);
  json unknown = Request(
      {{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/call"}, {"params", {{"name", "nope"}}}});
  EXPECT_EQ(unknown["error"]["code"], -32602);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("unknown tool 'nope'"),
            std::string::npos);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("echo, slow, block"),
            std::string::npos);
  json params_array = Send(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]})").at(0);
  EXPECT_EQ(params_array["error"]["code"], -32602);
  EXPECT_EQ(params_array["id"], 4);
  EXPECT_NE(params_array["error"]["message"].get<std::string>().find("params"), std::string::npos);
}

TEST_F(McpServerTest, ToolResultHasTextAndStructuredContent) {
  json r = Call("echo", {{"text", "hi"}, {"count", 3}}, 11);
  EXPECT_EQ(r["id"], 11);
  const json& result = r["result"];
  EXPECT_EQ(result["isError"], false);
  EXPECT_EQ(result["structuredContent"]["echo"]["text"], "hi");
  EXPECT_EQ(result["structuredContent"]["echo"]["count"], 3);
  ASSERT_EQ(result["content"].size(), 1u);
  EXPECT_EQ(result["content"][0]["type"], "text");
  // The text is the same JSON, compact (one line: a model's context is not spent on indentation).
  const std::string text = result["content"][0]["text"].get<std::string>();
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_EQ(text.find(": "), std::string::npos) << text;
  EXPECT_EQ(json::parse(text), result["structuredContent"]);
}

TEST_F(McpServerTest, ToolFailureIsAResultWithIsErrorAndTheMessage) {
  json r = Call("echo", {{"text", "x"}, {"mode", "refuse"}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["content"][0]["text"], "candidates[0]: unknown knob 'matrix_lrr'");
  EXPECT_EQ(r["result"]["structuredContent"]["code"], "INVALID_ARGUMENT");
}

TEST_F(McpServerTest, ArgumentsAreCheckedAgainstTheSchemaNamingTheField) {
  struct Case {
    json args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"count", 2}}, "arguments.text: required"},
      {{{"text", 5}}, "arguments.text: expected a string, got integer 5"},
      {{{"text", "x"}, {"count", 2.5}}, "arguments.count: expected an integer"},
      {{{"text", "x"}, {"count", 0}}, "arguments.count: must be >= 1, got 0"},
      {{{"text", "x"}, {"count", 11}}, "arguments.count: must be <= 10, got 11"},
      {{{"text", "x"}, {"mode", "fast"}}, "arguments.mode: must be one of \"ok\", \"refuse\""},
      {{{"text", "x"}, {"who", true}}, "arguments.who: expected string or integer, got boolean"},
      {{{"text", "x"}, {"colour", "red"}},
       "arguments.colour: unknown argument (known: count, mode, text, who)"},
      {json::array({1}), "arguments: expected an object, got array"},
  };
  for (const auto& c : cases) {
    json r = Call("echo", c.args);
    ASSERT_TRUE(r.contains("result")) << c.args.dump() << " -> " << r.dump();
    EXPECT_EQ(r["result"]["isError"], true) << c.args.dump();
    const std::string text = r["result"]["content"][0]["text"].get<std::string>();
    EXPECT_NE(text.find(c.expect), std::string::npos) << c.args.dump() << " -> " << text;
  }
  // 3.0 is an integer; absent arguments are an empty object.
  EXPECT_EQ(Call("echo", {{"text", "x"}, {"count", 3.0}})["result"]["isError"], false);
  json no_args = Request(
      {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"}, {"params", {{"name", "slow"}}}});
  EXPECT_EQ(no_args["result"]["isError"], false) << no_args.dump();
}

TEST_F(McpServerTest, DeepLinesAreParseErrorsAndTheServerKeepsServing) {
  // 100,000 levels: refused by a scan before any parser or dump() sees them.
  for (const std::string& line :
       {std::string(100000, '[') + std::string(100000, ']'),
        R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":)" + std::string(100000, '[')}) {
    std::vector<json> m = Send(line);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0]["error"]["code"], -32700);
    EXPECT_TRUE(m[0]["id"].is_null());
    EXPECT_NE(m[0]["error"]["message"].get<std::string>().find("nested deeper than 128 levels"),
              std::string::npos)
        << m[0].dump();
  }
  EXPECT_EQ(Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "ping"}})["id"], 2);
}

TEST_F(McpServerTest, DeepOrHugeArgumentsAreToolErrorsNamingTheArgument) {
  auto call_line = [](const std::string& arguments) {
    return R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":)" +
           arguments + "}}";
  };
  auto tool_error = [&](const std::string& arguments) -> std::string {
    std::vector<json> m = Send(call_line(arguments));
    EXPECT_EQ(m.size(), 1u);
    if (m.empty() || !m[0].contains("result")) return "no result: " + json(m).dump();
    EXPECT_EQ(m[0]["result"]["isError"], true);
    return m[0]["result"]["content"][0]["text"].get<std::string>();
  };
  // 40 levels inside a 45-level message: within the line's limit, over the argument's.
  std::string text =
      tool_error(R"({"text":"x","who":)" + std::string(40, '[') + std::string(40, ']') + "}");
  EXPECT_EQ(text, "arguments.who: nested deeper than 32 levels of arrays and objects");
  // A 100 KB string argument.
  text = tool_error(R"({"text":")" + std::string(100 * 1024, 'a') + "\"}");
  EXPECT_EQ(text, "arguments.text: a string of 102400 bytes, over the limit of 65536");
  // A 1 MiB unknown key holding ESC: a short, escaped excerpt with its size.
  text = tool_error(R"({"text":"x",")" + std::string("\\u001b]0;pwned\\u0007") +
                    std::string(1 << 20, 'k') + "\":1}");
  EXPECT_NE(text.find("(1048586 bytes)"), std::string::npos) << text.substr(0, 300);
  EXPECT_NE(text.find("\\x1b]0;pwned\\x07"), std::string::npos) << text.substr(0, 300);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_LT(text.size(), 400u);
  // A long value quoted in a type error is cut, on a character boundary.
  text = tool_error(R"({"text":"x","count":[")" + std::string(1000, 'z') + "\"]}");
  EXPECT_LT(text.size(), 200u) << text;
  // A 1 MiB tool name and method name come back short.
  std::vector<json> m =
      Send(R"({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":")" +
           std::string(1 << 20, 'n') + "\"}}");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["error"]["code"], -32602);
  EXPECT_LT(m[0]["error"]["message"].get<std::string>().size(), 400u);
  m = Send(R"({"jsonrpc":"2.0","id":11,"method":")" + std::string(1 << 20, 'm') + "\"}");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["error"]["code"], -32601);
  EXPECT_LT(m[0]["error"]["message"].get<std::string>().size(), 400u);
}

TEST_F(McpServerTest, ProgressNotificationsPrecedeTheResponseOnlyWithAToken) {
  std::vector<json> m = Send(
      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"tok"}}})");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["method"], "notifications/progress");
  EXPECT_FALSE(m[0].contains("id"));
  EXPECT_EQ(m[0]["params"]["progressToken"], "tok");
  EXPECT_EQ(m[0]["params"]["progress"], 1);
  EXPECT_EQ(m[0]["params"]["total"], 2);
  EXPECT_EQ(m[0]["params"]["message"], "half");
  EXPECT_EQ(m[1]["params"]["progress"], 2);
  EXPECT_EQ(m[2]["id"], 5);
  EXPECT_EQ(m[2]["result"]["structuredContent"]["done"], true);
  std::vector<json> quiet =
      Send(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"slow"}})");
  ASSERT_EQ(quiet.size(), 1u);
  EXPECT_EQ(quiet[0]["id"], 6);
}

TEST_F(McpServerTest, InvalidUtf8InAToolResultStillMakesOneValidLine) {
  std::vector<json> m = Send(
      R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","mode":"garble"}}})");
  ASSERT_EQ(m.size(), 1u);
  const std::string tail = m[0]["result"]["structuredContent"]["tail"].get<std::string>();
  EXPECT_EQ(tail.substr(0, 4), "bad ");
  EXPECT_NE(tail.find("bytes"), std::string::npos);
}

TEST_F(McpServerTest, ServeDropsAnOverlongLineUnkeptAndAnswersTheNext) {
  // 17 MiB without a newline: refused as one line over the 16 MiB limit, never held whole.
  std::istringstream in(std::string(17u << 20, ' ') + "x\n" +
                        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n");
  std::ostringstream out;
  ASSERT_TRUE(server_.Serve(in, out).ok());
  std::istringstream lines(out.str());
  std::vector<json> m;
  std::string l;
  while (std::getline(lines, l)) m.push_back(json::parse(l));
  ASSERT_EQ(m.size(), 2u) << out.str().substr(0, 500);
  EXPECT_EQ(m[0]["error"]["code"], -32600);
  EXPECT_NE(m[0]["error"]["message"].get<std::string>().find("message of 17825793 bytes"),
            std::string::npos)
      << m[0].dump();
  EXPECT_EQ(m[1]["id"], 3);
}

TEST_F(McpServerTest, ServeAnswersLineByLineUntilEof) {
  std::istringstream in(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\r\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
      "\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
      "not json\n"
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");  // no final newline
  std::ostringstream out;
  ASSERT_TRUE(server_.Serve(in, out).ok());
  std::istringstream lines(out.str());
  std::vector<json> m;
  std::string l;
  while (std::getline(lines, l)) m.push_back(json::parse(l));
  ASSERT_EQ(m.size(), 4u) << out.str();
  EXPECT_EQ(m[0]["id"], 1);
  EXPECT_EQ(m[1]["id"], 2);
  EXPECT_EQ(m[2]["error"]["code"], -32700);
  EXPECT_EQ(m[3]["id"], 3);
}

}  // namespace
}  // namespace xv::client
