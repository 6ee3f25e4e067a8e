// xvctl compare (--round R | --recipe HASH | ID...) [--campaign NAME|ID] [--json] [--wide]:
// runs grouped by candidate, device and trainer with n, val_bpb mean and sd, tok/s, MFU with its
// denominator, peak memory, power and tokens per joule (client/views/compare_view.h). --round: the
// candidates (and controls) of one round; --recipe: every run whose config hash (or recipe hash)
// starts with HASH, so one recipe across device classes and trainers; IDs: those experiments.
// Reused rows are left out (their figures are another run's). Refused (exit 2) when the runs mix
// metric versions or time budgets.
#include <algorithm>
#include <iostream>

#include "client/campaign_time_budgets.h"
#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/terminal_width.h"
#include "client/views/compare_view.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct CompareArgs {
  std::vector<int64_t> ids;
  int64_t round_id = 0;
  std::string recipe;
  std::string campaign;
  bool json = false;
  bool wide = false;
};

constexpr int kPageSize = 500;

Status ListRound(DaemonClient* client, int64_t round_id, std::vector<v1::Experiment>* out) {
  int64_t after = 0;
  while (true) {
    v1::ListExperimentsRequest req;
    req.set_round_id(round_id);
    req.set_limit(kPageSize);
    req.set_after_id(after);
    v1::ListExperimentsResponse resp;
    XV_RETURN_IF_ERROR(client->ListExperiments(req, &resp));
    for (const auto& e : resp.experiments()) {
      if (e.id() <= after) continue;
      after = e.id();
      out->push_back(e);
    }
    if (resp.experiments_size() < kPageSize) return Status::Ok();
  }
}

Status Fetch(DaemonClient* client, const CompareArgs& a, std::vector<v1::Experiment>* out) {
  const int sources =
      (a.ids.empty() ? 0 : 1) + (a.round_id > 0 ? 1 : 0) + (a.recipe.empty() ? 0 : 1);
  if (sources != 1) {
    return Status::InvalidArgument(
        "compare: give exactly one of --round ROUND, --recipe HASH or experiment IDs");
  }
  if (a.round_id > 0) {
    XV_RETURN_IF_ERROR(ListRound(client, a.round_id, out));
    if (out->empty())
      return Status::NotFound("round " + std::to_string(a.round_id) + ": no experiments");
  } else if (!a.recipe.empty()) {
    ExperimentFilter filter;
    filter.campaign = a.campaign;
    std::vector<v1::Experiment> all;
    XV_RETURN_IF_ERROR(ListFromDaemon(client, filter, &all));
    for (auto& e : all) {
      if (e.config_hash().rfind(a.recipe, 0) == 0 || e.recipe_hash().rfind(a.recipe, 0) == 0) {
        out->push_back(std::move(e));
      }
    }
    if (out->empty())
      return Status::NotFound("--recipe " + a.recipe + ": no experiment has this hash");
  } else {
    for (int64_t id : a.ids) {
      v1::Experiment e;
      XV_RETURN_IF_ERROR(client->GetExperiment(id, &e));
      out->push_back(std::move(e));
    }
  }
  out->erase(std::remove_if(out->begin(), out->end(),
                            [](const v1::Experiment& e) { return e.reused_from_id() != 0; }),
             out->end());
  return Status::Ok();
}

int RunCompare(const CompareArgs& a, const ClientOptions& options) {
  DaemonClient client(options);
  std::vector<v1::Experiment> runs;
  Status st = Fetch(&client, a, &runs);
  if (!st.ok()) return ReportError(st);
  CampaignTimeBudgets budgets(&client);
  st = CheckComparable(runs,
                       [&budgets](const v1::Experiment& e) { return budgets.ForExperiment(e); });
  if (!st.ok()) return ReportError(st);
  const std::vector<CompareGroup> groups = BuildComparison(runs);
  if (a.json) {
    std::cout << DumpJsonLossless(ComparisonJson(groups)) << std::endl;
  } else {
    std::cout << RenderComparison(groups, a.wide ? 0 : TerminalColumns());
  }
  return kExitOk;
}

}  // namespace

void AddCompareCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* sub = app->add_subcommand(
      "compare",
      "n, val_bpb mean and sd, tok/s, MFU, memory, power per candidate, device and trainer");
  sub->add_option("ids", args->ids, "experiment ids");
  sub->add_option("--round", args->round_id, "the runs of this round")->check(CLI::PositiveNumber);
  sub->add_option(
      "--recipe", args->recipe,
      "every run whose config hash (or recipe hash) starts with this: one recipe across "
      "devices and trainers");
  sub->add_option("--campaign", args->campaign, "with --recipe: only this campaign");
  sub->add_flag("--json", args->json, "print JSON");
  sub->add_flag("--wide", args->wide, "every column (default: fit the terminal)");
  sub->callback([args, options] {
    int rc = RunCompare(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
