// Fuzz target: `xvctl mcp`'s tool dispatch (client/mcp/mcp_server.h, client/mcp/mcp_tools.h) with
// arbitrary arguments: the real tool table over a DaemonClient dialing a socket nobody listens on,
// so every call either fails in the tool before the daemon or on the dead socket.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "client/daemon_client.h"
#include "client/mcp/mcp_server.h"
#include "client/mcp/mcp_tools.h"
#include "common/bounded_json.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {

namespace {

namespace fs = std::filesystem;

// `wait` keeps dialing an unreachable daemon for 30 s by design: it is left out.
constexpr const char* kTools[] = {
    "submit",        "status",        "results",   "experiment",     "campaign_create",
    "campaign_show", "campaign_list", "decide",    "cancel",         "workers",
    "knobs",         "ablate",        "confirm",   "campaign_pause", "campaign_resume",
    "events",        "plan_submit",   "plan_show", "plan_control"};

class DeadDaemonServer {
 public:
  DeadDaemonServer() {
    spdlog::set_level(spdlog::level::off);
    state_dir_ =
        (fs::temp_directory_path() / ("xv-fuzz-mcp-" + std::to_string(::getpid()))).string();
    fs::create_directories(state_dir_);
    client::ClientOptions options;
    options.state_dir = state_dir_;  // no xvd.sock there, no xv.db: results has nothing to read
    auto daemon = std::make_shared<client::DaemonClient>(options);
    server_ = std::make_unique<client::McpServer>(client::McpServerInfo{},
                                                  client::XvMcpTools(daemon, options));
  }
  ~DeadDaemonServer() {
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }
  client::McpServer* server() { return server_.get(); }

 private:
  std::string state_dir_;
  std::unique_ptr<client::McpServer> server_;
};

client::McpServer* Server() {
  static DeadDaemonServer s;
  return s.server();
}

}  // namespace

int FuzzMcpArguments(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Byte 0 picks the tool; the rest is the arguments' JSON text, spliced into a tools/call line.
  const std::string tool = kTools[data[0] % (sizeof kTools / sizeof kTools[0])];
  const std::string arguments(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string line = R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":")" +
                           tool + R"(","arguments":)" + arguments + "}}";
  std::ostringstream out;
  Server()->HandleLine(line, out);
  // One answer, a JSON object on one line: a result (a tool error or not) or a protocol error;
  // never an internal error (a handler that threw).
  const std::string text = out.str();
  XV_FUZZ_CHECK(!text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1,
                "not exactly one line: " + std::to_string(text.size()) + " bytes");
  nlohmann::json reply;
  XV_FUZZ_CHECK(ParseBoundedJson(text, "reply", &reply).ok() && reply.is_object(),
                "the reply is not a JSON object");
  XV_FUZZ_CHECK(reply.contains("result") || reply.contains("error"), "neither result nor error");
  if (reply.contains("error")) {
    XV_FUZZ_CHECK(reply["error"]["code"] != -32603,
                  "an internal error: " + reply["error"]["message"].dump());
  } else {
    const nlohmann::json& r = reply["result"];
    XV_FUZZ_CHECK(r["isError"].is_boolean() && r["content"].is_array(), "a malformed result");
    if (r["isError"] == true) {
      // Tool errors are short: they name the argument, they do not echo it.
      const std::string message = r["content"][0]["text"].get<std::string>();
      XV_FUZZ_CHECK(message.size() <= 2048,
                    "a tool error of " + std::to_string(message.size()) + " bytes");
    }
  }
  return 0;
}

}  // namespace xv::fuzz
