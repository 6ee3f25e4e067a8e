// xvctl results [--json] [--format table|tsv|csv|json] [--wide] [--campaign NAME|ID] [--state S]
//               [--decision D] [--sort id|val_bpb] [--limit N] [--before ID | --offset N | --all]
//               [--failures] [--state-dir DIR]
// One page (the 50 newest rows, or --limit N; the best with --sort val_bpb) and a footer saying
// how many more match and the next page's command (--before ID, --offset N); --all prints every
// row, fetched page by page.
// Asks xvd; when no daemon answers, reads <state dir>/xv.db read-only. --failures prints the
// failure summary (per knob value: diverged, crashed, timed out, NaN rate) instead. --format tsv
// is upstream autoresearch's results.tsv (client/views/results_export.h).
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

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

struct ResultsArgs {
  ExperimentFilter filter;
  bool json = false;
  bool failures = false;
  std::string format = "table";  // table | tsv | csv | json
  bool wide = false;
  bool all = false;  // every matching row, fetched page by page

  ResultsArgs() { filter.limit = -1; }  // not given: see RunResults
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

// The footer under a page that more rows follow: how many, and the command for the next page.
std::string NextPageNote(const ResultsArgs& a, const ExperimentPage& page) {
  std::string shown = std::to_string(page.rows.size());
  std::string more =
      page.matching >= 0
          ? std::to_string(page.matching - static_cast<int64_t>(page.rows.size())) + " more match"
          : "more match";
  std::string next = "xvctl results";
  if (!a.filter.campaign.empty()) next += " --campaign " + a.filter.campaign;
  if (!a.filter.state.empty()) next += " --state " + a.filter.state;
  if (!a.filter.decision.empty()) next += " --decision " + a.filter.decision;
  if (a.filter.sort == "val_bpb") {
    next += " --sort val_bpb --offset " + std::to_string(page.next_offset);
  } else {
    next += " --before " + std::to_string(page.next_before);
  }
  if (a.filter.limit != kDefaultPageRows) next += " --limit " + std::to_string(a.filter.limit);
  return "-- " + shown + (a.filter.sort == "val_bpb" ? " best" : " newest") + " shown; " + more +
         ": next page: " + next + " (every row: --all)";
}

int RunResults(const ResultsArgs& args, const ClientOptions& options) {
  if (args.failures) return RunFailures(args, options);
  ResultsArgs a = args;
  // Without --limit: a page of kDefaultPageRows, but an export (--format tsv|csv|json, upstream's
  // results.tsv) is every row; --limit 0 (as before paging) is --all too.
  const bool exporting = a.format != "table";
  if (a.filter.limit < 0) {
    a.filter.limit =
        exporting && a.filter.before_id == 0 && a.filter.offset == 0 ? 0 : kDefaultPageRows;
  }
  const bool all = a.all || a.filter.limit == 0;
  if (all && (a.filter.before_id > 0 || a.filter.offset > 0)) {
    return ReportError(Status::InvalidArgument(
        "--all (or --limit 0): prints every matching row; leave out --before and --offset"));
  }
  DaemonClient client(options);
  ExperimentPage page;
  const std::string db = options.StateDir() + "/xv.db";
  // --all: every row, fetched page by page; otherwise one page and what follows it.
  auto fetch = [&](bool from_daemon) -> Status {
    if (all) {
      page = ExperimentPage();
      ExperimentFilter every = a.filter;
      every.limit = 0;
      return from_daemon ? ListFromDaemon(&client, every, &page.rows)
                         : ListFromDatabase(db, every, &page.rows);
    }
    return from_daemon ? PageFromDaemon(&client, a.filter, &page)
                       : PageFromDatabase(db, a.filter, &page);
  };
  Status st = fetch(true);
  if (st.code() == Status::Code::kUnavailable) {
    if (!std::filesystem::exists(db)) {
      return ReportError(Status::Unavailable(st.message() + "; and there is no database at " + db +
                                             " to read instead"));
    }
    std::cerr << "xvctl: no xvd answers at " << client.address() << "; reading " << db
              << " read-only" << std::endl;
    st = fetch(false);
  }
  if (!st.ok()) return ReportError(st);
  const std::vector<v1::Experiment>& rows = page.rows;
  if (a.format != "table") {
    const std::vector<ResultsExportRow> export_rows = BuildResultsExport(rows);
    if (a.format == "tsv") std::cout << RenderResultsTsv(export_rows);
    if (a.format == "csv") std::cout << RenderResultsCsv(export_rows);
    if (a.format == "json") std::cout << ResultsExportJson(export_rows).dump() << std::endl;
    // The data stays on stdout; the note on stderr.
    if (page.more) std::cerr << "xvctl results " << NextPageNote(a, page) << std::endl;
    return kExitOk;
  }
  // With --campaign and a daemon: the drift figures of the decided rounds of the rows shown
  // (issue 14), those rounds only.
  v1::Campaign campaign;
  bool with_drift = false;
  if (!a.filter.campaign.empty()) {
    std::set<int64_t> round_ids;
    for (const auto& e : rows) {
      if (e.round_id() > 0) round_ids.insert(e.round_id());
    }
    if (round_ids.size() <= 1000) {
      with_drift =
          client
              .GetCampaignRounds(a.filter.campaign, {round_ids.begin(), round_ids.end()}, &campaign)
              .ok();
    }
    // An older daemon sends every round: keep the rows' own.
    auto* rounds = campaign.mutable_rounds();
    for (int i = rounds->size() - 1; i >= 0; --i) {
      if (!round_ids.count(rounds->Get(i).id())) rounds->DeleteSubrange(i, 1);
    }
  }
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : rows) arr.push_back(ExperimentJson(e));
    nlohmann::json out = {{"experiments", arr}};
    out["more"] = page.more;  // more rows match than this page
    if (page.matching >= 0) out["matching"] = page.matching;
    if (page.more && a.filter.sort == "val_bpb") out["next_offset"] = page.next_offset;
    if (page.more && a.filter.sort != "val_bpb") out["next_before"] = page.next_before;
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
  // Not wrapped: the next page's command stays one line to copy.
  if (page.more) std::cout << NextPageNote(a, page) << "\n";
  return kExitOk;
}

}  // namespace

void AddResultsCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<ResultsArgs>();
  CLI::App* sub = app->add_subcommand(
      "results", "the results table (reads <state dir>/xv.db when no xvd answers)");
  sub->add_flag("--json", args->json,
                "print the page as JSON: experiments, more, matching, next_before or next_offset");
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
                  "rows per page (default 50; --format tsv|csv|json: every row): the N newest, or "
                  "the N best with --sort val_bpb (0 = --all); a footer (JSON: more, matching, "
                  "next_before/next_offset) says how many more match and the next page's command")
      ->check(CLI::Range(0, 10000));  // -1, the default, is not given
  sub->add_option("--before", args->filter.before_id,
                  "id order: the page of experiments with ids below ID (the footer's next page)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--offset", args->filter.offset,
                  "--sort val_bpb: skip the N best (the footer's next page)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--all", args->all,
                "every matching experiment, fetched from the daemon page by page (no cap)");
  sub->callback([args, options] {
    int rc = RunResults(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
