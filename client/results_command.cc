// xvctl results [--json] [--campaign NAME|ID] [--state S] [--limit N] [--state-dir DIR]
// Asks xvd; when no daemon answers, reads <state dir>/xv.db read-only.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/experiment_view.h"

namespace xv::client {
namespace {

struct ResultsArgs {
  ExperimentFilter filter;
  bool json = false;
};

int RunResults(const ResultsArgs& a, const ClientOptions& options) {
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
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : rows) arr.push_back(ExperimentJson(e));
    std::cout << nlohmann::json{{"experiments", arr}}.dump(2) << std::endl;
    return kExitOk;
  }
  if (rows.empty()) {
    std::cout << "no experiments"
              << (a.filter.campaign.empty() && a.filter.state.empty() ? "" : " match the filter")
              << std::endl;
    return kExitOk;
  }
  std::cout << RenderResultsTable(rows);
  return kExitOk;
}

}  // namespace

void AddResultsCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<ResultsArgs>();
  CLI::App* sub = app->add_subcommand(
      "results", "the results table (reads <state dir>/xv.db when no xvd answers)");
  sub->add_flag("--json", args->json, "print JSON instead of a table");
  sub->add_option("--campaign", args->filter.campaign, "only this campaign (name or id)");
  sub->add_option("--state", args->filter.state, "only experiments in this state");
  sub->add_option("--limit", args->filter.limit, "only the N most recent experiments (0 = all)");
  sub->callback([args, options] {
    int rc = RunResults(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
