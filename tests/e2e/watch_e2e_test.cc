// `xvctl watch` end to end (issue 5): a real `xvd`, real `xv-worker`s running the scripted fake
// trainer (tests/fixtures/fake_trainer.sh) and `xvctl watch` processes.
//  - WatcherSeesEveryExperimentInOrder: a live watcher started before a sweep round and a watcher
//    started after it with --since 0 --until-idle both see every experiment go queued -> assigned
//    -> running -> step... -> summary -> succeeded, then the round's decision and the head change,
//    in cursor order, with no duplicate; the --until-idle one exits 0 by itself once the round is
//    decided; both saw the same events.
//  - SlowAndClosedWatchersDoNotStallTheDaemon: with xvd --watch-queue 256, one watcher is stopped
//    (SIGSTOP: it reads nothing) and one is killed (SIGKILL) while 8 experiments of 300 steps
//    run; every experiment still finishes, a healthy watcher gets all of them, and the stopped
//    one, resumed, finds a `dropped N` marker where it fell behind and nothing out of order.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

class WatchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Sandbox::BinariesBuilt()); }
  void TearDown() override {
    for (auto& w : workers_) w.Stop();
    xvd_.Stop();
  }

  void StartDaemon(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, extra));
  }

  void StartWorker(const std::string& name, const std::string& steps, const std::string& step_s) {
    workers_.push_back(
        sb_.StartFakeWorker(name, {{"XV_FAKE_STEPS", steps}, {"XV_FAKE_STEP_SECONDS", step_s}}));
  }

  std::vector<std::string> XvctlArgv(std::vector<std::string> args) {
    return sb_.XvctlArgv(std::move(args));
  }
  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return RunCommand(XvctlArgv(std::move(args)), timeout_s);
  }
  json XvctlJson(const std::vector<std::string>& args) {
    CommandResult r = Xvctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  // A long-running `xvctl watch ...` whose stdout goes to dir/<name>.out.
  ChildGuard StartWatcher(const std::string& name, std::vector<std::string> args) {
    std::vector<std::string> argv = XvctlArgv(std::move(args));
    // ChildGuard appends stdout and stderr to one file; stderr stays empty on success.
    return ChildGuard(argv, {}, (sb_.dir() / (name + ".out")).string());
  }

  std::string Logs() {
    std::string s = "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log"));
    for (auto& w : workers_) s += "\n--- " + w.log_path() + " ---\n" + FileTail(w.log_path());
    return s;
  }

  Sandbox sb_{"wa"};
  ChildGuard xvd_;
  std::vector<ChildGuard> workers_;
};

// Cursors strictly increase (so none is repeated).
void ExpectOrderedUnique(const std::vector<json>& events, const std::string& who) {
  for (size_t i = 1; i < events.size(); ++i) {
    if (events[i]["kind"] == "dropped") continue;
    ASSERT_GT(events[i]["cursor"].get<int64_t>(), events[i - 1]["cursor"].get<int64_t>())
        << who << ": event " << i << " out of order or repeated: " << events[i].dump();
  }
}

// Per experiment: its lifecycle as "state:queued", "start", "step", "summary", ...
std::map<int64_t, std::vector<std::string>> Lifecycles(const std::vector<json>& events) {
  std::map<int64_t, std::vector<std::string>> out;
  for (const auto& e : events) {
    const int64_t id = e.value("experiment_id", int64_t{0});
    if (id == 0) continue;
    const std::string kind = e["kind"];
    static const std::set<std::string> kLifecycle = {"state",   "start", "step", "eval",
                                                     "summary", "nan",   "error"};
    if (!kLifecycle.count(kind)) continue;
    if (kind == "state") {
      out[id].push_back("state:" + e["state"].get<std::string>());
    } else if (kind == "step") {
      // Consecutive steps collapse to one entry.
      if (out[id].empty() || out[id].back() != "step") out[id].push_back("step");
    } else {
      out[id].push_back(kind);
    }
  }
  return out;
}

TEST_F(WatchE2eTest, WatcherSeesEveryExperimentInOrder) {
  StartDaemon();
  StartWorker("wa-cpu", "4", "0.02");
  const std::string policy = sb_.Path("policy.yaml");
  std::ofstream(policy) << "mode: noise_band\nreplicates: 2\nhead_controls: 2\nmin_effect: 0.01\n"
                           "band_k: 2\n";
  json created =
      XvctlJson({"campaign", "create", "wa", "--recipe", SourcePath("recipes/cpu-tiny.yaml"),
                 "--policy", policy, "--budget", R"({"time_budget_s": 2})", "--json"});
  ASSERT_EQ(created.value("name", ""), "wa");

  ChildGuard live = StartWatcher("live", {"watch", "--campaign", "wa", "--json"});
  ::usleep(500 * 1000);  // subscribed before anything happens
  json sub = XvctlJson({"submit", "--campaign", "wa", "--sweep", "matrix_lr=0.02", "--json"});
  std::set<int64_t> ids;
  for (const auto& id : sub.value("experiment_ids", json::array())) ids.insert(id.get<int64_t>());
  ASSERT_EQ(ids.size(), 4u) << sub.dump();  // 2 replicates of the candidate + 2 head controls

  // --since 0 replays from the first stored event, then follows; it exits by itself once idle.
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult until_idle =
      Xvctl({"watch", "--campaign", "wa", "--json", "--since", "0", "--until-idle"}, 120);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(until_idle.exit_code, 0) << until_idle.err << Logs();
  ::usleep(500 * 1000);
  // Ctrl-C ends a watch with exit 0.
  ASSERT_EQ(::kill(live.pid(), SIGINT), 0);
  const int live_status = live.Stop(10);
  EXPECT_TRUE(WIFEXITED(live_status) && WEXITSTATUS(live_status) == 0)
      << "status " << live_status << ": " << ReadFileText(live.log_path());

  std::vector<json> replayed = JsonLines(until_idle.out);
  std::vector<json> followed = JsonLines(ReadFileText(live.log_path()));
  std::printf("watch: --until-idle ended after %.1f s with %zu events; the live watcher saw %zu\n",
              waited, replayed.size(), followed.size());
  for (const auto* events : {&replayed, &followed}) {
    const std::string who = events == &replayed ? "--since 0 --until-idle" : "live";
    ExpectOrderedUnique(*events, who);
    auto life = Lifecycles(*events);
    for (int64_t id : ids) {
      EXPECT_EQ(life[id], (std::vector<std::string>{"state:queued", "state:assigned", "start",
                                                    "step", "eval", "summary", "state:succeeded"}))
          << who << ": experiment " << id;
    }
    // The decision comes after every experiment ended; the head moved to the better candidate.
    int64_t last_end = 0, decision = 0, head = 0;
    for (const auto& e : *events) {
      if (e["kind"] == "state" && e["state"] == "succeeded") last_end = e["cursor"];
      if (e["kind"] == "decision") {
        EXPECT_EQ(decision, 0) << who << ": two decisions";
        decision = e["cursor"];
        EXPECT_EQ(e["campaign"], "wa");
        EXPECT_EQ(e["round_id"], sub["round_id"]);
      }
      if (e["kind"] == "head") {
        head = e["cursor"];
        EXPECT_EQ(e["name"], "matrix_lr=0.02") << e.dump();
      }
      EXPECT_NE(e["kind"], "dropped") << who;
    }
    EXPECT_GT(decision, last_end) << who << ": no decision after the last experiment";
    EXPECT_GT(head, decision) << who << ": no head change after the decision";
  }
  // The live watcher and the replaying one saw the same events.
  std::vector<int64_t> a, b;
  for (const auto& e : replayed) a.push_back(e["cursor"]);
  for (const auto& e : followed) b.push_back(e["cursor"]);
  EXPECT_EQ(a, b);

  // Human lines: one per event, with the experiment and what happened.
  CommandResult human = Xvctl({"watch", "--campaign", "wa", "--since", "0", "--until-idle"});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("succeeded"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("decided: "), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("loss "), std::string::npos) << human.out;
  // Bad input names the field.
  CommandResult unknown = Xvctl({"watch", "--campaign", "nope", "--until-idle"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("campaign"), std::string::npos) << unknown.err;
  CommandResult bad_kind = Xvctl({"watch", "--kind", "steps", "--until-idle"});
  EXPECT_EQ(bad_kind.exit_code, 2) << bad_kind.err;
  EXPECT_NE(bad_kind.err.find("kinds: unknown kind 'steps'"), std::string::npos) << bad_kind.err;
}

TEST_F(WatchE2eTest, SlowAndClosedWatchersDoNotStallTheDaemon) {
  StartDaemon({"--watch-queue", "256"});
  // 10 ms a step: 300 steps a run stay well inside the deadline on a loaded machine. (At full
  // speed, step_s 0, the until-idle watcher sometimes ends a few dozen step events short, also with
  // the binaries of a2a3929: docs/reliability.md, known issues.)
  StartWorker("wa-a", "300", "0.01");
  StartWorker("wa-b", "300", "0.01");
  ChildGuard slow = StartWatcher("slow", {"watch", "--json"});
  ChildGuard closed = StartWatcher("closed", {"watch", "--json"});
  ::usleep(500 * 1000);
  ASSERT_EQ(::kill(slow.pid(), SIGSTOP), 0);

  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  std::vector<std::string> args = {"submit", recipe, "--campaign", "many", "--json"};
  for (int i = 1; i <= 8; ++i) {
    args.push_back("--candidate");
    args.push_back("matrix_lr=0.01" + std::to_string(i));  // 0.011 .. 0.018 (0.04 is the base)
  }
  json sub = XvctlJson(args);
  ASSERT_EQ(sub.value("experiment_ids", json::array()).size(), 8u) << sub.dump();
  ::usleep(300 * 1000);
  closed.Stop(0);  // SIGTERM then KILL at once: the stream just goes away mid-flight

  const auto t0 = std::chrono::steady_clock::now();
  CommandResult healthy =
      Xvctl({"watch", "--campaign", "many", "--json", "--since", "0", "--until-idle"}, 150);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(healthy.exit_code, 0) << healthy.err << Logs();
  json results = XvctlJson({"results", "--json", "--campaign", "many"});
  int succeeded = 0;
  for (const auto& e : results.value("experiments", json::array())) {
    succeeded += e.value("state", "") == "succeeded";
  }
  EXPECT_EQ(succeeded, 8) << results.dump(2) << Logs();
  std::vector<json> all = JsonLines(healthy.out);
  ExpectOrderedUnique(all, "healthy");
  int steps = 0;
  for (const auto& e : all) steps += e["kind"] == "step";

  // The stopped watcher, resumed, finds the marker where it fell behind.
  ASSERT_EQ(::kill(slow.pid(), SIGCONT), 0);
  std::vector<json> lagged;
  int64_t dropped = 0;
  // Up to 30 s: on a loaded machine the resumed xvctl takes a while to read and print its backlog.
  for (int i = 0; i < 300 && dropped == 0; ++i) {
    ::usleep(100 * 1000);
    lagged = JsonLines(ReadFileText(slow.log_path()));
    for (const auto& e : lagged) {
      if (e["kind"] == "dropped") dropped += e["dropped"].get<int64_t>();
    }
  }
  ::kill(slow.pid(), SIGINT);
  slow.Stop(10);
  std::printf(
      "watch: 8 experiments finished in %.1f s with %d step events; the healthy watcher got "
      "%zu events, the stopped one %zu and a marker of %lld dropped\n",
      took, steps, all.size(), lagged.size(), static_cast<long long>(dropped));
  EXPECT_EQ(steps, 8 * 300);
  EXPECT_GT(dropped, 0) << "the stopped watcher never got a dropped marker";
  ExpectOrderedUnique(lagged, "slow");
  // The marker's cursor is where to re-watch from: everything after it is stored.
  for (const auto& e : lagged) {
    if (e["kind"] != "dropped") continue;
    CommandResult again = Xvctl(
        {"watch", "--json", "--since", std::to_string(e["cursor"].get<int64_t>()), "--until-idle"});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_GE(static_cast<int64_t>(JsonLines(again.out).size()), e["dropped"].get<int64_t>());
    break;
  }
}

}  // namespace
}  // namespace xv::e2e
