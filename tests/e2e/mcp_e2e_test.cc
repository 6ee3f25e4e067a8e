// `xvctl mcp` end to end: a real xvd, a real xv-worker running the scripted fake trainer
// (tests/fixtures/fake_trainer.sh: val_bpb = 1 + 10 * matrix_lr; the cpu-tiny head scores 1.4), and
// `xvctl mcp` as a child process spoken to over pipes, the way an MCP client runs it:
// initialize -> tools/list -> campaign_create -> a refused submit (unknown knob: isError naming it,
// nothing queued) -> submit a sweep -> wait (progress notifications, the figures and the round's
// decision) -> results -> experiment (events) -> campaign_show (the head moved) -> cancel; protocol
// errors from the real process; with xvd stopped, status is a tool error saying how to start it and
// results read the database; EOF on stdin ends the server with exit 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

using nlohmann::json;

// `argv` as a child with its stdin and stdout on pipes (stderr appended to `log_path`): one JSON
// message per line each way. The destructor closes stdin and reaps the child (SIGKILL if it
// lingers).
class McpChild {
 public:
  McpChild(const std::vector<std::string>& argv, const std::string& log_path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) ::dup2(log, STDERR_FILENO);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~McpChild() {
    CloseStdin();
    if (from_child_ >= 0) ::close(from_child_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool started() const { return pid_ > 0 && to_child_ >= 0; }

  void SendLine(const std::string& line) {
    std::string data = line + "\n";
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(to_child_, data.data() + off, data.size() - off);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  // The next line from the child's stdout; false on EOF or after timeout_s.
  bool ReadLine(std::string* line, double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      pollfd p{from_child_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Sends a request and returns its response; notifications that come first are appended to
  // *notifications. Every line must be JSON (stdout carries the protocol only).
  json Request(const json& request, std::vector<json>* notifications = nullptr,
               double timeout_s = 60) {
    SendLine(request.dump());
    std::string line;
    while (ReadLine(&line, timeout_s)) {
      json m = json::parse(line, nullptr, false);
      EXPECT_FALSE(m.is_discarded()) << "stdout line is not JSON: " << line;
      if (m.is_discarded()) continue;
      if (m.contains("id") && request.contains("id") && m["id"] == request["id"]) return m;
      if (m.contains("id") && m["id"].is_null() && m.contains("error")) return m;
      if (notifications) notifications->push_back(m);
    }
    ADD_FAILURE() << "no response to " << request.dump();
    return json::object();
  }

  void CloseStdin() {
    if (to_child_ >= 0) ::close(to_child_);
    to_child_ = -1;
  }

  // Waits for the child to exit; its exit code, or -1 (signal, timeout).
  int Wait(double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      ::usleep(20 * 1000);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

class McpE2eTest : public ::testing::Test {
 protected:
  void TearDown() override {
    worker_.Stop();
    xvd_.Stop();
  }

  // tools/call `tool` with `arguments`; the result object (content, structuredContent, isError).
  json Call(McpChild* mcp, const std::string& tool, const json& arguments,
            std::vector<json>* notifications = nullptr, const json& meta = nullptr,
            double timeout_s = 60) {
    json params = {{"name", tool}, {"arguments", arguments}};
    if (!meta.is_null()) params["_meta"] = meta;
    json r = mcp->Request(
        {{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", "tools/call"}, {"params", params}},
        notifications, timeout_s);
    EXPECT_TRUE(r.contains("result")) << tool << ": " << r.dump() << Logs();
    if (!r.contains("result")) return json::object();
    const json& result = r["result"];
    EXPECT_EQ(result["content"][0]["type"], "text");
    return result;
  }

  // A successful call's structuredContent.
  json CallOk(McpChild* mcp, const std::string& tool, const json& arguments) {
    json result = Call(mcp, tool, arguments);
    EXPECT_EQ(result.value("isError", true), false) << tool << ": " << result.dump(2) << Logs();
    return result.value("structuredContent", json::object());
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_.Path("worker.log")) + "\n--- mcp.log ---\n" + FileTail(sb_.Path("mcp.log"));
  }

  Sandbox sb_{"mcp"};
  ChildGuard xvd_, worker_;
  int next_id_ = 100;
};

TEST_F(McpE2eTest, AgentLoopThroughTheMcpServer) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  ASSERT_TRUE(sb_.StartDaemon(&xvd_));
  // matrix_lr 0.06 diverges (a NaN, exit 3).
  worker_ = sb_.StartFakeWorker("mcp-cpu",
                                {{"XV_FAKE_STEPS", "3"},
                                 {"XV_FAKE_STEP_SECONDS", "0.02"},
                                 {"XV_FAKE_MODE", "diverge"},
                                 {"XV_FAKE_MODE_IF_MATRIX_LR", "0.06"}},
                                {}, "worker.log");
  McpChild mcp(sb_.XvctlArgv({"mcp"}), sb_.Path("mcp.log"));
  ASSERT_TRUE(mcp.started());

  // initialize, then the initialized notification (no reply: the next response is the ping's).
  json init = mcp.Request({{"jsonrpc", "2.0"},
                           {"id", 1},
                           {"method", "initialize"},
                           {"params",
                            {{"protocolVersion", "2025-06-18"},
                             {"capabilities", json::object()},
                             {"clientInfo", {{"name", "e2e"}, {"version", "0"}}}}}});
  ASSERT_TRUE(init.contains("result")) << init.dump() << Logs();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "xv");
  EXPECT_FALSE(init["result"]["serverInfo"]["version"].get<std::string>().empty());
  EXPECT_TRUE(init["result"]["capabilities"]["tools"].is_object());
  mcp.SendLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  json ping = mcp.Request({{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}});
  EXPECT_EQ(ping["id"], "p");
  EXPECT_EQ(ping["result"], json::object());

  json list = mcp.Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
  std::set<std::string> names;
  std::map<std::string, json> annotations;
  for (const auto& t : list["result"]["tools"]) {
    names.insert(t["name"].get<std::string>());
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t.dump();
    EXPECT_GT(t["description"].get<std::string>().size(), 80u) << t["name"];
    EXPECT_EQ(t["outputSchema"]["type"], "object") << t["name"];
    annotations[t["name"].get<std::string>()] = t["annotations"];
  }
  EXPECT_EQ(names,
            (std::set<std::string>{
                "submit",          "wait",          "results",     "experiment", "campaign_create",
                "campaign_show",   "campaign_list", "decide",      "cancel",     "status",
                "workers",         "knobs",         "ablate",      "confirm",    "campaign_pause",
                "campaign_resume", "events",        "plan_submit", "plan_show",  "plan_control"}));
  EXPECT_EQ(annotations["status"]["readOnlyHint"], true);
  EXPECT_EQ(annotations["results"]["readOnlyHint"], true);
  EXPECT_EQ(annotations["submit"]["readOnlyHint"], false);
  EXPECT_EQ(annotations["submit"]["destructiveHint"], false);
  EXPECT_EQ(annotations["cancel"]["destructiveHint"], true);
  EXPECT_EQ(annotations["decide"]["destructiveHint"], true);

  // A campaign: head controls and a noise-band policy, 2 s runs.
  json created = CallOk(&mcp, "campaign_create",
                        {{"name", "agent"},
                         {"recipe_path", SourcePath("recipes/cpu-tiny.yaml")},
                         {"policy",
                          {{"mode", "noise_band"},
                           {"replicates", 1},
                           {"head_controls", 2},
                           {"min_effect", 0.01},
                           {"band_k", 2}}},
                         {"budget", {{"time_budget_s", 2}}}});
  EXPECT_EQ(created["name"], "agent") << created.dump(2);
  EXPECT_EQ(created["policy"]["mode"], "noise_band");

  // Refused: an unknown knob is a tool error naming it, and nothing is queued.
  json refused =
      Call(&mcp, "submit", {{"campaign", "agent"}, {"candidates", {{{"matrx_lr", 0.02}}}}});
  EXPECT_EQ(refused["isError"], true) << refused.dump(2);
  const std::string why = refused["content"][0]["text"].get<std::string>();
  EXPECT_NE(why.find("matrx_lr"), std::string::npos) << why;
  EXPECT_EQ(refused["structuredContent"]["code"], "INVALID_ARGUMENT");
  // A bad argument is a tool error too, naming the argument.
  json bad_arg = Call(&mcp, "submit", {{"campaign", "agent"}, {"replicates", 0}});
  EXPECT_EQ(bad_arg["isError"], true);
  EXPECT_NE(bad_arg["content"][0]["text"].get<std::string>().find("arguments.replicates"),
            std::string::npos)
      << bad_arg.dump();
  EXPECT_EQ(CallOk(&mcp, "results", {{"campaign", "agent"}})["count"], 0);

  // A sweep from the head: 0.02 -> 1.2 (better than the head's 1.4), 0.06 diverges.
  json sub =
      CallOk(&mcp, "submit", {{"campaign", "agent"}, {"sweep", {{"matrix_lr", {0.02, 0.06}}}}});
  const std::vector<int64_t> ids = sub.value("experiment_ids", std::vector<int64_t>{});
  ASSERT_EQ(ids.size(), 4u) << sub.dump(2);  // 2 candidates + 2 head controls
  const int64_t round_id = sub["round_id"];
  EXPECT_EQ(sub["candidates"], json::array({"matrix_lr=0.02", "matrix_lr=0.06"}));

  // wait: the figures and the decision, with progress notifications along the way.
  std::vector<json> progress;
  json waited = Call(&mcp, "wait", {{"experiment_ids", ids}, {"timeout_s", 90}}, &progress,
                     {{"progressToken", "w1"}}, 120);
  const json& w = waited["structuredContent"];
  ASSERT_EQ(w.value("done", false), true) << waited.dump(2) << Logs();
  EXPECT_EQ(w["timed_out"], false);
  EXPECT_FALSE(w.contains("unfinished")) << "empty lists are left out";
  ASSERT_GE(progress.size(), 1u);
  for (const auto& n : progress) {
    EXPECT_EQ(n["method"], "notifications/progress") << n.dump();
    EXPECT_EQ(n["params"]["progressToken"], "w1");
    EXPECT_EQ(n["params"]["total"], 4);
  }
  std::map<std::string, std::vector<double>> bpb;
  int64_t diverged_id = 0;
  for (const auto& e : w["experiments"]) {
    if (e["name"] == "matrix_lr=0.06") {
      EXPECT_EQ(e["state"], "diverged") << e.dump();
      diverged_id = e["id"];
      continue;
    }
    EXPECT_EQ(e["state"], "succeeded") << e.dump();
    ASSERT_TRUE(e["val_bpb"].is_number()) << e.dump();
    bpb[e["name"].get<std::string>()].push_back(e["val_bpb"].get<double>());
  }
  ASSERT_EQ(bpb["matrix_lr=0.02"].size(), 1u) << w.dump(2);
  EXPECT_NEAR(bpb["matrix_lr=0.02"][0], 1.2, 1e-9);
  ASSERT_EQ(bpb["head"].size(), 2u) << w.dump(2);
  EXPECT_NEAR(bpb["head"][0], 1.4, 1e-9);
  EXPECT_GT(diverged_id, 0) << w.dump(2);
  EXPECT_EQ(w["states"]["succeeded"], 3);
  EXPECT_EQ(w["states"]["diverged"], 1);
  ASSERT_EQ(w["rounds"].size(), 1u) << w.dump(2);
  EXPECT_EQ(w["rounds"][0]["id"], round_id);
  EXPECT_EQ(w["rounds"][0]["state"], "decided");
  EXPECT_EQ(w["rounds"][0]["kept"], "matrix_lr=0.02") << w["rounds"][0].dump(2);
  EXPECT_EQ(w["rounds"][0]["campaign"], "agent");

  // results, best first: the kept candidate leads with its figures.
  json results = CallOk(&mcp, "results", {{"campaign", "agent"}, {"sort", "val_bpb"}});
  EXPECT_EQ(results["count"], 4);
  EXPECT_EQ(results["source"], "daemon");
  const json& best = results["experiments"][0];
  EXPECT_EQ(best["name"], "matrix_lr=0.02");
  EXPECT_NEAR(best["val_bpb"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ(best["decision"], "keep");
  EXPECT_GT(best["steps"].get<int64_t>(), 0) << best.dump();
  EXPECT_TRUE(best["tok_per_sec"].is_number());
  // The failure summary names the diverging value.
  json failures = CallOk(&mcp, "results", {{"campaign", "agent"}, {"failures", true}});
  ASSERT_EQ(failures.value("failures", json::array()).size(), 1u) << failures.dump();
  EXPECT_EQ(failures["failures"][0]["knob"], "matrix_lr");
  EXPECT_EQ(failures["failures"][0]["diverged"], 1);

  // One experiment in detail: its stored events end with the terminal state.
  json detail = CallOk(&mcp, "experiment", {{"id", best["id"]}});
  EXPECT_EQ(detail["id"], best["id"]);
  EXPECT_TRUE(detail.contains("stderr_tail"));
  ASSERT_FALSE(detail["events"].empty()) << detail.dump(2);
  std::set<std::string> kinds, states;
  for (const auto& ev : detail["events"]) {
    EXPECT_EQ(ev["experiment_id"], best["id"]) << ev.dump();
    kinds.insert(ev["kind"].get<std::string>());
    if (ev["kind"] == "state") states.insert(ev["state"].get<std::string>());
  }
  EXPECT_TRUE(kinds.count("summary")) << detail["events"].dump(2);
  EXPECT_FALSE(kinds.count("step")) << "steps are left out";
  EXPECT_TRUE(states.count("queued") && states.count("succeeded")) << detail["events"].dump(2);
  EXPECT_EQ(detail["events_complete"], true);
  // The diverged one says why.
  json failed = CallOk(&mcp, "experiment", {{"id", diverged_id}});
  EXPECT_EQ(failed["state"], "diverged");
  EXPECT_FALSE(failed["failure_kind"].get<std::string>().empty()) << failed.dump(2);
  EXPECT_TRUE(failed["val_bpb"].is_null());
  json missing = Call(&mcp, "experiment", {{"id", 99999}});
  EXPECT_EQ(missing["isError"], true);
  EXPECT_NE(missing["content"][0]["text"].get<std::string>().find("arguments.id"),
            std::string::npos);

  // The head moved to the kept candidate.
  json shown = CallOk(&mcp, "campaign_show", {{"campaign", "agent"}});
  EXPECT_NEAR(shown["head_recipe"]["matrix_lr"].get<double>(), 0.02, 1e-12) << shown.dump(2);
  EXPECT_EQ(CallOk(&mcp, "campaign_list", json::object())["campaigns"].size(), 1u);

  // events after a cursor: pages that follow on, and the round's decision among them.
  json first_page = CallOk(&mcp, "events", {{"campaign", "agent"}, {"limit", 3}});
  ASSERT_EQ(first_page["events"].size(), 3u) << first_page.dump();
  EXPECT_EQ(first_page["more"], true);
  const int64_t cursor = first_page["next_cursor"];
  EXPECT_EQ(cursor, first_page["events"][2]["cursor"]);
  json next_page = CallOk(&mcp, "events", {{"campaign", "agent"}, {"after", cursor}});
  ASSERT_FALSE(next_page["events"].empty());
  EXPECT_GT(next_page["events"][0]["cursor"].get<int64_t>(), cursor);
  EXPECT_EQ(next_page["more"], false);
  json decisions = CallOk(&mcp, "events", {{"campaign", "agent"}, {"kinds", {"decision"}}});
  ASSERT_EQ(decisions["events"].size(), 1u) << decisions.dump();
  EXPECT_EQ(decisions["events"][0]["round_id"], round_id);
  // Pause and resume the campaign; no plans yet.
  EXPECT_EQ(CallOk(&mcp, "campaign_pause", {{"campaign", "agent"}})["state"], "paused");
  EXPECT_EQ(CallOk(&mcp, "campaign_resume", {{"campaign", "agent"}})["state"], "active");
  EXPECT_TRUE(CallOk(&mcp, "plan_show", json::object()).value("plans", json::array()).empty());
  json no_plan = Call(&mcp, "plan_show", {{"plan", "nope"}});
  EXPECT_EQ(no_plan["isError"], true);
  EXPECT_NE(no_plan["content"][0]["text"].get<std::string>().find("arguments.plan"),
            std::string::npos)
      << no_plan.dump();

  // cancel: a finished experiment keeps its state; an unknown one is a tool error naming it.
  EXPECT_EQ(CallOk(&mcp, "cancel", {{"experiment_id", ids[0]}})["state"], "succeeded");
  json no_such = Call(&mcp, "cancel", {{"experiment_id", 99999}});
  EXPECT_EQ(no_such["isError"], true);
  EXPECT_NE(no_such["content"][0]["text"].get<std::string>().find("arguments.experiment_id"),
            std::string::npos);
  EXPECT_EQ(CallOk(&mcp, "workers", json::object())["workers"].size(), 1u);

  // Protocol errors from the real process.
  json unknown = mcp.Request({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "prompts/list"}});
  EXPECT_EQ(unknown["error"]["code"], -32601);
  mcp.SendLine("{not json");
  std::string line;
  ASSERT_TRUE(mcp.ReadLine(&line, 10));
  EXPECT_EQ(json::parse(line)["error"]["code"], -32700) << line;

  // With xvd stopped: status says how to start it; results read the database instead.
  xvd_.Stop();
  json down = Call(&mcp, "status", json::object());
  EXPECT_EQ(down["isError"], true);
  EXPECT_NE(down["content"][0]["text"].get<std::string>().find("cannot reach xvd"),
            std::string::npos)
      << down.dump();
  json offline = CallOk(&mcp, "results", {{"campaign", "agent"}});
  EXPECT_EQ(offline["count"], 4);
  EXPECT_EQ(offline["source"].get<std::string>().rfind("database ", 0), 0u) << offline.dump();

  // EOF on stdin ends the server cleanly.
  mcp.CloseStdin();
  EXPECT_EQ(mcp.Wait(20), 0) << Logs();
}

// Hostile tool arguments to the real `xvctl mcp` with a real xvd: files that are not regular or too
// large are refused naming the path and why (a FIFO without a writer does not block), a file that
// is not a recipe is refused without its contents in the error, deep and huge arguments are tool
// errors naming the argument, a 100,000-deep line is a parse error; the server answers after each.
TEST_F(McpE2eTest, HostileArgumentsAreToolErrorsAndTheServerKeepsServing) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  ASSERT_TRUE(sb_.StartDaemon(&xvd_));
  McpChild mcp(sb_.XvctlArgv({"mcp"}), sb_.Path("mcp.log"));
  ASSERT_TRUE(mcp.started());
  auto refused = [&](const std::string& tool, const json& arguments) -> std::string {
    json r = Call(&mcp, tool, arguments, nullptr, nullptr, 20);
    EXPECT_EQ(r.value("isError", false), true) << tool << ": " << r.dump();
    return r.contains("content") ? r["content"][0]["text"].get<std::string>() : "";
  };

  // A file that is not a recipe: the daemon refuses it, and no line of it comes back.
  std::ifstream passwd_in("/etc/passwd");
  std::stringstream passwd;
  passwd << passwd_in.rdbuf();
  std::string why = refused("campaign_create", {{"name", "p"}, {"recipe_path", "/etc/passwd"}});
  EXPECT_FALSE(why.empty());
  std::istringstream lines(passwd.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.size() >= 8) EXPECT_EQ(why.find(line), std::string::npos) << why;
  }
  EXPECT_EQ(why.find("root:"), std::string::npos) << why;

  // Not regular files, and a file over the cap.
  ASSERT_EQ(::mkfifo(sb_.Path("fifo").c_str(), 0600), 0);
  std::filesystem::create_directories(sb_.Path("a-dir"));
  {
    std::ofstream big(sb_.Path("big.yaml"));
    big << "# " << std::string(2 << 20, 'x') << "\ndepth: 2\n";
  }
  const std::pair<std::string, std::string> files[] = {
      {"/dev/zero", "/dev/zero\": a character device; give a regular file"},
      {sb_.Path("fifo"), "fifo\": a FIFO; give a regular file"},
      {sb_.Path("a-dir"), "a-dir\": a directory; give a regular file"},
      {sb_.Path("big.yaml"), "over the limit of 1048576"},
      {sb_.Path("absent.yaml"), "absent.yaml\": cannot open (No such file or directory"},
  };
  for (const auto& [path, expect] : files) {
    why = refused("campaign_create", {{"name", "f"}, {"recipe_path", path}});
    EXPECT_EQ(why.rfind("arguments.recipe_path: ", 0), 0u) << why;
    EXPECT_NE(why.find(expect), std::string::npos) << path << ": " << why;
    why = refused("submit", {{"recipe_path", path}});
    EXPECT_NE(why.find(expect), std::string::npos) << path << ": " << why;
  }
  why = refused("campaign_create", {{"name", "q"},
                                    {"recipe_path", SourcePath("recipes/cpu-tiny.yaml")},
                                    {"policy_path", "/dev/zero"}});
  EXPECT_NE(why.find("arguments.policy_path: \"/dev/zero\": a character device"), std::string::npos)
      << why;

  // Deep and huge arguments.
  json deep = json::array();
  for (int i = 0; i < 40; ++i) deep = json::array({deep});
  why = refused("campaign_create", {{"name", "d"},
                                    {"recipe_path", SourcePath("recipes/cpu-tiny.yaml")},
                                    {"budget", {{"time_budget_s", deep}}}});
  EXPECT_EQ(why, "arguments.budget: nested deeper than 32 levels of arrays and objects");
  why = refused("campaign_create",
                {{"name", std::string(1 << 20, 'n')}, {"recipe_path", "/dev/null"}});
  EXPECT_EQ(why, "arguments.name: a string of 1048576 bytes, over the limit of 65536");
  // A budget the daemon refuses: described, not dumped.
  why = refused("campaign_create", {{"name", "b"},
                                    {"recipe_path", SourcePath("recipes/cpu-tiny.yaml")},
                                    {"budget", {{"time_budget_s", {{"a", {1, 2}}}}}}});
  EXPECT_NE(why.find("budget.time_budget_s: must be a number of seconds in 1..86400, got an "
                     "object of 1 keys"),
            std::string::npos)
      << why;

  // A 100,000-deep line: a parse error, and the server answers the next request.
  mcp.SendLine(std::string(100000, '[') + std::string(100000, ']'));
  std::string line;
  ASSERT_TRUE(mcp.ReadLine(&line, 10));
  EXPECT_EQ(json::parse(line)["error"]["code"], -32700) << line.substr(0, 300);
  EXPECT_EQ(mcp.Request({{"jsonrpc", "2.0"}, {"id", "after"}, {"method", "ping"}})["id"], "after");
  EXPECT_EQ(CallOk(&mcp, "campaign_list", json::object())["campaigns"].size(), 0u);
  EXPECT_TRUE(xvd_.Alive());
  mcp.CloseStdin();
  EXPECT_EQ(mcp.Wait(20), 0) << Logs();
}

// What an agent on a stock MCP host needs from the real `xvctl mcp` (issue 17): a `status` is
// answered while a `wait` runs (each call on its own thread); a `wait` cancelled by the client
// (notifications/cancelled) ends within a second and is never answered while other calls are
// served; answers stay small (per-experiment summaries, campaign_show's last rounds); the knob
// table and the agent guide are resources; submit says how many runs it queued and when they end.
TEST_F(McpE2eTest, ConcurrentCallsCancellationBoundedAnswersAndResources) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  ASSERT_TRUE(sb_.StartDaemon(&xvd_));
  // Runs of about half a second each, one at a time: a wait for 5 of them lasts seconds.
  worker_ = sb_.StartFakeWorker(
      "mcp-cpu", {{"XV_FAKE_STEPS", "6"}, {"XV_FAKE_STEP_SECONDS", "0.08"}}, {}, "worker.log");
  McpChild mcp(sb_.XvctlArgv({"mcp"}), sb_.Path("mcp.log"));
  ASSERT_TRUE(mcp.started());
  json init = mcp.Request({{"jsonrpc", "2.0"},
                           {"id", 1},
                           {"method", "initialize"},
                           {"params", {{"protocolVersion", "2025-06-18"}}}});
  EXPECT_TRUE(init["result"]["capabilities"]["resources"].is_object()) << init.dump();
  mcp.SendLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");

  // Resources: listed, and read back whole.
  json listed = mcp.Request({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "resources/list"}});
  std::set<std::string> uris;
  for (const auto& r : listed["result"]["resources"]) uris.insert(r["uri"].get<std::string>());
  EXPECT_TRUE(uris.count("xv://knobs") && uris.count("xv://docs/agent.md")) << listed.dump();
  json guide = mcp.Request({{"jsonrpc", "2.0"},
                            {"id", 3},
                            {"method", "resources/read"},
                            {"params", {{"uri", "xv://docs/agent.md"}}}});
  EXPECT_EQ(guide["result"]["contents"][0]["text"], ReadFileText(SourcePath("docs/agent.md")));
  json knobs_read = mcp.Request({{"jsonrpc", "2.0"},
                                 {"id", 4},
                                 {"method", "resources/read"},
                                 {"params", {{"uri", "xv://knobs"}}}});
  json knobs = json::parse(knobs_read["result"]["contents"][0]["text"].get<std::string>());
  bool has_matrix_lr = false;
  for (const auto& k : knobs["knobs"]) {
    if (k["name"] != "matrix_lr") continue;
    has_matrix_lr = true;
    EXPECT_EQ(k["type"], "number");
    EXPECT_TRUE(k["default"].is_number());
    EXPECT_FALSE(k["range"].get<std::string>().empty());
  }
  EXPECT_TRUE(has_matrix_lr) << knobs.dump().substr(0, 500);
  // An unknown knob's refusal points at the knobs tool, not at a file of the source tree.
  CallOk(&mcp, "campaign_create",
         {{"name", "night"},
          {"recipe_path", SourcePath("recipes/cpu-tiny.yaml")},
          {"policy", {{"mode", "noise_band"}, {"replicates", 1}, {"head_controls", 2}}},
          {"budget", {{"time_budget_s", 5}}}});
  json typo = Call(&mcp, "submit", {{"campaign", "night"}, {"candidates", {{{"matrx_lr", 0.02}}}}});
  const std::string typo_text = typo["content"][0]["text"].get<std::string>();
  EXPECT_NE(typo_text.find("knobs tool"), std::string::npos) << typo_text;
  EXPECT_EQ(typo_text.find("docs/recipe.md"), std::string::npos) << typo_text;

  // submit answers with its run count (3 candidates + 2 head controls) and how the ETA is made.
  json sub = CallOk(&mcp, "submit",
                    {{"campaign", "night"}, {"sweep", {{"matrix_lr", {0.01, 0.02, 0.03}}}}});
  const std::vector<int64_t> ids = sub.value("experiment_ids", std::vector<int64_t>{});
  ASSERT_EQ(ids.size(), 5u) << sub.dump();
  EXPECT_EQ(sub["runs"], 5);
  EXPECT_EQ(sub["control_runs"], 2);
  EXPECT_EQ(sub["candidate_runs"], 3);
  EXPECT_FALSE(sub.value("eta_basis", "").empty()) << sub.dump();

  // A wait in flight, then a status: the status is answered first, the wait is still running.
  const json wait_id = "long-wait";
  mcp.SendLine(
      json({{"jsonrpc", "2.0"},
            {"id", wait_id},
            {"method", "tools/call"},
            {"params",
             {{"name", "wait"}, {"arguments", {{"experiment_ids", ids}, {"timeout_s", 60}}}}}})
          .dump());
  std::vector<json> before_status;
  const auto t_status = std::chrono::steady_clock::now();
  json status = mcp.Request({{"jsonrpc", "2.0"},
                             {"id", "s1"},
                             {"method", "tools/call"},
                             {"params", {{"name", "status"}, {"arguments", json::object()}}}},
                            &before_status, 10);
  const double status_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_status).count();
  ASSERT_TRUE(status.contains("result")) << status.dump() << Logs();
  EXPECT_LT(status_s, 5) << "status waited for the wait";
  const json& st = status["result"]["structuredContent"];
  EXPECT_GE(st.value("queued", 0) + st.value("running", 0), 1) << st.dump();
  for (const auto& m : before_status) EXPECT_NE(m.value("id", json()), wait_id) << m.dump();
  // status again (the wait still runs) until a running experiment reports its last loss.
  bool saw_loss = false;
  for (int i = 0; i < 40 && !saw_loss; ++i) {
    json again = CallOk(&mcp, "status", json::object());
    for (const auto& a : again.value("active", json::array())) {
      saw_loss |= a.contains("last_loss") && a["last_loss"].is_number();
    }
    if (!saw_loss) ::usleep(50 * 1000);
  }
  EXPECT_TRUE(saw_loss) << "no running experiment with last_loss in status";

  // The client cancels the wait: it ends within a second (the server's log says so), and it is
  // never answered while a ping and later calls are.
  mcp.SendLine(json({{"jsonrpc", "2.0"},
                     {"method", "notifications/cancelled"},
                     {"params", {{"requestId", wait_id}, {"reason", "the host timed out"}}}})
                   .dump());
  std::vector<json> stray;
  EXPECT_EQ(mcp.Request({{"jsonrpc", "2.0"}, {"id", "p1"}, {"method", "ping"}}, &stray)["id"],
            "p1");
  std::string ended_line;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string log = ReadFileText(sb_.Path("mcp.log"));
        const size_t at = log.find("(wait) was cancelled by the client and ended ");
        if (at == std::string::npos) return false;
        ended_line = log.substr(at, log.find('\n', at) - at);
        return true;
      },
      5))
      << Logs();
  const double ended_after_s = std::stod(
      ended_line.substr(std::string("(wait) was cancelled by the client and ended ").size()));
  EXPECT_LT(ended_after_s, 1.5) << ended_line;

  // A second wait (no cancellation) gets the figures and the decision, in small summaries.
  json done = Call(&mcp, "wait", {{"experiment_ids", ids}, {"timeout_s", 60}}, &stray, nullptr, 90);
  const json& w = done["structuredContent"];
  ASSERT_EQ(w.value("done", false), true) << done.dump() << Logs();
  ASSERT_EQ(w["experiments"].size(), 5u);
  for (const auto& e : w["experiments"]) {
    EXPECT_FALSE(e.contains("stderr_tail")) << e.dump();
    EXPECT_LT(e.dump().size(), 450u) << e.dump();  // most of it the decision's reason
  }
  EXPECT_LT(done["content"][0]["text"].get<std::string>().size(), 4500u) << w.dump();
  for (const auto& m : stray) EXPECT_NE(m.value("id", json()), wait_id) << m.dump();

  // Bounded answers: results is a page of summaries; campaign_show keeps the last rounds.
  json second =
      CallOk(&mcp, "submit", {{"campaign", "night"}, {"candidates", {{{"matrix_lr", 0.015}}}}});
  ASSERT_EQ(Call(&mcp, "wait", {{"campaign", "night"}, {"timeout_s", 60}}, &stray, nullptr,
                 90)["structuredContent"]
                .value("done", false),
            true)
      << Logs();
  json results = Call(&mcp, "results", {{"campaign", "night"}});
  const int64_t total = 5 + second["runs"].get<int64_t>();
  EXPECT_EQ(results["structuredContent"]["total"], total);
  EXPECT_LT(results["content"][0]["text"].get<std::string>().size(), 450u * total)
      << results.dump();
  json page = CallOk(&mcp, "results", {{"campaign", "night"}, {"after_id", ids[0]}, {"limit", 2}});
  ASSERT_EQ(page["count"], 2);
  EXPECT_EQ(page["experiments"][0]["id"], ids[1]);
  EXPECT_EQ(page["next_after_id"], ids[2]);
  json round_only = CallOk(&mcp, "results", {{"round_id", second["round_id"]}});
  EXPECT_EQ(round_only["total"], second["runs"]) << round_only.dump();
  for (const auto& e : round_only["experiments"]) EXPECT_EQ(e["round"], second["round_id"]);
  json shown = Call(&mcp, "campaign_show", {{"campaign", "night"}, {"last_rounds", 1}});
  const json& c = shown["structuredContent"];
  ASSERT_EQ(c["rounds"].size(), 1u) << c.dump();
  EXPECT_EQ(c["rounds"][0]["id"], second["round_id"]);
  EXPECT_EQ(c["rounds_left_out"], 1);
  EXPECT_LT(shown["content"][0]["text"].get<std::string>().size(), 4000u) << c.dump();
  for (const auto& m : stray) EXPECT_NE(m.value("id", json()), wait_id) << m.dump();

  // confirm (by campaign id): the head again with 2 fresh seeds, counted like submit.
  json confirm = CallOk(&mcp, "confirm", {{"campaign", c["id"]}, {"seeds", 2}});
  EXPECT_EQ(confirm["kind"], "confirm") << confirm.dump();
  EXPECT_GE(confirm["runs"].get<int64_t>(), 2) << confirm.dump();
  EXPECT_TRUE(confirm.contains("eta_s")) << confirm.dump();  // runs have finished: an estimate
  mcp.CloseStdin();
  EXPECT_EQ(mcp.Wait(20), 0) << Logs();
}

}  // namespace
}  // namespace xv::e2e
