// xvctl decide ROUND (--keep EXPERIMENT | --none) --reason TEXT [--json]
// The manual decision of a round of a campaign whose policy says `decide: manual`.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/campaign_view.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct DecideArgs {
  int64_t round_id = 0;
  int64_t keep = 0;
  bool none = false;
  std::string reason;
  bool json = false;
};

int RunDecide(const DecideArgs& a, const ClientOptions& options) {
  if (a.round_id <= 0) {
    return ReportError(Status::InvalidArgument("ROUND: must be a round id > 0"));
  }
  if ((a.keep > 0) == a.none) {
    return ReportError(
        Status::InvalidArgument("--keep/--none: give exactly one (--keep EXPERIMENT or --none)"));
  }
  if (a.reason.empty()) return ReportError(Status::InvalidArgument("--reason: must not be empty"));
  v1::DecideRequest req;
  req.set_round_id(a.round_id);
  req.set_keep_experiment_id(a.none ? 0 : a.keep);
  req.set_reason(a.reason);
  DaemonClient client(options);
  v1::RoundInfo round;
  Status st = client.Decide(req, &round);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << DumpJsonLossless(RoundJson(round), 2) << std::endl;
  } else {
    std::cout << "round " << round.id() << " " << round.state() << ": "
              << (round.kept_experiment_id() != 0
                      ? "kept " + round.kept_candidate() + " (#" +
                            std::to_string(round.kept_experiment_id()) + ")"
                      : std::string("kept none"))
              << (round.decision_summary().empty() ? "" : " - " + round.decision_summary())
              << std::endl;
  }
  return kExitOk;
}

}  // namespace

void AddDecideCommand(CLI::App* app, const ClientOptions* options) {
  auto a = std::make_shared<DecideArgs>();
  CLI::App* sub =
      app->add_subcommand("decide", "decide a round by hand (campaign policy decide: manual)");
  sub->add_option("round", a->round_id, "round id")->required();
  sub->add_option("--keep", a->keep, "an experiment of the candidate to keep (advances the head)");
  sub->add_flag("--none", a->none, "keep nothing");
  sub->add_option("--reason", a->reason, "why (stored with the decision)")->required();
  sub->add_flag("--json", a->json, "print the round as JSON");
  sub->callback([a, options] {
    int rc = RunDecide(*a, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
