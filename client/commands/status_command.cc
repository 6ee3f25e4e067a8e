// xvctl status [--json]: the daemon, its workers, the queue, and a progress bar per running
// experiment.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/campaign_time_budgets.h"
#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/device_health_view.h"
#include "client/views/experiment_view.h"
#include "client/views/number_format.h"
#include "client/views/run_eta.h"
#include "client/views/status_view.h"
#include "client/views/text_table.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

int RunStatus(bool json, const ClientOptions& options) {
  DaemonClient client(options);
  v1::StatusResponse resp;
  Status st = client.GetStatus(&resp);
  if (!st.ok()) return ReportError(st);
  if (json) {
    nlohmann::json j = StatusJson(resp, client.address());
    CampaignTimeBudgets budgets(&client);
    for (size_t i = 0; i < j["active"].size() && i < static_cast<size_t>(resp.active_size()); ++i) {
      const v1::Experiment& e = resp.active(static_cast<int>(i));
      const auto left = TrainingSecondsLeft(e, budgets.ForExperiment(e));
      j["active"][i]["warm_up"] = InWarmUp(e);
      j["active"][i]["training_seconds_left"] = left ? nlohmann::json(*left) : nullptr;
    }
    std::cout << DumpJsonLossless(j, 2) << std::endl;
    return kExitOk;
  }
  std::cout << "xvd " << resp.version() << " at " << client.address() << " (database "
            << resp.database() << ")\n";
  if (!resp.write_mode().empty()) {
    std::cout << "mode: " << resp.write_mode() << " -- new work is refused until writes work\n";
  }
  std::cout << "experiments: " << resp.queued() << " queued, " << resp.running() << " running, "
            << resp.finished() << " finished\n";
  for (const auto& u : resp.unserved_trainers()) {
    std::cout << "waiting: " << u.queued() << " queued experiment(s) need trainer '" << u.trainer()
              << "', which no connected worker offers (xv-worker --config: docs/worker.md)\n";
  }
  std::cout << "\n";
  using A = TextTable::Align;
  if (resp.workers_size() == 0) {
    std::cout << "no workers (start one with: xv-worker --daemon " << client.address()
              << " --data DIR)\n";
  } else {
    std::cout << RenderWorkersTable({resp.workers().begin(), resp.workers().end()});
  }
  if (resp.active_size() > 0) {
    std::cout << "\n";
    TextTable active({{"id", A::kRight},
                      {"name", A::kLeft},
                      {"state", A::kLeft},
                      {"worker", A::kLeft},
                      {"progress", A::kLeft},
                      {"loss", A::kRight}});
    CampaignTimeBudgets budgets(&client);
    for (const auto& e : resp.active()) {
      active.AddRow({std::to_string(e.id()), e.name(), e.state(), e.worker(),
                     ProgressCell(e, budgets.ForExperiment(e)),
                     e.last_loss() > 0 ? FormatFixed(e.last_loss(), 4) : "-"});
    }
    std::cout << active.Render();
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

void AddStatusCommand(CLI::App* app, const ClientOptions* options) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub =
      app->add_subcommand("status", "workers, the queue, and progress of running experiments");
  sub->add_flag("--json", *json, "print JSON");
  sub->callback([json, options] {
    int rc = RunStatus(*json, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
