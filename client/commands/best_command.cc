// xvctl best [--campaign NAME|ID] [--json]: the run with the lowest val_bpb (succeeded runs;
// every campaign, or one) and, for a campaign, its head: the recipe kept now and where from.
#include <iostream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/views/experiment_view.h"
#include "client/views/number_format.h"
#include "common/bounded_json.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

struct BestArgs {
  std::string campaign;
  bool json = false;
};

nlohmann::json HeadJson(const v1::Campaign& c) {
  nlohmann::json head = {{"campaign", c.name()}, {"recipe_hash", c.head_recipe_hash()}};
  if (c.head_history_size() > 0) {
    const v1::HeadChange& last = c.head_history(c.head_history_size() - 1);
    head["round_id"] = last.round_id();
    head["experiment_id"] = last.experiment_id();
    head["candidate"] = last.candidate();
    head["reason"] = last.reason();
  }
  return head;
}

std::string HeadLine(const nlohmann::json& head) {
  std::string line = "head:      " + head["recipe_hash"].get<std::string>();
  if (head.contains("reason")) {
    const std::string reason = head["reason"].get<std::string>();
    line += reason == "base"
                ? " (the base recipe: nothing kept yet)"
                : " (" + reason + " " + head["candidate"].get<std::string>() + " in round " +
                      std::to_string(head["round_id"].get<int64_t>()) + ", #" +
                      std::to_string(head["experiment_id"].get<int64_t>()) + ")";
  }
  return line + "\n";
}

int RunBest(const BestArgs& a, const ClientOptions& options) {
  DaemonClient client(options);
  ExperimentFilter filter;
  filter.campaign = a.campaign;
  filter.state = "succeeded";
  filter.sort = "val_bpb";
  std::vector<v1::Experiment> rows;
  Status st = ListFromDaemon(&client, filter, &rows);
  if (!st.ok()) return ReportError(st);
  const v1::Experiment* best = nullptr;
  for (const auto& e : rows) {
    if (e.has_result() && e.reused_from_id() == 0) {
      best = &e;
      break;
    }
  }
  nlohmann::json head = nullptr;
  if (!a.campaign.empty()) {
    v1::Campaign c;
    st = client.GetCampaign(a.campaign, &c);
    if (!st.ok()) return ReportError(st);
    head = HeadJson(c);
  }
  if (a.json) {
    std::cout << DumpJsonLossless({{"best", best ? ExperimentJson(*best) : nlohmann::json(nullptr)},
                                   {"head", head}})
              << std::endl;
    return kExitOk;
  }
  std::string out;
  if (best == nullptr) {
    out = "best run:  none succeeded" + (a.campaign.empty() ? "" : " in campaign " + a.campaign) +
          "\n";
  } else {
    out = "best run:  #" + std::to_string(best->id()) + " " + best->name() + "  val_bpb " +
          FormatFixed(best->result().val_bpb(), 6) + "  mem " + MemoryGbCell(*best) +
          " GB  (round " + std::to_string(best->round_id()) + ", decision " +
          (best->decision().empty() ? "-" : best->decision()) + ", " +
          (best->device_name().empty() ? "-" : best->device_name()) + ")\n";
  }
  if (!head.is_null()) out += HeadLine(head);
  std::cout << EscapeForTerminal(out, /*keep_newlines_and_tabs=*/true);
  return kExitOk;
}

}  // namespace

void AddBestCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<BestArgs>();
  CLI::App* sub = app->add_subcommand(
      "best", "the run with the lowest val_bpb, and the campaign's head with --campaign");
  sub->add_option("--campaign", args->campaign, "only this campaign (name or id)");
  sub->add_flag("--json", args->json, "print JSON");
  sub->callback([args, options] {
    int rc = RunBest(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
