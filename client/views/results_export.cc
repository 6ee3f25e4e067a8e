#include "client/views/results_export.h"

#include <cmath>
#include <map>
#include <utility>

#include "client/views/number_format.h"
#include "common/run_states.h"

namespace xv::client {
namespace {

constexpr size_t kCommitChars = 7;

std::string CommitStandIn(const v1::Experiment& e) {
  // A code candidate's train.py is what upstream's commit names: its short sha256 (issue 16).
  if (!e.source_sha256().empty()) return e.source_sha256().substr(0, kCommitChars);
  const std::string& hash = !e.config_hash().empty() ? e.config_hash() : e.recipe_hash();
  return hash.empty() ? std::string(kCommitChars, '0') : hash.substr(0, kCommitChars);
}

// Tabs, line breaks and other control characters would break a TSV/CSV line: spaces instead.
std::string OneLine(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

// Exported at all (see the header): finished, not cancelled, not a copy of another run.
bool Exported(const v1::Experiment& e) {
  ExperimentState state = ExperimentState::kQueued;
  if (!ParseExperimentState(e.state(), &state) || !IsTerminal(state)) return false;
  return state != ExperimentState::kCancelled && e.reused_from_id() == 0;
}

bool Crashed(const v1::Experiment& e) {
  return e.state() != ToString(ExperimentState::kSucceeded) || !e.has_result() ||
         !std::isfinite(e.result().val_bpb());
}

std::string StatusWord(const v1::Experiment& e) {
  if (Crashed(e)) return "crash";
  if (e.decision() == ToString(Decision::kKeep) || e.role() == ToString(RunRole::kControl)) {
    return "keep";
  }
  return "discard";
}

// What a crash row's description names: the failure kind, else the state, and "no val_bpb" for a
// run that ended succeeded without a finite figure.
std::string CrashKind(const v1::Experiment& e) {
  if (!e.failure_kind().empty()) return e.failure_kind();
  return e.state() == ToString(ExperimentState::kSucceeded) ? "no val_bpb" : e.state();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::vector<ResultsExportRow> BuildResultsExport(const std::vector<v1::Experiment>& experiments) {
  std::map<std::pair<std::string, std::string>, int> runs_of;  // (commit, name) -> rows
  for (const auto& e : experiments) {
    if (Exported(e)) ++runs_of[{CommitStandIn(e), e.name()}];
  }
  std::vector<ResultsExportRow> rows;
  for (const auto& e : experiments) {
    if (!Exported(e)) continue;
    ResultsExportRow row;
    row.experiment = &e;
    row.commit = CommitStandIn(e);
    row.status = StatusWord(e);
    const bool crash = row.status == "crash";
    row.val_bpb = crash ? "0.000000" : FormatFixed(e.result().val_bpb(), 6);
    const double mb = e.has_result() ? e.result().peak_vram_mb() : 0;
    row.memory_gb = crash || !std::isfinite(mb) || mb <= 0 ? "0.0" : FormatFixed(mb / 1024, 1);
    std::string description = e.name().empty() ? "base" : e.name();
    if (runs_of[{row.commit, e.name()}] > 1) description += " seed=" + std::to_string(e.seed());
    if (e.role() == ToString(RunRole::kControl)) description += " (control)";
    if (crash) description += " (" + CrashKind(e) + ")";
    row.description = OneLine(description);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string RenderResultsTsv(const std::vector<ResultsExportRow>& rows) {
  std::string out = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n";
  for (const auto& r : rows) {
    out += r.commit + "\t" + r.val_bpb + "\t" + r.memory_gb + "\t" + r.status + "\t" +
           r.description + "\n";
  }
  return out;
}

std::string RenderResultsCsv(const std::vector<ResultsExportRow>& rows) {
  std::string out = "commit,val_bpb,memory_gb,status,description,id,state,decision\n";
  for (const auto& r : rows) {
    const v1::Experiment& e = *r.experiment;
    out += CsvField(r.commit) + "," + r.val_bpb + "," + r.memory_gb + "," + r.status + "," +
           CsvField(r.description) + "," + std::to_string(e.id()) + "," + CsvField(e.state()) +
           "," + CsvField(e.decision()) + "\n";
  }
  return out;
}

nlohmann::json ResultsExportJson(const std::vector<ResultsExportRow>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows) {
    const v1::Experiment& e = *r.experiment;
    arr.push_back({{"commit", r.commit},
                   {"val_bpb", std::stod(r.val_bpb)},
                   {"memory_gb", std::stod(r.memory_gb)},
                   {"status", r.status},
                   {"description", r.description},
                   {"id", e.id()},
                   {"state", e.state()},
                   {"decision", e.decision()}});
  }
  return {{"results", arr}};
}

}  // namespace xv::client
