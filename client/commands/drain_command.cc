// xvctl drain WORKER | --all [--reason TEXT] [--json]
// The worker (name or id) finishes its running attempt, is given no new work, and exits 0; `xvctl
// status` shows it draining, then drained.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct DrainArgs {
  std::string worker;
  bool all = false;
  std::string reason;
  bool json = false;
};

int RunDrain(const DrainArgs& a, const ClientOptions& options) {
  if (a.worker.empty() == !a.all) {
    return ReportError(
        Status::InvalidArgument("drain: give a worker (name or id) or --all, not both"));
  }
  v1::DrainWorkerRequest req;
  req.set_worker(a.worker);
  req.set_all(a.all);
  req.set_reason(a.reason.empty() ? "xvctl drain" : a.reason);
  DaemonClient client(options);
  v1::DrainWorkerResponse resp;
  Status st = client.DrainWorker(req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& w : resp.workers()) {
      arr.push_back({{"id", w.id()},
                     {"name", w.name()},
                     {"state", w.state()},
                     {"current_experiment_id", w.current_experiment_id()}});
    }
    std::cout << DumpJsonLossless(nlohmann::json{{"workers", arr}}, 2) << std::endl;
    return kExitOk;
  }
  for (const auto& w : resp.workers()) {
    std::cout << "draining worker " << w.name() << " (id " << w.id() << "): ";
    if (w.current_experiment_id() != 0) {
      std::cout << "it finishes experiment " << w.current_experiment_id() << ", then exits";
    } else {
      std::cout << "idle, it exits now";
    }
    std::cout << "\n";
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

void AddDrainCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<DrainArgs>();
  CLI::App* sub = app->add_subcommand(
      "drain", "let a worker finish its running experiment, give it no new work, and stop it");
  sub->add_option("worker", args->worker, "worker name or id (see xvctl status)");
  sub->add_flag("--all", args->all, "every connected worker");
  sub->add_option("--reason", args->reason, "recorded in the daemon's and the worker's logs");
  sub->add_flag("--json", args->json, "print JSON");
  sub->callback([args, options] {
    int rc = RunDrain(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
