// An autoresearch fork under xv, unmodified (docs/autoresearch.md): real xvd, two real xv-worker
// processes whose trainer `fork` is of kind autoresearch over the fork-shaped fixture
// tests/fixtures/autoresearch_fork/train.py (upstream-style constants, `from prepare import ...`,
// a tiny torch model on the CPU), with xv's prepare module (python/xv_autoresearch) on the data
// directory `xvctl prepare` makes from /usr/share/common-licenses, and xvctl:
//  - an override lands in its constant (train_sequence_len in prepare's MAX_SEQ_LEN, the
//    evaluation staying at sequence_len): the fixture prints its constants, the stored `source`
//    event carries the rewritten copy's sha256 (equal to the copy's own), and the result's metric
//    version is xv's, bpb-raw-bytes-v2;
//  - a knob with no constant in the file (softcap) is refused before anything runs: the experiment
//    ends invalid (invalid_config) naming the knob, its constant and the file; the trainer never
//    started (no event stored, no copy written);
//  - a Welch round of the fork's candidates is decided as for knob candidates: every run measured,
//    the runaway candidate (matrix_lr=4.0) discarded, at most one keep.
// Needs Debian's python3-torch and python3-numpy (/usr/bin/python3).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWorkerA = "fork-a";
constexpr const char* kWorkerB = "fork-b";

class AutoresearchForkE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0) << "needs Debian's python3";
    CommandResult torch = RunCommand({"/usr/bin/python3", "-c", "import torch, numpy"}, 120);
    ASSERT_EQ(torch.exit_code, 0) << "needs python3-torch and python3-numpy: " << torch.err;
    ASSERT_TRUE(sb_.PrepareTinyData());
    listener_port_ = Listen();
    ASSERT_TRUE(sb_.StartDaemon(&xvd_));
    // `fork`, and the same fork sandboxed (bubblewrap): once as is, and once per escape.
    std::ostringstream config_text;
    config_text << "trainers:\n";
    const std::vector<std::pair<std::string, std::string>> trainers = {
        {"fork", ""},
        {"boxed", "sandbox"},
        {"boxed-write", "write-outside " + sb_.data() + "/escape.txt"},
        {"boxed-read", "read " + sb_.database_path()},
        {"boxed-socket", "socket " + std::to_string(listener_port_)}};
    for (const auto& [name, action] : trainers) {
      config_text << "  - name: " << name << "\n    kind: autoresearch\n    source: " << source_
                  << "\n    program: /usr/bin/python3\n    prepare: "
                  << SourcePath("python/xv_autoresearch") << "\n    output: upstream\n";
      if (!action.empty()) config_text << "    sandbox: bubblewrap\n";
      if (!action.empty() && action != "sandbox") {
        config_text << "    env: {XV_FIXTURE_ACTION: \"" << action << "\"}\n";
      }
    }
    const std::string config = WriteFile("worker.yaml", config_text.str());
    // --trainer-bin: the scripted fake answers `fingerprint` at once (no libtorch is offered).
    worker_a_ = sb_.StartFakeWorker(kWorkerA, {}, {"--config", config, "--kill-grace", "2"});
    worker_b_ = sb_.StartFakeWorker(kWorkerB, {}, {"--config", config, "--kill-grace", "2"});
    ASSERT_TRUE(WaitForWorkers(120)) << Logs();
    recipe_ = WriteFile("fork.yaml",
                        "depth: 2\naspect_ratio: 32\nhead_dim: 32\nwindow_pattern: SL\n"
                        "vocab_size: 512\nsequence_len: 64\ndevice_batch_size: 4\n"
                        "total_batch_size: 512\ntime_budget_s: 2\neval_tokens: 2048\n"
                        "threads: 1\ndevice: cpu\n");
  }

  bool WaitForWorkers(double timeout_s) {
    for (double waited = 0; waited < timeout_s; waited += 0.5) {
      json j = json::parse(Xvctl({"status", "--json"}).out, nullptr, false);
      std::set<std::string> up;
      if (j.is_object()) {
        for (const auto& w : j.value("workers", json::array())) {
          if (w.value("state", "") != "offline") up.insert(w.value("name", ""));
        }
      }
      if (up.count(kWorkerA) && up.count(kWorkerB)) return true;
      ::usleep(500 * 1000);
    }
    return false;
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }

  json XvctlJson(const std::vector<std::string>& args, double timeout_s = 60) {
    CommandResult r = Xvctl(args, timeout_s);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? json() : j;
  }

  // sqlite3 -readonly -json on the daemon's database: the rows as a JSON array.
  json Query(const std::string& sql) {
    CommandResult r =
        RunCommand({"/usr/bin/sqlite3", "-readonly", "-json", sb_.database_path(), sql}, 30);
    EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.err;
    if (r.out.find_first_not_of(" \n") == std::string::npos) return json::array();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << r.out;
    return j.is_array() ? j : json::array();
  }

  // A TCP listener on 127.0.0.1 for the socket escape (outside the sandbox a connect works);
  // returns its port.
  int Listen() {
    listener_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 9;
    if (::listen(listener_fd_, 16) != 0) return 9;
    socklen_t len = sizeof addr;
    ::getsockname(listener_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }
  void TearDown() override {
    if (listener_fd_ >= 0) ::close(listener_fd_);
  }

  // Submits the base recipe with `sets` to `trainer`; returns the experiment id.
  int64_t Submit(const std::vector<std::string>& sets, const std::string& trainer = "fork") {
    std::vector<std::string> args = {"submit", recipe_, "--trainer", trainer, "--json"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    json sub = XvctlJson(args);
    if (!sub.is_object() || sub.value("experiment_ids", json::array()).size() != 1) {
      ADD_FAILURE() << "submit: " << sub.dump();
      return 0;
    }
    return sub["experiment_ids"][0].get<int64_t>();
  }

  void Wait(int64_t id) {
    CommandResult w = Xvctl({"wait", std::to_string(id), "--timeout", "300"}, 330);
    ASSERT_TRUE(w.exit_code == 0 || w.exit_code == 1) << w.out << w.err << Logs();
  }

  // The experiment's stored trainer events of `type`, parsed.
  std::vector<json> Events(int64_t id, const std::string& type) {
    std::vector<json> out;
    for (const auto& row :
         Query("SELECT json FROM events WHERE source = 'trainer' AND experiment_id = " +
               std::to_string(id) + " AND type = '" + type + "' ORDER BY seq")) {
      out.push_back(json::parse(row["json"].get<std::string>(), nullptr, false));
    }
    return out;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = sb_.Path(name);
    std::ofstream(path) << text;
    return path;
  }

  std::string Logs() { return sb_.LogTails({"xvd.log", "fork-a.log", "fork-b.log"}, 3000); }

  const std::string source_ = SourcePath("tests/fixtures/autoresearch_fork/train.py");
  Sandbox sb_{"af"};
  ChildGuard xvd_, worker_a_, worker_b_;
  std::string recipe_;
  int listener_fd_ = -1;
  int listener_port_ = 9;
};

TEST_F(AutoresearchForkE2eTest, OverrideLandsInItsConstantAndTheSourceHashIsStored) {
  const std::string before = ReadFileText(source_);
  const int64_t id = Submit(
      {"matrix_lr=0.02", "window_pattern=L", "adam_betas=[0.9,0.99]", "train_sequence_len=32"});
  ASSERT_GT(id, 0);
  Wait(id);
  json row = Query(
      "SELECT state, failure_kind, failure_detail, worker_id FROM experiments "
      "WHERE id = " +
      std::to_string(id));
  ASSERT_EQ(row.size(), 1u);
  ASSERT_EQ(row[0]["state"], "succeeded") << row.dump(2) << Logs();

  // The fixture printed the constants it ran with: the overrides and the recipe's other knobs.
  json constants;
  for (const json& log : Events(id, "log")) {
    const std::string text = log.value("text", "");
    const std::string prefix = "fixture constants: ";
    if (text.rfind(prefix, 0) == 0) constants = json::parse(text.substr(prefix.size()));
  }
  ASSERT_TRUE(constants.is_object()) << "no constants line stored" << Logs();
  EXPECT_EQ(constants["MATRIX_LR"], 0.02) << constants.dump();
  EXPECT_EQ(constants["WINDOW_PATTERN"], "L");
  EXPECT_EQ(constants["ADAM_BETAS"], json::array({0.9, 0.99}));
  EXPECT_EQ(constants["DEPTH"], 2);
  EXPECT_EQ(constants["ASPECT_RATIO"], 32);
  EXPECT_EQ(constants["TOTAL_BATCH_SIZE"], 512);
  // The fork trains at train_sequence_len (prepare's MAX_SEQ_LEN, from XV_TRAIN_SEQUENCE_LEN) and
  // is evaluated at the recipe's sequence_len (prepare's EVAL_SEQ_LEN, from XV_SEQUENCE_LEN).
  EXPECT_EQ(constants["MAX_SEQ_LEN"], 32);
  EXPECT_EQ(constants["prepare.EVAL_SEQ_LEN"], 64);
  EXPECT_EQ(constants["device"], "cpu");
  EXPECT_EQ(constants["TIME_BUDGET"], 2);  // from prepare (XV_TIME_BUDGET_S)

  // The source event: the configured file, the rewritten copy's hash and constants.
  std::vector<json> source = Events(id, "source");
  ASSERT_EQ(source.size(), 1u) << Logs();
  EXPECT_EQ(source[0]["file"], source_);
  EXPECT_EQ(source[0]["constants"]["MATRIX_LR"], "0.02");
  EXPECT_EQ(source[0]["metric_version"], "bpb-raw-bytes-v2");
  const std::string copy = source[0].value("copy", "");
  ASSERT_TRUE(fs::exists(copy)) << copy;
  CommandResult sum = RunCommand({"sha256sum", copy}, 30);
  EXPECT_EQ(sum.out.substr(0, 64), source[0]["sha256"].get<std::string>());
  EXPECT_NE(ReadFileText(copy).find("MATRIX_LR = 0.02"), std::string::npos);
  EXPECT_EQ(ReadFileText(source_), before) << "the fork's own file must not change";
  // xvctl show names the source that ran.
  json show = XvctlJson({"show", std::to_string(id), "--json"});
  EXPECT_EQ(show["source"]["sha256"], source[0]["sha256"]) << show.dump(2).substr(0, 3000);
  EXPECT_EQ(show["source"]["file"], source_);
  CommandResult text = Xvctl({"show", std::to_string(id)});
  EXPECT_NE(text.out.find("source:    " + source[0]["sha256"].get<std::string>().substr(0, 12)),
            std::string::npos)
      << text.out;

  // The result is xv's val_bpb (xv's prepare module evaluated it).
  json result = Query("SELECT val_bpb, metric_version FROM results WHERE experiment_id = " +
                      std::to_string(id));
  ASSERT_EQ(result.size(), 1u) << Logs();
  EXPECT_EQ(result[0]["metric_version"], "bpb-raw-bytes-v2");
  EXPECT_GT(result[0]["val_bpb"].get<double>(), 0.5);
}

TEST_F(AutoresearchForkE2eTest, KnobWithoutItsConstantIsRefusedBeforeAnythingRuns) {
  const int64_t id = Submit({"softcap=30"});
  ASSERT_GT(id, 0);
  Wait(id);
  json row = Query("SELECT state, failure_kind, failure_detail FROM experiments WHERE id = " +
                   std::to_string(id));
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0]["state"], "invalid") << row.dump(2) << Logs();
  EXPECT_EQ(row[0]["failure_kind"], "invalid_config") << row.dump(2);
  const std::string detail = row[0].value("failure_detail", "");
  EXPECT_NE(detail.find("softcap"), std::string::npos) << detail;
  EXPECT_NE(detail.find("SOFTCAP"), std::string::npos) << detail;
  EXPECT_NE(detail.find(source_), std::string::npos) << detail;
  // Nothing ran: no event of the trainer, no rewritten copy in either worker's attempt dir.
  EXPECT_EQ(Query("SELECT seq FROM events WHERE source = 'trainer' AND experiment_id = " +
                  std::to_string(id))
                .size(),
            0u);
  for (const char* w : {kWorkerA, kWorkerB}) {
    EXPECT_FALSE(fs::exists(sb_.work_dir(w) + "/exp-" + std::to_string(id) + "-a1/train.py"));
  }
}

// The sandbox (bubblewrap): the fork runs in it; a write outside its attempt directory (into the
// read-only data directory), a read of the daemon's state directory and a socket each fail the
// attempt as sandbox_denied, and nothing outside the attempt directory changes.
TEST_F(AutoresearchForkE2eTest, TheSandboxRunsTheForkAndDeniesItsEscapes) {
  ASSERT_EQ(::access("/usr/bin/bwrap", X_OK), 0) << "needs bubblewrap";
  const int64_t ok = Submit({}, "boxed");
  const int64_t write = Submit({}, "boxed-write");
  const int64_t read = Submit({}, "boxed-read");
  const int64_t sock = Submit({}, "boxed-socket");
  for (int64_t id : {ok, write, read, sock}) Wait(id);
  auto row = [&](int64_t id) {
    json r = Query("SELECT state, failure_kind, failure_detail FROM experiments WHERE id = " +
                   std::to_string(id));
    return r.size() == 1 ? r[0] : json();
  };
  json boxed = row(ok);
  EXPECT_EQ(boxed["state"], "succeeded") << boxed.dump(2) << Logs();
  for (int64_t id : {write, read, sock}) {
    json r = row(id);
    EXPECT_EQ(r["state"], "failed") << id << ": " << r.dump(2) << Logs();
    EXPECT_EQ(r["failure_kind"], "sandbox_denied") << id << ": " << r.dump(2);
    for (const json& log : Events(id, "log")) {
      EXPECT_EQ(log.value("text", "").find("succeeded"), std::string::npos) << log.dump();
    }
  }
  EXPECT_NE(row(write).value("failure_detail", "").find("Read-only file system"), std::string::npos)
      << row(write).dump(2);
  EXPECT_FALSE(fs::exists(sb_.data() + "/escape.txt"));
  EXPECT_NE(row(sock).value("failure_detail", "").find("Connection refused"), std::string::npos)
      << row(sock).dump(2);
}

TEST_F(AutoresearchForkE2eTest, AWelchRoundOfTheForkIsDecidedAsForKnobs) {
  const std::string policy =
      WriteFile("welch-2x2.yaml",
                "mode: welch\nconfidence: 0.9\nmin_effect: 0.001\nreplicates: 2\n"
                "head_controls: 2\ncorrection: none\nmax_throughput_drift: 10\n");
  json created = XvctlJson({"campaign", "create", "fork", "--recipe", recipe_, "--policy", policy,
                            "--trainer", "fork", "--json"});
  ASSERT_EQ(created.value("name", ""), "fork") << created.dump(2);
  json sub = XvctlJson({"submit", "--campaign", "fork", "--sweep", "matrix_lr=0.02,4.0", "--json"});
  const int64_t round_id = sub.value("round_id", int64_t{0});
  ASSERT_GT(round_id, 0) << sub.dump();
  ASSERT_EQ(sub["experiment_ids"].size(), 6u) << sub.dump();
  CommandResult waited = Xvctl({"wait", "--timeout", "480"}, 510);
  ASSERT_TRUE(waited.exit_code == 0 || waited.exit_code == 1) << waited.out << waited.err << Logs();

  json c, round;
  for (int i = 0; i < 200 && round.is_null(); ++i) {
    c = XvctlJson({"campaign", "show", "fork", "--json"});
    for (const auto& r : c.value("rounds", json::array())) {
      if (r["id"] == round_id && r["state"] == "decided") round = r;
    }
    if (round.is_null()) ::usleep(100 * 1000);
  }
  ASSERT_TRUE(round.is_object()) << "round never decided: " << c.dump(2) << Logs();
  const json& decision = round["decision"];
  ASSERT_TRUE(decision.is_object()) << round.dump(2);
  EXPECT_EQ(decision["policy"]["mode"], "welch");

  json results = XvctlJson({"results", "--json", "--campaign", "fork"});
  std::map<std::string, int> runs;
  int keeps = 0;
  for (const auto& e : results.value("experiments", json::array())) {
    ++runs[e["name"]];
    const std::string d = e.value("decision", "");
    EXPECT_TRUE(d == "keep" || d == "discard" || d == "control") << e.dump(2);
    if (e["name"] != "matrix_lr=4.0") {
      EXPECT_EQ(e["state"], "succeeded") << e.dump(2) << Logs();
      EXPECT_TRUE(e["val_bpb"].is_number()) << e.dump(2);
    } else {
      EXPECT_EQ(d, "discard") << e.dump(2);  // diverges or trains far worse: never kept
    }
    keeps += d == "keep";
  }
  EXPECT_EQ(runs["head"], 2) << results.dump(2);
  EXPECT_EQ(runs["matrix_lr=0.02"], 2);
  EXPECT_EQ(runs["matrix_lr=4.0"], 2);
  EXPECT_LE(keeps, 2);  // both replicates of the one kept candidate at most
  for (const auto& cand : decision.value("candidates", json::array())) {
    if (cand.value("name", "") == "matrix_lr=4.0") EXPECT_EQ(cand["decision"], "discard");
  }
  // Every run of the round carried its rewritten source's hash.
  json ids = Query("SELECT id FROM experiments WHERE round_id = " + std::to_string(round_id));
  ASSERT_EQ(ids.size(), 6u);
  for (const auto& r : ids) {
    EXPECT_EQ(Events(r["id"].get<int64_t>(), "source").size(), 1u) << r.dump();
  }
  std::cout << "[ round " << round_id << " ] " << round.value("decision_summary", "") << std::endl;
}

}  // namespace
}  // namespace xv::e2e
