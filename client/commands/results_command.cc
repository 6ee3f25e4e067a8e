// xvctl results [--json] [--format table|tsv|csv|json] [--wide] [--campaign NAME|ID] [--state S]
//               [--decision D] [--sort id|val_bpb] [--limit N] [--failures] [--state-dir DIR]
// Asks xvd; when no daemon answers, reads <state dir>/xv.db read-only. --failures prints the
// failure summary (per knob value: diverged, crashed, timed out, NaN rate) instead. --format tsv
// is upstream autoresearch's results.tsv (client/views/results_export.h).
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/numeric_ref.h"
#include "client/terminal_width.h"
#include "client/views/campaign_view.h"
#include "client/views/experiment_view.h"
#include "client/views/failure_summary_view.h"
#include "client/views/results_export.h"
#include "client/views/text_table.h"
#include "common/bounded_json.h"
#include "common/untrusted_text.h"
#include "daemon/store/results_reader.h"

namespace xv::client {
namespace {

// Without --limit, at most this many rows are printed (the most recent, or the best with --sort
// val_bpb), and a note on stderr says so: the output stays bounded at any table size.
constexpr int kMaxUnlimitedRows = 10000;

struct ResultsArgs {
  ExperimentFilter filter;
  bool json = false;
  bool failures = false;
  std::string format = "table";  // table | tsv | csv | json
  bool wide = false;
};

int RunFailures(const ResultsArgs& a, const ClientOptions& options) {
  v1::FailureSummaryRequest req;
  int64_t id = 0;
  if (ParseNumericRef(a.filter.campaign, &id)) {
    req.set_campaign_id(id);
  } else {
    req.set_campaign(a.filter.campaign);
  }
  DaemonClient client(options);
  v1::FailureSummaryResponse resp;
  std::vector<v1::KnobFailure> knobs;
  Status st = client.FailureSummary(req, &resp);
  if (st.ok()) {
    knobs.assign(resp.knobs().begin(), resp.knobs().end());
  } else if (st.code() == Status::Code::kUnavailable) {
    const std::string db = options.StateDir() + "/xv.db";
    if (!std::filesystem::exists(db)) {
      return ReportError(Status::Unavailable(st.message() + "; and there is no database at " + db +
                                             " to read instead"));
    }
    std::cerr << "xvctl: no xvd answers at " << client.address() << "; reading " << db
              << " read-only" << std::endl;
    std::unique_ptr<store::ResultsReader> store;
    st = store::ResultsReader::Open(db, &store);
    if (st.ok()) st = store->FailureSummary(req.campaign_id(), req.campaign(), &knobs);
  }
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << DumpJsonLossless(FailureSummaryJson(knobs), 2) << std::endl;
  } else if (knobs.empty()) {
    std::cout << "no failures"
              << (a.filter.campaign.empty() ? "" : " in campaign " + a.filter.campaign)
              << std::endl;
  } else {
    std::cout << RenderFailureSummary(knobs);
  }
  return kExitOk;
}

int RunResults(const ResultsArgs& args, const ClientOptions& options) {
  if (args.failures) return RunFailures(args, options);
  ResultsArgs a = args;
  // One row more than the cap tells whether more match.
  const bool capped = a.filter.limit == 0;
  if (capped) a.filter.limit = kMaxUnlimitedRows + 1;
  DaemonClient client(options);
  std::vector<v1::Experiment> rows;
  Status st = ListFromDaemon(&client, a.filter, &rows);
  if (st.code() == Status::Code::kUnavailable) {
    const std::string db = options.StateDir() + "/xv.db";
    if (!std::filesystem::exists(db)) {
      return ReportError(Status::Unavailable(st.message() + "; and there is no database at " + db +
                                             " to read instead"));
    }
    std::cerr << "xvctl: no xvd answers at " << client.address() << "; reading " << db
              << " read-only" << std::endl;
    st = ListFromDatabase(db, a.filter, &rows);
  }
  if (!st.ok()) return ReportError(st);
  const bool truncated = capped && rows.size() > static_cast<size_t>(kMaxUnlimitedRows);
  if (truncated) {
    // Id order keeps the most recent (the list is oldest first); val_bpb order the best.
    if (a.filter.sort == "val_bpb") {
      rows.resize(kMaxUnlimitedRows);
    } else {
      rows.erase(rows.begin());
    }
    std::cerr << "xvctl results: more than " << kMaxUnlimitedRows << " experiments match; showing "
              << (a.filter.sort == "val_bpb" ? "the best " : "the most recent ")
              << kMaxUnlimitedRows
              << " (--limit N for another count; --campaign, --state or --decision to narrow)"
              << std::endl;
  }
  if (a.format != "table") {
    const std::vector<ResultsExportRow> export_rows = BuildResultsExport(rows);
    if (a.format == "tsv") std::cout << RenderResultsTsv(export_rows);
    if (a.format == "csv") std::cout << RenderResultsCsv(export_rows);
    if (a.format == "json") std::cout << ResultsExportJson(export_rows).dump() << std::endl;
    return kExitOk;
  }
  // With --campaign and a daemon: the drift figures of the campaign's decided rounds (issue 14).
  v1::Campaign campaign;
  const bool with_drift =
      !a.filter.campaign.empty() && client.GetCampaign(a.filter.campaign, &campaign).ok();
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : rows) arr.push_back(ExperimentJson(e));
    nlohmann::json out = {{"experiments", arr}};
    if (truncated) out["truncated"] = true;  // more match than the rows shown
    if (with_drift) {
      nlohmann::json drift = nlohmann::json::object();
      for (const auto& r : campaign.rounds()) {
        const nlohmann::json round = RoundJson(r);
        if (!round["drift"].is_null()) drift[std::to_string(r.id())] = round["drift"];
      }
      out["round_drift"] = drift;
    }
    std::cout << DumpJsonLossless(out, 2) << std::endl;
    return kExitOk;
  }
  if (rows.empty()) {
    std::cout << "no experiments"
              << (a.filter.campaign.empty() && a.filter.state.empty() && a.filter.decision.empty()
                      ? ""
                      : " match the filter")
              << std::endl;
    return kExitOk;
  }
  std::cout << RenderResultsTable(rows, a.wide ? 0 : TerminalColumns());
  if (with_drift) {
    for (const auto& r : campaign.rounds()) {
      const std::string drift = RenderDrift(r.drift_json());
      if (!drift.empty()) {
        std::cout << WrapToWidth(
            "round " + std::to_string(r.id()) + " drift: " + EscapeForTerminal(drift),
            a.wide ? 0 : TerminalColumns(), "    ");
      }
    }
  }
  return kExitOk;
}

}  // namespace

void AddResultsCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<ResultsArgs>();
  CLI::App* sub = app->add_subcommand(
      "results", "the results table (reads <state dir>/xv.db when no xvd answers)");
  sub->add_flag("--json", args->json, "print every experiment as JSON instead of a table");
  sub->add_option("--format", args->format,
                  "table (default); tsv: upstream's results.tsv (commit, val_bpb, memory_gb, "
                  "status, description); csv or json: the same rows")
      ->check(CLI::IsMember({"table", "tsv", "csv", "json"}));
  sub->add_flag("--wide", args->wide,
                "every column, uncut (default: fit $COLUMNS or the terminal, 80 when not a tty)");
  sub->add_option("--campaign", args->filter.campaign, "only this campaign (name or id)");
  sub->add_option("--state", args->filter.state, "only experiments in this state");
  sub->add_option("--decision", args->filter.decision,
                  "only experiments with this decision: keep | discard | pending | control");
  sub->add_flag("--failures", args->failures,
                "per knob value: diverged, crashed, timed-out counts and NaN rate");
  sub->add_option("--sort", args->filter.sort,
                  "id (default) or val_bpb (best first; --limit N keeps the N best)");
  sub->add_option("--limit", args->filter.limit,
                  "only the N most recent experiments (0 = all, at most 10000: the most recent, "
                  "and a note on stderr when more match)");
  sub->callback([args, options] {
    int rc = RunResults(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
