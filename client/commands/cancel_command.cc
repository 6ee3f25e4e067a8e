// xvctl cancel ID [ID ...] [--json]
// Each experiment (queued, assigned or running) ends `cancelled`; a running trainer is stopped by
// its worker. An experiment that has already ended keeps its state and is reported as such. An id
// the daemon does not know is reported with the daemon's reason and makes the exit code non-zero;
// the other ids are still cancelled.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct CancelArgs {
  std::vector<int64_t> ids;
  bool json = false;
};

int RunCancel(const CancelArgs& a, const ClientOptions& options) {
  DaemonClient client(options);
  nlohmann::json rows = nlohmann::json::array();
  int rc = kExitOk;
  for (int64_t id : a.ids) {
    v1::CancelResponse resp;
    Status st = client.Cancel(id, &resp);
    if (st.ok()) {
      const bool cancelled = resp.state() == "cancelled";
      rows.push_back({{"experiment_id", id}, {"state", resp.state()}, {"cancelled", cancelled}});
      if (!a.json) {
        std::cout << "experiment " << id << ": "
                  << (cancelled ? "cancelled" : "already " + resp.state() + ", nothing to cancel")
                  << "\n";
      }
      continue;
    }
    rows.push_back({{"experiment_id", id}, {"error", st.message()}});
    const int code = a.json
                         ? (st.code() == Status::Code::kInvalidArgument ? kExitInvalid : kExitError)
                         : ReportError(st);
    if (rc == kExitOk) rc = code;
  }
  if (a.json) std::cout << DumpJsonLossless(nlohmann::json{{"experiments", rows}}, 2) << "\n";
  std::cout.flush();
  return rc;
}

}  // namespace

void AddCancelCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<CancelArgs>();
  CLI::App* sub = app->add_subcommand(
      "cancel", "cancel queued, assigned or running experiments (a running trainer is stopped)");
  sub->add_option("ids", args->ids, "experiment ids (see xvctl results / status)")->required();
  sub->add_flag("--json", args->json, "print JSON");
  sub->callback([args, options] {
    int rc = RunCancel(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
