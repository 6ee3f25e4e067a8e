// xvctl submit [RECIPE.yaml] [--set k=v ...] [--candidate "k=v,k2=v2" ...] [--sweep k=v1,v2 ...]
//              [--source FILE ...] [--patch FILE ...] [--replicates N] [--campaign NAME]
//              [--round-kind KIND] [--trainer NAME] [--json]
// Without a recipe file the daemon builds the candidates from the campaign's head.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/requests/submit_request.h"
#include "common/bounded_json.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

// A campaign without an acceptance policy never decides its rounds: say so, so that `decision:
// pending` is not read as "still deciding". Silent when the campaign cannot be read.
void SayWhenNothingWillBeDecided(DaemonClient* client, int64_t campaign_id) {
  v1::Campaign campaign;
  if (!client->GetCampaignSummary(std::to_string(campaign_id), &campaign).ok()) return;
  const std::string& policy = campaign.policy_json();
  if (!policy.empty() && policy != "{}") return;
  std::cout << "note: campaign " << campaign.name()
            << " has no acceptance policy, so nothing will be decided: the runs stay `pending`. "
               "For keep/discard decisions create a campaign with one (xvctl campaign create NAME "
               "--recipe FILE --policy POLICY.yaml) and submit with --campaign NAME\n";
}

int RunSubmit(const SubmitArgs& a, const ClientOptions& options) {
  v1::SubmitRequest req;
  Status st = BuildSubmitRequest(a, &req);
  if (!st.ok()) return ReportError(st);
  DaemonClient client(options);
  v1::SubmitResponse resp;
  st = client.Submit(req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << DumpJsonLossless(SubmitResponseJson(resp)) << std::endl;
    return kExitOk;
  }
  std::cout << "submitted " << resp.experiment_ids_size() << " experiment"
            << (resp.experiment_ids_size() == 1 ? "" : "s") << " (campaign "
            << (a.campaign.empty() ? "default" : a.campaign) << " #" << resp.campaign_id()
            << ", round " << resp.round_id() << "):";
  for (int64_t id : resp.experiment_ids()) std::cout << " " << id;
  std::cout << std::endl;
  SayWhenNothingWillBeDecided(&client, resp.campaign_id());
  return kExitOk;
}

}  // namespace

void AddSubmitCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<SubmitArgs>();
  CLI::App* sub = app->add_subcommand("submit", "submit a recipe (and candidates) to xvd");
  sub->add_option("recipe", args->recipe_path,
                  "recipe YAML file (none: the candidates are built from --campaign's head)");
  sub->add_option("--set", args->sets, "override a knob of the base recipe: key=value (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--candidate", args->candidates,
                  "one candidate of the round: \"k=v,k2=v2\" (repeatable; none = the base recipe)")
      ->allow_extra_args(false);
  sub->add_option("--sweep", args->sweeps,
                  "one candidate per value: key=v1,v2,... (repeatable: the cartesian product)")
      ->allow_extra_args(false);
  sub->add_option("--round-kind", args->kind,
                  "candidates | sweep | ablation | confirm (default: sweep with --sweep, else "
                  "candidates)");
  sub->add_option("--source", args->sources,
                  "a code candidate: this whole train.py instead of the trainer's (repeatable; "
                  "an autoresearch trainer whose workers allow code candidates)");
  sub->add_option(
      "--patch", args->patches,
      "a code candidate: this unified diff (diff -u, git diff) applied to the trainer's "
      "registered train.py, or to the campaign head's (repeatable)");
  sub->add_option("--replicates", args->replicates, "runs per candidate (seeds seed, seed+1, ...)")
      ->capture_default_str();
  sub->add_option("--campaign", args->campaign, "campaign name (default: default)");
  sub->add_option("--trainer", args->trainer, "trainer name (default: libtorch)");
  sub->add_option("--priority", args->priority, "higher runs first")->capture_default_str();
  sub->add_flag("--json", args->json, "print the ids as JSON");
  sub->callback([args, options] {
    int rc = RunSubmit(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
