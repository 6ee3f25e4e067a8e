// xvctl submit RECIPE.yaml [--set k=v ...] [--candidate "k=v,k2=v2" ...] [--replicates N]
//              [--campaign NAME] [--trainer NAME] [--json]
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/candidate_spec.h"
#include "client/commands.h"
#include "client/daemon_client.h"

namespace xv::client {
namespace {

struct SubmitArgs {
  std::string recipe_path;
  std::vector<std::string> sets;
  std::vector<std::string> candidates;
  int replicates = 1;
  std::string campaign;
  std::string trainer;
  int priority = 0;
  bool json = false;
};

Status BuildRequest(const SubmitArgs& a, v1::SubmitRequest* req) {
  std::ifstream f(a.recipe_path, std::ios::binary);
  if (!f) return Status::InvalidArgument(a.recipe_path + ": cannot read the recipe file");
  std::stringstream text;
  text << f.rdbuf();
  req->set_recipe_yaml(text.str());
  req->set_recipe_name(std::filesystem::path(a.recipe_path).stem().string());
  if (a.replicates < 1) {
    return Status::InvalidArgument("--replicates: must be >= 1, got " +
                                   std::to_string(a.replicates));
  }
  req->set_replicates(a.replicates);
  req->set_campaign(a.campaign);
  req->set_trainer(a.trainer);
  req->set_priority(a.priority);
  const char* user = ::getenv("USER");
  req->set_submitter(std::string("xvctl") + (user ? " (" + std::string(user) + ")" : ""));

  // --set changes the base recipe: its overrides come first in every candidate, so a candidate's
  // own overrides win. The candidate keeps its own name ("matrix_lr=0.03").
  std::vector<v1::Override> base;
  for (const auto& s : a.sets) {
    v1::Override o;
    XV_RETURN_IF_ERROR(ParseOverride(s, "--set", &o));
    base.push_back(o);
  }
  for (const auto& c : a.candidates) {
    std::vector<v1::Override> own;
    XV_RETURN_IF_ERROR(ParseCandidate(c, &own));
    v1::Candidate* cand = req->add_candidates();
    std::string name;
    for (const auto& o : own) name += (name.empty() ? "" : ",") + o.key() + "=" + o.value();
    cand->set_name(name);
    for (const auto& o : base) *cand->add_overrides() = o;
    for (const auto& o : own) *cand->add_overrides() = o;
  }
  if (a.candidates.empty() && !base.empty()) {
    v1::Candidate* cand = req->add_candidates();
    for (const auto& o : base) *cand->add_overrides() = o;
  }
  return Status::Ok();
}

int RunSubmit(const SubmitArgs& a, const ClientOptions& options) {
  v1::SubmitRequest req;
  Status st = BuildRequest(a, &req);
  if (!st.ok()) return ReportError(st);
  DaemonClient client(options);
  v1::SubmitResponse resp;
  st = client.Submit(req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json j = {{"campaign_id", resp.campaign_id()},
                        {"round_id", resp.round_id()},
                        {"experiment_ids", std::vector<int64_t>(resp.experiment_ids().begin(),
                                                                resp.experiment_ids().end())}};
    std::cout << j.dump() << std::endl;
    return kExitOk;
  }
  std::cout << "submitted " << resp.experiment_ids_size() << " experiment"
            << (resp.experiment_ids_size() == 1 ? "" : "s") << " (campaign "
            << (a.campaign.empty() ? "default" : a.campaign) << " #" << resp.campaign_id()
            << ", round " << resp.round_id() << "):";
  for (int64_t id : resp.experiment_ids()) std::cout << " " << id;
  std::cout << std::endl;
  return kExitOk;
}

}  // namespace

int ReportError(const Status& st) {
  std::cerr << "xvctl: " << st.message() << std::endl;
  return st.code() == Status::Code::kInvalidArgument ? kExitInvalid : kExitError;
}

void AddSubmitCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<SubmitArgs>();
  CLI::App* sub = app->add_subcommand("submit", "submit a recipe (and candidates) to xvd");
  sub->add_option("recipe", args->recipe_path, "recipe YAML file")->required();
  sub->add_option("--set", args->sets,
                  "override a knob of the base recipe: key=value (repeatable)");
  sub->add_option("--candidate", args->candidates,
                  "one candidate of the round: \"k=v,k2=v2\" (repeatable; none = the base recipe)");
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
