// xvctl campaign create NAME --recipe FILE.yaml [--policy FILE.yaml] [--device-filter F]
//                       [--trainer NAME] [--budget JSON] [--max-attempts N] [--json]
// xvctl campaign show NAME|ID [--json]
// xvctl campaign list [--json]
//   (show and list read <state dir>/xv.db read-only when no daemon answers)
// xvctl campaign pause|resume NAME|ID [--json]
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/numeric_ref.h"
#include "client/views/campaign_view.h"
#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/text_file.h"
#include "common/untrusted_text.h"
#include "daemon/store/results_reader.h"

namespace xv::client {
namespace {

struct CampaignArgs {
  std::string name;  // NAME, or NAME|ID for show/pause/resume
  std::string recipe_path;
  std::string policy_path;
  std::string device_filter;
  std::string trainer;
  std::string budget_json;
  int max_attempts = 0;  // 0: the daemon's default (2)
  bool json = false;
};

// A recipe or policy file; far larger than any gRPC request xvd takes (4 MiB).
constexpr int64_t kMaxCampaignFileBytes = 16 << 20;

Status ReadTextFile(const std::string& path, const std::string& flag, std::string* out) {
  const Status st = ReadRegularFile(path, kMaxCampaignFileBytes, out);
  if (st.ok()) return st;
  return Status::InvalidArgument(flag + " " + path + ": " + st.message());
}

int Finish(const CampaignArgs& a, const v1::Campaign& c, const std::string& verb) {
  if (a.json) {
    std::cout << DumpJsonLossless(CampaignJson(c), 2) << std::endl;
  } else {
    std::cout << verb << " campaign " << EscapeForTerminal(c.name()) << " #" << c.id() << " ("
              << EscapeForTerminal(c.state()) << "), head "
              << EscapeForTerminal(c.head_recipe_hash()) << std::endl;
  }
  return kExitOk;
}

int RunCreate(const CampaignArgs& a, const ClientOptions& options) {
  v1::CreateCampaignRequest req;
  req.set_name(a.name);
  std::string text;
  Status st = ReadTextFile(a.recipe_path, "--recipe", &text);
  if (!st.ok()) return ReportError(st);
  req.set_base_recipe_yaml(text);
  req.set_recipe_name(std::filesystem::path(a.recipe_path).stem().string());
  if (!a.policy_path.empty()) {
    st = ReadTextFile(a.policy_path, "--policy", &text);
    if (!st.ok()) return ReportError(st);
    req.set_policy(text);
  }
  if (!a.budget_json.empty()) {
    nlohmann::json b = ParseBoundedJsonOrDiscarded(a.budget_json);
    if (b.is_discarded() || !b.is_object()) {
      return ReportError(
          Status::InvalidArgument("--budget: expected a JSON object, got '" + a.budget_json + "'"));
    }
    req.set_budget_json(a.budget_json);
  }
  if (a.max_attempts != 0 && (a.max_attempts < 1 || a.max_attempts > 10)) {
    return ReportError(Status::InvalidArgument("--max-attempts: must be 1..10, got " +
                                               std::to_string(a.max_attempts)));
  }
  req.set_max_attempts(a.max_attempts);
  req.set_device_filter(a.device_filter);
  req.set_trainer(a.trainer);
  DaemonClient client(options);
  v1::Campaign c;
  st = client.CreateCampaign(req, &c);
  if (!st.ok()) return ReportError(st);
  return Finish(a, c, "created");
}

// When `st` says no daemon answers and the database exists: opens it read-only into *store (and
// says so on stderr). Otherwise returns `st` unchanged.
Status OpenDatabaseInstead(const Status& st, const DaemonClient& client,
                           const ClientOptions& options,
                           std::unique_ptr<store::ResultsReader>* store) {
  if (st.code() != Status::Code::kUnavailable) return st;
  const std::string db = options.StateDir() + "/xv.db";
  if (!std::filesystem::exists(db)) {
    return Status::Unavailable(st.message() + "; and there is no database at " + db +
                               " to read instead");
  }
  std::cerr << "xvctl: no xvd answers at " << client.address() << "; reading " << db << " read-only"
            << std::endl;
  return store::ResultsReader::Open(db, store);
}

int RunShow(const CampaignArgs& a, const ClientOptions& options) {
  DaemonClient client(options);
  v1::Campaign c;
  Status st = client.GetCampaign(a.name, &c);
  if (st.code() == Status::Code::kUnavailable) {
    std::unique_ptr<store::ResultsReader> db;
    st = OpenDatabaseInstead(st, client, options, &db);
    if (st.ok()) {
      int64_t id = 0;
      const bool numeric = ParseNumericRef(a.name, &id);
      st = db->GetCampaign(numeric ? id : 0, numeric ? "" : a.name, /*detail=*/true, &c);
    }
  }
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << DumpJsonLossless(CampaignJson(c), 2) << std::endl;
  } else {
    std::cout << RenderCampaign(c);
  }
  return kExitOk;
}

int RunList(const CampaignArgs& a, const ClientOptions& options) {
  DaemonClient client(options);
  v1::ListCampaignsResponse resp;
  Status st = client.ListCampaigns(&resp);
  std::vector<v1::Campaign> list(resp.campaigns().begin(), resp.campaigns().end());
  if (st.code() == Status::Code::kUnavailable) {
    std::unique_ptr<store::ResultsReader> db;
    st = OpenDatabaseInstead(st, client, options, &db);
    if (st.ok()) st = db->ListCampaigns(&list);
  }
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& c : list) arr.push_back(CampaignJson(c));
    std::cout << DumpJsonLossless(nlohmann::json{{"campaigns", arr}}, 2) << std::endl;
  } else if (list.empty()) {
    std::cout << "no campaigns" << std::endl;
  } else {
    std::cout << RenderCampaignList(list);
  }
  return kExitOk;
}

int RunPause(const CampaignArgs& a, const ClientOptions& options, bool pause) {
  DaemonClient client(options);
  v1::Campaign c;
  Status st = client.SetCampaignPaused(a.name, pause, &c);
  if (!st.ok()) return ReportError(st);
  return Finish(a, c, pause ? "paused" : "resumed");
}

template <typename Fn>
void SetCallback(CLI::App* sub, Fn fn) {
  sub->callback([fn] {
    int rc = fn();
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace

void AddCampaignCommand(CLI::App* app, const ClientOptions* options) {
  CLI::App* campaign =
      app->add_subcommand("campaign", "create, show, list, pause, resume campaigns");
  campaign->require_subcommand(1);

  {
    auto a = std::make_shared<CampaignArgs>();
    CLI::App* sub = campaign->add_subcommand("create", "create a campaign; its base is the head");
    sub->add_option("name", a->name, "campaign name (unique)")->required();
    sub->add_option("--recipe", a->recipe_path, "base recipe YAML file")->required();
    sub->add_option("--policy", a->policy_path,
                    "acceptance policy YAML/JSON file (default: welch, daemon/README.md)");
    sub->add_option("--device-filter", a->device_filter, "which devices run it (default: any)");
    sub->add_option("--trainer", a->trainer, "trainer name (default: libtorch)");
    sub->add_option("--budget", a->budget_json, "budget contract as a JSON object");
    sub->add_option("--max-attempts", a->max_attempts,
                    "attempts per experiment when workers are lost: a lost attempt is requeued "
                    "while fewer were made (1..10, default 2)");
    sub->add_flag("--json", a->json, "print the campaign as JSON");
    SetCallback(sub, [a, options] { return RunCreate(*a, *options); });
  }
  {
    auto a = std::make_shared<CampaignArgs>();
    CLI::App* sub = campaign->add_subcommand("show", "head, rounds and their decisions");
    sub->add_option("campaign", a->name, "campaign name or id")->required();
    sub->add_flag("--json", a->json, "print JSON");
    SetCallback(sub, [a, options] { return RunShow(*a, *options); });
  }
  {
    auto a = std::make_shared<CampaignArgs>();
    CLI::App* sub = campaign->add_subcommand("list", "every campaign");
    sub->add_flag("--json", a->json, "print JSON");
    SetCallback(sub, [a, options] { return RunList(*a, *options); });
  }
  for (bool pause : {true, false}) {
    auto a = std::make_shared<CampaignArgs>();
    CLI::App* sub = campaign->add_subcommand(
        pause ? "pause" : "resume",
        pause ? "stop assigning the campaign's queued experiments (running ones finish)"
              : "assign the campaign's queued experiments again");
    sub->add_option("campaign", a->name, "campaign name or id")->required();
    sub->add_flag("--json", a->json, "print the campaign as JSON");
    SetCallback(sub, [a, options, pause] { return RunPause(*a, *options, pause); });
  }
}

}  // namespace xv::client
