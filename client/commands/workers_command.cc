// xvctl workers [--json]: every worker the daemon knows, with its device and the ceilings its
// start-up probe measured (issue 3): matmul TFLOP/s (bf16 on GPUs, fp32 on the CPU) and memory
// bandwidth, beside the datasheet peak. --json adds the whole probe JSON of each worker.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/device_health_view.h"
#include "client/views/status_view.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

int RunWorkers(bool json, const ClientOptions& options) {
  DaemonClient client(options);
  v1::StatusResponse resp;
  Status st = client.GetStatus(&resp);
  if (!st.ok()) return ReportError(st);
  if (json) {
    std::cout << DumpJsonLossless(WorkersJson(resp), 2) << std::endl;
    return kExitOk;
  }
  if (resp.workers_size() == 0) {
    std::cout << "no workers (start one with: xv-worker --daemon " << client.address()
              << " --data DIR)" << std::endl;
    return kExitOk;
  }
  std::cout << RenderWorkersTable({resp.workers().begin(), resp.workers().end()});
  std::cout.flush();
  return kExitOk;
}

}  // namespace

void AddWorkersCommand(CLI::App* app, const ClientOptions* options) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app->add_subcommand(
      "workers", "workers with their devices and probed matmul TFLOP/s and bandwidth");
  sub->add_flag("--json", *json, "print JSON (with each worker's whole probe)");
  sub->callback([json, options] {
    int rc = RunWorkers(*json, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
