// xvctl ablate --campaign NAME [--replicates N] [--json]
//   A drop-one ablation round built by the daemon: one candidate per knob where the campaign's
//   head differs from its base recipe, resetting that knob ("-matrix_lr"); the head runs as
//   control. The decision says which of the head's changes matter (docs/plans.md § Ablation).
// xvctl confirm --campaign NAME --seeds K [--candidate "k=v,..."] [--json]
//   The head (and optionally one candidate) again with K fresh seeds; the round's decision line
//   stores the mean and sd (shown by `xvctl campaign show`).
// Both are Submit with kind ablation/confirm (as `xvctl submit --round-kind`).
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/requests/candidate_spec.h"

namespace xv::client {
namespace {

struct RoundKindArgs {
  std::string campaign;
  int replicates = 0;
  int seeds = 0;
  std::string candidate;
  bool json = false;
};

int SubmitKind(const RoundKindArgs& a, const std::string& kind, const ClientOptions& options) {
  v1::SubmitRequest req;
  req.set_campaign(a.campaign);
  req.set_kind(kind);
  req.set_replicates(kind == "confirm" ? a.seeds : a.replicates);
  if (!a.candidate.empty()) {
    std::vector<v1::Override> overrides;
    Status st = ParseCandidate(a.candidate, &overrides);
    if (!st.ok()) return ReportError(st);
    auto* c = req.add_candidates();
    for (const auto& o : overrides) *c->add_overrides() = o;
  }
  DaemonClient client(options);
  v1::SubmitResponse resp;
  Status st = client.Submit(req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << nlohmann::json{{"campaign_id", resp.campaign_id()},
                                {"round_id", resp.round_id()},
                                {"experiment_ids",
                                 std::vector<int64_t>(resp.experiment_ids().begin(),
                                                      resp.experiment_ids().end())}}
                     .dump()
              << std::endl;
    return kExitOk;
  }
  std::cout << kind << " round " << resp.round_id() << " of campaign " << a.campaign << ": "
            << resp.experiment_ids_size() << " experiment"
            << (resp.experiment_ids_size() == 1 ? "" : "s") << " (xvctl campaign show "
            << a.campaign << ")" << std::endl;
  return kExitOk;
}

}  // namespace

void AddAblateCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<RoundKindArgs>();
  CLI::App* sub = app->add_subcommand(
      "ablate",
      "drop-one ablation: reset each knob where the campaign's head differs from its base, one "
      "candidate per knob, to see which changes matter");
  sub->add_option("--campaign", args->campaign, "campaign name")->required();
  sub->add_option("--replicates", args->replicates,
                  "runs per candidate (the policy's replicates are the minimum)");
  sub->add_flag("--json", args->json, "print the ids as JSON");
  sub->callback([args, options] {
    int rc = SubmitKind(*args, "ablation", *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

void AddConfirmCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<RoundKindArgs>();
  CLI::App* sub = app->add_subcommand(
      "confirm", "re-run the campaign's head (and optionally one candidate) with K fresh seeds");
  sub->add_option("--campaign", args->campaign, "campaign name")->required();
  sub->add_option("--seeds", args->seeds, "how many fresh seeds (runs of the head)")->required();
  sub->add_option("--candidate", args->candidate,
                  "also run this candidate \"k=v,k2=v2\" with the same seeds");
  sub->add_flag("--json", args->json, "print the ids as JSON");
  sub->callback([args, options] {
    int rc = SubmitKind(*args, "confirm", *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
