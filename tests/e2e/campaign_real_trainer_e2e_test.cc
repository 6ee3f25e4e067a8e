// A campaign round end to end with the real trainer, as a user runs it: a real `xvd`, TWO real
// `xv-worker` processes on the CPU (named e2e-cpu-a and e2e-cpu-b), each running the real
// `xv-train` on recipes/cpu-tiny.yaml shrunk for a test (vocabulary 512 on a data dir that `xvctl
// prepare` makes from /usr/share/common-licenses, 1024-token steps, an 8 s time budget, 1 intra-op
// thread so the two trainers share 2 cores), and `xvctl campaign create / submit --sweep / wait /
// campaign show / results`.
//
// The campaign's policy is a one-sided Welch test with 2 replicates per candidate and 2 head
// controls, at confidence 0.9 without a multiple-comparison correction and a minimum effect of
// 0.001 bpb (with Bonferroni over 3 candidates and n = 2 a real improvement could hardly ever be
// kept). The sweep has two plausible candidates around the base 0.04 (0.02, 0.08) and one clearly
// bad one: matrix_lr=4.0 (100 x the base) ends 0.3-0.4 bpb above the head, after 15 steps (a
// loaded machine) as after 50, where seeds spread the head by about 0.02 (a far smaller
// matrix_lr, 0.0005, is within that noise after so few steps).
//
// Real training is noisy (the step count depends on the machine's load), so the test passes
// whichever way the round is decided, and asserts that the decision is the one the stored
// statistics imply: every statistic is recomputed from the runs' val_bpb (means, sd, n, Welch t,
// df and p, the latter with an incomplete-beta implementation of its own), keep <=> p < alpha and
// improvement >= min_effect and lowest mean among those that pass, at most one keep, the bad
// candidate discarded, the head advanced to the kept recipe iff a candidate was kept. The same
// decision is read from the SQLite file (read-only) and from `xvctl results` / `campaign show`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
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

constexpr const char* kWorkerA = "e2e-cpu-a";
constexpr const char* kWorkerB = "e2e-cpu-b";
constexpr const char* kBadCandidate = "matrix_lr=4.0";
const std::vector<std::string> kCandidates = {"matrix_lr=0.02", "matrix_lr=0.08", kBadCandidate};
constexpr double kConfidence = 0.9;
constexpr double kMinEffect = 0.001;

// ---- Statistics recomputed here, independently of daemon/sched. ----

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Sample standard deviation (n - 1).
double SampleSd(const std::vector<double>& v) {
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// Continued fraction of the regularized incomplete beta function (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return h;
}

// I_x(a, b).
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1.0 - front * BetaContinuedFraction(b, a, 1.0 - x) / b;
}

// P(T > t) for Student's t with (real) df degrees of freedom.
double StudentUpperTail(double t, double df) {
  const double tail = 0.5 * RegularizedIncompleteBeta(df / 2.0, 0.5, df / (df + t * t));
  return t >= 0 ? tail : 1.0 - tail;
}

struct Welch {
  double improvement = 0, t = 0, df = 0, p = 0;
};

// One-sided Welch test of "the candidate's mean is lower than the head's".
Welch WelchLower(const std::vector<double>& candidate, const std::vector<double>& head) {
  const double vc = std::pow(SampleSd(candidate), 2) / candidate.size();
  const double vh = std::pow(SampleSd(head), 2) / head.size();
  Welch w;
  w.improvement = Mean(head) - Mean(candidate);
  const double se = std::sqrt(vc + vh);
  w.t = w.improvement / se;
  w.df =
      (vc + vh) * (vc + vh) / (vc * vc / (candidate.size() - 1.0) + vh * vh / (head.size() - 1.0));
  w.p = StudentUpperTail(w.t, w.df);
  return w;
}

// ---- The fixture: processes, files, xvctl. ----

class CampaignRealTrainerE2eTest : public ::testing::Test {
 protected:
  ChildGuard StartWorker(const std::string& name) {
    // OPENBLAS_NUM_THREADS: the recipe's `threads: 1` sets LibTorch's intra-op threads; OpenBLAS
    // keeps its own pool, so one thread there too keeps each trainer on one core.
    WorkerOptions options;
    options.trainer_bin = BinaryPath("xv-train");
    options.extra = {"--kill-grace", "2"};
    return sb_.StartWorker(name, {{"OPENBLAS_NUM_THREADS", "1"}}, options);
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }

  // Runs xvctl expecting exit 0 and JSON on stdout.
  json XvctlJson(const std::vector<std::string>& args, double timeout_s = 60) {
    CommandResult r = Xvctl(args, timeout_s);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j.is_discarded() ? json::object() : j;
  }

  // sqlite3 -readonly -json on the daemon's database: the rows as a JSON array.
  json Sql(const std::string& query) {
    CommandResult q =
        RunCommand({"/usr/bin/sqlite3", "-readonly", "-json", sb_.database_path(), query}, 30);
    EXPECT_EQ(q.exit_code, 0) << query << ": " << q.err;
    if (q.out.find_first_not_of(" \n") == std::string::npos) return json::array();
    json rows = json::parse(q.out, nullptr, false);
    EXPECT_TRUE(rows.is_array()) << query << ": " << q.out;
    return rows.is_array() ? rows : json::array();
  }

  // Both workers registered and not offline (each probes its device first).
  bool WaitForWorkers(double timeout_s) {
    for (double waited = 0; waited < timeout_s; waited += 0.5) {
      CommandResult r = Xvctl({"status", "--json"});
      json j = json::parse(r.out, nullptr, false);
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

  // cpu-tiny.yaml with `knobs` set: each listed knob's line is replaced, the others appended.
  std::string WriteRecipe(const std::map<std::string, std::string>& knobs) {
    std::ifstream in(SourcePath("recipes/cpu-tiny.yaml"));
    std::ostringstream out;
    std::set<std::string> done;
    std::string line;
    while (std::getline(in, line)) {
      const std::string key = line.substr(0, line.find(':'));
      auto it = knobs.find(key);
      if (line.find(':') != std::string::npos && it != knobs.end()) {
        out << key << ": " << it->second << "  # e2e test\n";
        done.insert(key);
      } else {
        out << line << "\n";
      }
    }
    for (const auto& [key, value] : knobs) {
      if (!done.count(key)) out << key << ": " << value << "  # e2e test\n";
    }
    const std::string path = sb_.Path("cpu-tiny-e2e.yaml");
    std::ofstream(path) << out.str();
    return path;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = sb_.Path(name);
    std::ofstream(path) << text;
    return path;
  }

  std::string Logs() {
    return sb_.LogTails(
        {"xvd.log", std::string(kWorkerA) + ".log", std::string(kWorkerB) + ".log"});
  }

  Sandbox sb_{"crt"};
  ChildGuard xvd_, worker_a_, worker_b_;
};

// The decision entry of candidate `name` (a pointer into `decision`); nullptr when absent.
const json* FindCandidate(const json& decision, const std::string& name) {
  if (!decision.is_object() || !decision.contains("candidates")) return nullptr;
  for (const auto& c : decision.at("candidates")) {
    if (c.value("name", "") == name) return &c;
  }
  return nullptr;
}

// The left-aligned cells `columns` of each row of a rendered xvctl table, keyed by the row's
// first cell (the id), found at the character offsets of the column names in the header line.
std::map<int64_t, std::map<std::string, std::string>> TableCells(
    const std::string& text, const std::vector<std::string>& columns) {
  std::map<int64_t, std::map<std::string, std::string>> rows;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, size_t> offsets;
  while (std::getline(in, line)) {
    if (offsets.empty()) {
      if (line.find(" name ") == std::string::npos) continue;
      for (const auto& col : columns) {
        const size_t at = (line + " ").find(" " + col + " ");
        if (at == std::string::npos) return {};
        offsets[col] = at + 1;
      }
      continue;
    }
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || !std::isdigit(static_cast<unsigned char>(line[first]))) {
      continue;
    }
    auto& row = rows[std::stoll(line.substr(first))];
    for (const auto& [col, at] : offsets) {
      row[col] = at < line.size() ? line.substr(at, line.find(' ', at) - at) : "";
    }
  }
  return rows;
}

TEST_F(CampaignRealTrainerE2eTest, SweepRoundWithReplicatesAndHeadControlsOnTwoWorkers) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  if (!fs::exists(BinaryPath("xv-train"))) {
    GTEST_SKIP() << BinaryPath("xv-train") << " is not built in this build";
  }
  ASSERT_TRUE(sb_.PrepareTinyData());

  ASSERT_TRUE(sb_.StartDaemon(&xvd_));
  worker_a_ = StartWorker(kWorkerA);
  worker_b_ = StartWorker(kWorkerB);
  ASSERT_TRUE(WaitForWorkers(240)) << Logs();

  // The campaign: cpu-tiny, shrunk, with a Welch policy of 2 + 2 runs.
  const std::string recipe = WriteRecipe({{"vocab_size", "512"},
                                          {"time_budget_s", "8"},
                                          {"total_batch_size", "1024"},
                                          {"eval_tokens", "4096"},
                                          {"threads", "1"}});
  const std::string policy =
      WriteFile("welch-2x2.yaml",
                "mode: welch\nconfidence: 0.9\nmin_effect: 0.001\nreplicates: 2\n"
                "head_controls: 2\ncorrection: none\n");
  json created =
      XvctlJson({"campaign", "create", "lr", "--recipe", recipe, "--policy", policy, "--json"});
  ASSERT_EQ(created.value("name", ""), "lr") << created.dump(2);
  const std::string base_hash = created.value("base_recipe_hash", "");
  ASSERT_FALSE(base_hash.empty());
  EXPECT_EQ(created["head_recipe_hash"], base_hash);
  EXPECT_EQ(created["policy"]["mode"], "welch") << created.dump(2);
  EXPECT_EQ(created["policy"]["replicates"], 2);
  EXPECT_EQ(created["policy"]["head_controls"], 2);
  EXPECT_EQ(created["policy"]["correction"], "none");
  EXPECT_NEAR(created["head_recipe"]["matrix_lr"].get<double>(), 0.04, 1e-12);
  EXPECT_EQ(created["head_recipe"]["threads"], 1) << created.dump(2);

  // The sweep round from the head: 3 candidates x 2 replicates + 2 head controls.
  json sub =
      XvctlJson({"submit", "--campaign", "lr", "--sweep", "matrix_lr=0.02,0.08,4.0", "--json"});
  const int64_t round_id = sub.value("round_id", int64_t{0});
  ASSERT_GT(round_id, 0) << sub.dump();
  ASSERT_EQ(sub["experiment_ids"].size(), 8u) << sub.dump();
  CommandResult waited = Xvctl({"wait", "--timeout", "480"}, 510);
  ASSERT_EQ(waited.exit_code, 0) << waited.out << waited.err << Logs();

  // The round is decided automatically (on the daemon's next tick after the last run ends).
  json c, round;
  for (int i = 0; i < 100 && round.is_null(); ++i) {
    c = XvctlJson({"campaign", "show", "lr", "--json"});
    for (const auto& r : c.value("rounds", json::array())) {
      if (r["id"] == round_id && r["state"] == "decided") round = r;
    }
    if (round.is_null()) ::usleep(100 * 1000);
  }
  ASSERT_TRUE(round.is_object()) << "round never decided: " << c.dump(2) << Logs();
  EXPECT_EQ(round["kind"], "sweep");
  EXPECT_EQ(round["experiments"], 8);
  EXPECT_EQ(round["unfinished"], 0);
  EXPECT_EQ(round["head_recipe_hash"], base_hash);
  const json& decision = round["decision"];
  ASSERT_TRUE(decision.is_object()) << round.dump(2);

  // Every run ended with a measurement, and both workers ran some.
  json results = XvctlJson({"results", "--json", "--campaign", "lr"});
  std::map<std::string, std::vector<double>> bpb;  // by candidate name ("head": the controls)
  std::map<std::string, std::vector<json>> rows;
  std::set<std::string> workers;
  for (const auto& e : results.value("experiments", json::array())) {
    ASSERT_EQ(e["round_id"], round_id) << e.dump();
    EXPECT_EQ(e["state"], "succeeded") << e.dump(2) << Logs();
    EXPECT_EQ(e["reused_from_id"], 0) << e.dump();
    ASSERT_TRUE(e["val_bpb"].is_number()) << e.dump(2);
    bpb[e["name"]].push_back(e["val_bpb"].get<double>());
    rows[e["name"]].push_back(e);
    workers.insert(e["worker"].get<std::string>());
  }
  EXPECT_EQ(workers, (std::set<std::string>{kWorkerA, kWorkerB}));
  ASSERT_EQ(rows.size(), 4u) << results.dump(2);
  ASSERT_EQ(bpb["head"].size(), 2u);
  for (const auto& e : rows["head"]) {
    EXPECT_EQ(e["role"], "control");
    EXPECT_EQ(e["decision"], "control");
  }
  for (const auto& name : kCandidates) ASSERT_EQ(bpb[name].size(), 2u) << name;

  // The stored statistics are those of the runs, and the decision follows from them.
  EXPECT_EQ(decision["policy"]["mode"], "welch") << decision.dump(2);
  EXPECT_EQ(decision["tested"], 3) << decision.dump(2);
  EXPECT_EQ(decision["head"]["n"], 2);
  EXPECT_NEAR(decision["head"]["mean"].get<double>(), Mean(bpb["head"]), 1e-9);
  EXPECT_NEAR(decision["head"]["sd"].get<double>(), SampleSd(bpb["head"]), 1e-9);
  const double alpha = 1.0 - kConfidence;  // correction: none
  std::string best_passing;
  for (const auto& name : kCandidates) {
    const json* d = FindCandidate(decision, name);
    ASSERT_NE(d, nullptr) << name << " not in " << decision.dump(2);
    SCOPED_TRACE(d->dump(2));
    const std::vector<double>& v = bpb[name];
    EXPECT_EQ((*d)["stats"]["n"], 2);
    EXPECT_NEAR((*d)["stats"]["mean"].get<double>(), Mean(v), 1e-9);
    EXPECT_NEAR((*d)["stats"]["sd"].get<double>(), SampleSd(v), 1e-9);
    EXPECT_EQ((*d)["head"]["n"], 2);
    EXPECT_NEAR((*d)["head"]["mean"].get<double>(), Mean(bpb["head"]), 1e-9);
    const Welch w = WelchLower(v, bpb["head"]);
    EXPECT_NEAR((*d)["improvement"].get<double>(), w.improvement, 1e-9);
    ASSERT_TRUE((*d)["t"].is_number() && (*d)["df"].is_number() && (*d)["p"].is_number());
    EXPECT_NEAR((*d)["t"].get<double>(), w.t, 1e-6 * std::max(1.0, std::fabs(w.t)));
    EXPECT_NEAR((*d)["df"].get<double>(), w.df, 1e-6 * w.df);
    EXPECT_NEAR((*d)["p"].get<double>(), w.p, 1e-6);
    EXPECT_NEAR((*d)["alpha"].get<double>(), alpha, 1e-12);
    const double p = (*d)["p"].get<double>(), gain = (*d)["improvement"].get<double>();
    const bool passes = p < alpha && gain >= kMinEffect;
    EXPECT_EQ((*d)["passed"].get<bool>(), passes);
    if (passes && (best_passing.empty() || Mean(v) < Mean(bpb[best_passing]))) best_passing = name;
  }
  // A round whose throughput drifted more than the policy's max_throughput_drift (default 10 %;
  // real trainers on a shared machine) is confounded (issue 14): the statistics above are stored
  // as they are, and nothing is kept.
  if (decision.contains("confounded")) {
    EXPECT_EQ(round.value("decision_summary", "").rfind("confounded: ", 0), 0u) << round.dump(2);
    std::cout << "[ round " << round_id << " ] confounded: " << decision["confounded"] << std::endl;
    best_passing.clear();
  }
  // At most one keep: the passing candidate with the lowest mean; the bad one never.
  int keeps = 0;
  for (const auto& name : kCandidates) {
    const json* d = FindCandidate(decision, name);
    const bool kept = name == best_passing;
    EXPECT_EQ((*d)["decision"], kept ? "keep" : "discard") << d->dump(2);
    keeps += (*d)["decision"] == "keep";
    for (const auto& e : rows[name]) EXPECT_EQ(e["decision"], kept ? "keep" : "discard");
  }
  EXPECT_LE(keeps, 1);
  // The bad candidate is discarded, and clearly worse than the head.
  const json* bad = FindCandidate(decision, kBadCandidate);
  EXPECT_EQ((*bad)["decision"], "discard");
  EXPECT_GT(Mean(bpb[kBadCandidate]), Mean(bpb["head"]) + 0.05) << bad->dump(2);
  const bool kept_one = !best_passing.empty();
  std::cout << "[ round " << round_id << " ] " << round.value("decision_summary", "")
            << (kept_one ? "" : " (nothing kept)") << std::endl;

  // The head advanced iff a candidate was kept, to that candidate's recipe.
  if (kept_one) {
    EXPECT_EQ(decision["kept"], best_passing);
    EXPECT_EQ(round["kept_candidate"], best_passing);
    const int64_t kept_id = round["kept_experiment_id"];
    EXPECT_TRUE(kept_id == rows[best_passing][0]["id"] || kept_id == rows[best_passing][1]["id"])
        << round.dump(2);
    EXPECT_NE(c["head_recipe_hash"], base_hash);
    const double kept_lr = std::stod(best_passing.substr(best_passing.find('=') + 1));
    EXPECT_NEAR(c["head_recipe"]["matrix_lr"].get<double>(), kept_lr, 1e-12) << c.dump(2);
    ASSERT_EQ(c["head_history"].size(), 2u) << c.dump(2);
    EXPECT_EQ(c["head_history"][1]["candidate"], best_passing);
    EXPECT_EQ(c["head_history"][1]["round_id"], round_id);
  } else {
    EXPECT_TRUE(decision["kept"].is_null()) << decision.dump(2);
    EXPECT_EQ(round["kept_experiment_id"], 0);
    EXPECT_EQ(c["head_recipe_hash"], base_hash);
    EXPECT_EQ(c["head_history"].size(), 1u) << c.dump(2);
  }

  // The SQLite file, read-only, holds the same decision, the same head and both workers' attempts.
  json db_round =
      Sql("SELECT r.decision_json AS decision, COALESCE(r.kept_experiment_id, 0) AS kept, "
          "c.head_recipe_id <> c.base_recipe_id AS advanced, "
          "json_extract(h.recipe_json, '$.matrix_lr') AS head_lr "
          "FROM rounds r JOIN campaigns c ON c.id = r.campaign_id JOIN recipes h ON h.id = "
          "c.head_recipe_id WHERE r.id = " +
          std::to_string(round_id));
  ASSERT_EQ(db_round.size(), 1u);
  EXPECT_EQ(json::parse(db_round[0]["decision"].get<std::string>()), decision);
  EXPECT_EQ(db_round[0]["kept"], round["kept_experiment_id"]);
  EXPECT_EQ(db_round[0]["advanced"], kept_one ? 1 : 0);
  EXPECT_NEAR(db_round[0]["head_lr"].get<double>(), c["head_recipe"]["matrix_lr"].get<double>(),
              1e-12);
  json db_workers =
      Sql("SELECT w.name AS worker, count(*) AS attempts FROM attempts a JOIN workers w ON w.id = "
          "a.worker_id JOIN experiments e ON e.id = a.experiment_id WHERE e.round_id = " +
          std::to_string(round_id) + " GROUP BY w.name ORDER BY w.name");
  ASSERT_EQ(db_workers.size(), 2u) << db_workers.dump();
  EXPECT_EQ(db_workers[0]["worker"], kWorkerA);
  EXPECT_EQ(db_workers[1]["worker"], kWorkerB);
  EXPECT_EQ(db_workers[0]["attempts"].get<int>() + db_workers[1]["attempts"].get<int>(), 8);
  json db_decisions =
      Sql("SELECT e.name AS name, e.role AS role, e.decision AS decision, count(*) AS n FROM "
          "experiments e WHERE e.round_id = " +
          std::to_string(round_id) + " GROUP BY e.name, e.role, e.decision ORDER BY e.name");
  ASSERT_EQ(db_decisions.size(), 4u) << db_decisions.dump();
  for (const auto& row : db_decisions) {
    EXPECT_EQ(row["n"], 2) << row.dump();
    const std::string name = row["name"];
    if (name == "head") {
      EXPECT_EQ(row["role"], "control");
    } else {
      EXPECT_EQ(row["role"], "candidate");
      EXPECT_EQ(row["decision"], name == best_passing ? "keep" : "discard") << row.dump();
    }
  }

  // What a user reads: the results table with every run and its decision, and campaign show.
  CommandResult table = Xvctl({"results", "--campaign", "lr", "--wide"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("decision  reason"), std::string::npos) << table.out;
  auto cells = TableCells(table.out, {"name", "state", "decision"});
  EXPECT_EQ(cells.size(), 8u) << table.out;
  for (const auto& [name, list] : rows) {
    for (const auto& e : list) {
      SCOPED_TRACE(table.out);
      const auto& row = cells[e["id"].get<int64_t>()];
      EXPECT_EQ(row.count("name") ? row.at("name") : "", name);
      EXPECT_EQ(row.count("state") ? row.at("state") : "", "succeeded");
      EXPECT_EQ(row.count("decision") ? row.at("decision") : "", name == "head" ? "control"
                                                                 : name == best_passing
                                                                     ? "keep"
                                                                     : "discard");
    }
  }
  // The controls' reason column carries the round's summary.
  EXPECT_NE(table.out.find(round.value("decision_summary", "?")), std::string::npos) << table.out;
  CommandResult show = Xvctl({"campaign", "show", "lr"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("round " + std::to_string(round_id) + " decision (welch"),
            std::string::npos)
      << show.out;
  for (const auto& name : kCandidates) EXPECT_NE(show.out.find(name), std::string::npos);
  std::cout << table.out << show.out;
}

}  // namespace
}  // namespace xv::e2e
