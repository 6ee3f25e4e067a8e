// Code candidates of an autoresearch fork (issue 16, docs/autoresearch.md § Code candidates): real
// xvd, three real xv-worker processes and xvctl over the fork-shaped fixture
// tests/fixtures/autoresearch_fork/train.py. Workers code-a and code-b configure the trainer
// `code` with `allow_code_candidates: true` under bubblewrap; worker plain configures a trainer of
// the same name without it and is never assigned a code candidate.
//  - a whole-file candidate (`xvctl submit --source`) and a patch candidate (`--patch`) run in the
//    sandbox with their own text (the stored `source` event names the candidate's sha256); the
//    source is stored once by its sha256 and `xvctl show` names it; the same text again (as a
//    file, or as a patch that yields it) is the same config and reuses the first run's result;
//  - a patch that does not apply is refused at submit (INVALID_ARGUMENT naming the hunk), storing
//    nothing;
//  - results.tsv's commit column is the short source hash;
//  - a Welch round over two code candidates is decided as for knobs: the runaway edit (matrix lr
//    x 100) is discarded, at most one candidate kept.
// Needs Debian's python3-torch, python3-numpy and bubblewrap.
#include <gtest/gtest.h>
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

const char* const kAllowing[] = {"code-a", "code-b"};
constexpr const char* kPlain = "plain";

class AutoresearchCodeCandidatesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0) << "needs Debian's python3";
    ASSERT_EQ(::access("/usr/bin/bwrap", X_OK), 0) << "needs bubblewrap";
    CommandResult torch = RunCommand({"/usr/bin/python3", "-c", "import torch, numpy"}, 120);
    ASSERT_EQ(torch.exit_code, 0) << "needs python3-torch and python3-numpy: " << torch.err;
    ASSERT_TRUE(sb_.PrepareTinyData());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_));
    const std::string trainer =
        "trainers:\n  - name: code\n    kind: autoresearch\n    source: " + source_ +
        "\n    program: /usr/bin/python3\n    prepare: " + SourcePath("python/xv_autoresearch") +
        "\n    output: upstream\n    sandbox: bubblewrap\n";
    const std::string allowing =
        WriteFile("allowing.yaml", trainer + "    allow_code_candidates: true\n");
    const std::string plain = WriteFile("plain.yaml", trainer);
    for (const char* name : kAllowing) {
      workers_.push_back(
          sb_.StartFakeWorker(name, {}, {"--config", allowing, "--kill-grace", "2"}));
    }
    workers_.push_back(sb_.StartFakeWorker(kPlain, {}, {"--config", plain, "--kill-grace", "2"}));
    ASSERT_TRUE(WaitForWorkers(120)) << Logs();
    recipe_ = WriteFile("fork.yaml",
                        "depth: 2\naspect_ratio: 32\nhead_dim: 32\nwindow_pattern: SL\n"
                        "vocab_size: 512\nsequence_len: 64\ndevice_batch_size: 4\n"
                        "total_batch_size: 512\ntime_budget_s: 2\neval_tokens: 2048\n"
                        "threads: 1\ndevice: cpu\n");
    original_ = ReadFileText(source_);
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
      if (up.size() == 3) return true;
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

  json Query(const std::string& sql) {
    CommandResult r =
        RunCommand({"/usr/bin/sqlite3", "-readonly", "-json", sb_.database_path(), sql}, 30);
    EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.err;
    if (r.out.find_first_not_of(" \n") == std::string::npos) return json::array();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << r.out;
    return j.is_array() ? j : json::array();
  }

  int64_t Count(const std::string& sql) {
    json rows = Query(sql);
    return rows.size() == 1 ? rows[0].begin().value().get<int64_t>() : -1;
  }

  // Submits one code candidate (`flag` --source or --patch, `file`) to campaign `campaign`;
  // returns the experiment id.
  int64_t SubmitCode(const std::string& flag, const std::string& file,
                     const std::string& campaign = "code") {
    json sub = XvctlJson(
        {"submit", recipe_, "--trainer", "code", "--campaign", campaign, flag, file, "--json"});
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

  json Row(int64_t id) {
    json r = Query(
        "SELECT e.state, e.failure_kind, e.failure_detail, e.config_hash, e.reused_from_id, "
        "e.recipe_id, COALESCE(w.name, '') AS worker FROM experiments e LEFT JOIN workers w ON "
        "w.id = e.worker_id WHERE e.id = " +
        std::to_string(id));
    return r.size() == 1 ? r[0] : json();
  }

  std::vector<json> Events(int64_t id, const std::string& type) {
    std::vector<json> out;
    for (const auto& row :
         Query("SELECT json FROM events WHERE source = 'trainer' AND experiment_id = " +
               std::to_string(id) + " AND type = '" + type + "' ORDER BY seq")) {
      out.push_back(json::parse(row["json"].get<std::string>(), nullptr, false));
    }
    return out;
  }

  // The fixture with its first `from` replaced by `to`.
  std::string Edited(const std::string& from, const std::string& to) {
    std::string text = original_;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  }

  // A unified diff of the fixture changing its line holding `from` into the same line with `to`;
  // `claimed` replaces the old line's text when given (a patch made against another file).
  std::string Patch(const std::string& from, const std::string& to,
                    const std::string& claimed = "") {
    std::istringstream in(original_);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find(from) == std::string::npos) continue;
      std::string changed = line;
      changed.replace(changed.find(from), from.size(), to);
      const std::string old_line = claimed.empty() ? line : claimed;
      return "--- a/train.py\n+++ b/train.py\n@@ -" + std::to_string(n) + ",1 +" +
             std::to_string(n) + ",1 @@\n-" + old_line + "\n+" + changed + "\n";
    }
    ADD_FAILURE() << from << " not in the fixture";
    return "";
  }

  std::string Sha256Of(const std::string& path) {
    return RunCommand({"sha256sum", path}, 30).out.substr(0, 64);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = sb_.Path(name);
    std::ofstream(path) << text;
    return path;
  }

  std::string Logs() {
    return sb_.LogTails({"xvd.log", "code-a.log", "code-b.log", "plain.log"}, 3000);
  }

  const std::string source_ = SourcePath("tests/fixtures/autoresearch_fork/train.py");
  Sandbox sb_{"cc"};
  ChildGuard xvd_;
  std::vector<ChildGuard> workers_;
  std::string recipe_, original_;
};

TEST_F(AutoresearchCodeCandidatesE2eTest, FileAndPatchCandidatesRunStoredOnceAndDeduplicated) {
  const std::string kFrom = "EMBEDDING_LR * 0.01";
  const std::string file = WriteFile("edited.py", Edited(kFrom, "EMBEDDING_LR * 0.02"));
  const std::string sha = Sha256Of(file);
  const std::string patch = WriteFile("edit.diff", Patch(kFrom, "EMBEDDING_LR * 0.03"));
  const std::string patched_sha =
      Sha256Of(WriteFile("patched.py", Edited(kFrom, "EMBEDDING_LR * 0.03")));

  const int64_t whole = SubmitCode("--source", file);
  const int64_t patched = SubmitCode("--patch", patch);
  ASSERT_GT(whole, 0);
  ASSERT_GT(patched, 0);
  Wait(whole);
  Wait(patched);
  for (const auto& [id, want] : {std::pair{whole, sha}, std::pair{patched, patched_sha}}) {
    const json row = Row(id);
    ASSERT_EQ(row["state"], "succeeded") << id << ": " << row.dump(2) << Logs();
    EXPECT_NE(row["worker"], kPlain) << "a worker without allow_code_candidates ran it";
    // The candidate's own text ran (its constants rewritten): the source event names it.
    const std::vector<json> source = Events(id, "source");
    ASSERT_EQ(source.size(), 1u) << Logs();
    EXPECT_EQ(source[0]["candidate_sha256"], want) << source[0].dump(2);
    EXPECT_NE(ReadFileText(source[0].value("copy", ""))
                  .find(id == whole ? "EMBEDDING_LR * 0.02" : "EMBEDDING_LR * 0.03"),
              std::string::npos);
    // Stored once, by its hash, and shown.
    EXPECT_EQ(Count("SELECT COUNT(*) FROM sources WHERE sha256 = '" + want + "'"), 1);
    json show = XvctlJson({"show", std::to_string(id), "--json"});
    EXPECT_EQ(show["code"]["sha256"], want) << show.dump(2).substr(0, 2000);
    CommandResult text = Xvctl({"show", std::to_string(id)});
    EXPECT_NE(text.out.find("code:      " + want), std::string::npos) << text.out;
  }
  EXPECT_EQ(ReadFileText(source_), original_) << "the configured file must not change";

  // The same text again, as the file and as a patch yielding it: one source row, one config, and
  // (the campaign has no policy) the first run's result stands in.
  const std::string same_patch = WriteFile("same.diff", Patch(kFrom, "EMBEDDING_LR * 0.02"));
  const int64_t again = SubmitCode("--source", file);
  const int64_t again_patch = SubmitCode("--patch", same_patch);
  for (int64_t id : {again, again_patch}) {
    Wait(id);
    const json row = Row(id);
    EXPECT_EQ(row["config_hash"], Row(whole)["config_hash"]) << row.dump(2);
    EXPECT_EQ(row["recipe_id"], Row(whole)["recipe_id"]) << row.dump(2);
    EXPECT_EQ(row["reused_from_id"], whole) << row.dump(2);
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sources WHERE sha256 = '" + sha + "'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sources"), 3);  // the registered base and the two edits

  // A patch that does not apply is refused at submit, naming the hunk; nothing is stored.
  const int64_t experiments = Count("SELECT COUNT(*) FROM experiments");
  const std::string stale =
      WriteFile("stale.diff", Patch(kFrom, "EMBEDDING_LR * 0.5", "        {\"stale\": 1},"));
  CommandResult refused = Xvctl(
      {"submit", recipe_, "--trainer", "code", "--campaign", "code", "--patch", stale, "--json"});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE((refused.out + refused.err).find("hunk 1 (@@"), std::string::npos)
      << refused.out << refused.err;
  EXPECT_NE((refused.out + refused.err).find("does not apply"), std::string::npos)
      << refused.out << refused.err;
  EXPECT_EQ(Count("SELECT COUNT(*) FROM experiments"), experiments);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM sources"), 3);

  // results.tsv: the short source hash is the commit.
  CommandResult tsv = Xvctl({"results", "--campaign", "code", "--format", "tsv"});
  ASSERT_EQ(tsv.exit_code, 0) << tsv.err;
  EXPECT_NE(tsv.out.find("\n" + sha.substr(0, 7) + "\t"), std::string::npos) << tsv.out;
  EXPECT_NE(tsv.out.find("\n" + patched_sha.substr(0, 7) + "\t"), std::string::npos) << tsv.out;
}

TEST_F(AutoresearchCodeCandidatesE2eTest, AWelchRoundOfCodeCandidatesIsDecidedAsForKnobs) {
  const std::string policy =
      WriteFile("welch-2x2.yaml",
                "mode: welch\nconfidence: 0.9\nmin_effect: 0.001\nreplicates: 2\n"
                "head_controls: 2\ncorrection: none\nmax_throughput_drift: 10\n");
  json created = XvctlJson({"campaign", "create", "fork", "--recipe", recipe_, "--policy", policy,
                            "--trainer", "code", "--json"});
  ASSERT_EQ(created.value("name", ""), "fork") << created.dump(2);
  const std::string good =
      WriteFile("good.py", Edited("EMBEDDING_LR * 0.01", "EMBEDDING_LR * 0.02"));
  const std::string runaway =
      WriteFile("runaway.py", Edited("\"lr\": MATRIX_LR,", "\"lr\": MATRIX_LR * 100.0,"));
  const std::string runaway_name = "source:" + Sha256Of(runaway).substr(0, 12);
  json sub =
      XvctlJson({"submit", "--campaign", "fork", "--source", good, "--source", runaway, "--json"});
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
  ASSERT_TRUE(round["decision"].is_object()) << round.dump(2);
  EXPECT_EQ(round["decision"]["policy"]["mode"], "welch");

  json results = XvctlJson({"results", "--json", "--campaign", "fork"});
  std::map<std::string, int> runs;
  int keeps = 0;
  for (const auto& e : results.value("experiments", json::array())) {
    ++runs[e["name"]];
    const std::string d = e.value("decision", "");
    EXPECT_TRUE(d == "keep" || d == "discard" || d == "control") << e.dump(2);
    if (e["name"] == runaway_name) EXPECT_EQ(d, "discard") << e.dump(2);
    keeps += d == "keep";
  }
  EXPECT_EQ(runs["head"], 2) << results.dump(2);
  EXPECT_EQ(runs["source:" + Sha256Of(good).substr(0, 12)], 2) << results.dump(2);
  EXPECT_EQ(runs[runaway_name], 2) << results.dump(2);
  EXPECT_LE(keeps, 2);
  // Only the allowing workers ran the code candidates; the plain one may run the head controls.
  for (const auto& r : Query("SELECT e.name, w.name AS worker FROM experiments e JOIN workers w "
                             "ON w.id = e.worker_id WHERE e.round_id = " +
                             std::to_string(round_id))) {
    if (r["name"] != "head") EXPECT_NE(r["worker"], kPlain) << r.dump();
  }
  std::cout << "[ round " << round_id << " ] " << round.value("decision_summary", "") << std::endl;
}

}  // namespace
}  // namespace xv::e2e
