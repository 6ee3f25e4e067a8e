// xvctl watch [--campaign NAME] [--experiment ID] [--kind K ...] [--since CURSOR] [--until-idle]
//             [--json]
// Streams what the daemon applies: experiment states, trainer events (start, step, eval, nan,
// summary, error), round decisions and head changes. Human lines by default, one JSON object per
// line with --json (for agents). Ends on Ctrl-C (exit 0), or with --until-idle once the campaign
// (or everything) has nothing queued or running and its last round is decided.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/watch_event_view.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct WatchArgs {
  std::string campaign;
  int64_t experiment = 0;
  std::vector<std::string> kinds;
  int64_t since = -1;
  bool until_idle = false;
  bool json = false;
};

int RunWatch(const WatchArgs& a, const ClientOptions& options) {
  v1::WatchRequest req;
  req.set_campaign(a.campaign);
  req.set_experiment_id(a.experiment);
  for (const auto& k : a.kinds) req.add_kinds(k);
  if (a.since >= 0) req.set_since(a.since);
  req.set_until_idle(a.until_idle);

  // Ctrl-C (or SIGTERM) cancels the stream; the signals are taken by one thread, so block them
  // before gRPC starts its own threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  DaemonClient client(options);
  grpc::ClientContext ctx;
  std::atomic<bool> interrupted{false};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (!done) {
      interrupted = true;
      ctx.TryCancel();
    }
  });
  auto reader = client.Watch(&ctx, req);
  v1::WatchEvent ev;
  while (reader->Read(&ev)) {
    if (a.json) {
      std::cout << DumpJsonLossless(WatchEventJson(ev)) << std::endl;
    } else {
      std::cout << WatchEventLine(ev) << std::endl;
    }
  }
  grpc::Status st = reader->Finish();
  done = true;
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  if (interrupted) return kExitOk;
  if (!st.ok()) return ReportError(client.FromGrpc(st));
  return kExitOk;
}

}  // namespace

void AddWatchCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<WatchArgs>();
  CLI::App* sub = app->add_subcommand(
      "watch", "stream experiment states, trainer events and round decisions as they happen");
  sub->add_option("--campaign", args->campaign, "only this campaign");
  sub->add_option("--experiment", args->experiment, "only this experiment id")
      ->check(CLI::PositiveNumber);
  sub->add_option("--kind", args->kinds,
                  "only these kinds: state, start, step, eval, nan, summary, error, decision, "
                  "head (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--since", args->since,
                  "first replay the stored events after this cursor (0: all; see --json's "
                  "\"cursor\"), then follow")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--until-idle", args->until_idle,
                "exit once nothing is queued or running (and the last round is decided)");
  sub->add_flag("--json", args->json, "one JSON object per line");
  sub->callback([args, options] {
    int rc = RunWatch(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
