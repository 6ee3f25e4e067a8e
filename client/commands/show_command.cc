// xvctl show ID [--json] [--tail N]: one experiment in full: its recipe against the campaign head,
// figures, a summary of its stored events (replayed through Experiments.Watch) and, for a failure,
// the failure and the tail of its stderr.
#include <chrono>
#include <iostream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/experiment_detail_view.h"
#include "client/views/experiment_view.h"
#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::client {
namespace {

struct ShowArgs {
  int64_t id = 0;
  int tail = 20;
  bool json = false;
};

// How long the replay of a finished experiment's events may take, and how long `show` follows
// an unfinished one's before it prints what it has.
constexpr auto kFinishedReplayLimit = std::chrono::seconds(10);
constexpr auto kUnfinishedReplayLimit = std::chrono::seconds(1);

std::string StateStep(const v1::WatchEvent& ev) {
  std::string step = ev.state();
  if (ev.attempt() > 0 && (ev.state() == "assigned" || ev.state() == "running")) {
    step += " (attempt " + std::to_string(ev.attempt()) + ")";
  }
  if (!ev.detail().empty()) step += ": " + ev.detail();
  return step;
}

// Replays the experiment's stored events from cursor 0, counting them by kind and listing its
// states, until the event of its final state (or the time limit).
EventsSummary ReadEvents(DaemonClient* client, const v1::Experiment& e) {
  EventsSummary summary;
  const bool terminal = IsTerminalState(e.state());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   (terminal ? kFinishedReplayLimit : kUnfinishedReplayLimit));
  v1::WatchRequest req;
  req.set_experiment_id(e.id());
  req.set_since(0);
  auto reader = client->Watch(&ctx, req);
  v1::WatchEvent ev;
  while (reader->Read(&ev)) {
    ++summary.counts[ev.kind()];
    if (ev.kind() == "state") summary.states.push_back(StateStep(ev));
    if (ev.kind() == "source") {
      const nlohmann::json j = ParseBoundedJsonOrDiscarded(ev.json());
      if (j.is_object() && j.contains("sha256") && j["sha256"].is_string() &&
          j["sha256"].get<std::string>().size() == 64) {
        summary.source_sha256 = j["sha256"].get<std::string>();
        summary.source_file = j.value("file", "");
      }
    }
    if (terminal && ev.kind() == "state" && ev.state() == e.state() &&
        ev.attempt() == e.attempt()) {
      summary.complete = true;
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status finished = reader->Finish();  // cancelled or past the deadline: what was read stays
  if (!finished.ok() && finished.error_code() != grpc::StatusCode::CANCELLED &&
      finished.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    summary.states.push_back("(events unavailable: " + finished.error_message() + ")");
  }
  return summary;
}

int RunShow(const ShowArgs& a, const ClientOptions& options) {
  if (a.id <= 0) return ReportError(Status::InvalidArgument("ID: must be an experiment id > 0"));
  DaemonClient client(options);
  v1::Experiment e;
  Status st = client.GetExperiment(a.id, &e);
  if (!st.ok()) return ReportError(st);
  v1::Campaign campaign;
  st = client.GetCampaignSummary(std::to_string(e.campaign_id()), &campaign);
  if (!st.ok()) return ReportError(st);
  const EventsSummary events = ReadEvents(&client, e);
  if (a.json) {
    std::cout << DumpJsonLossless(ExperimentDetailJson(e, campaign, events), 2) << std::endl;
  } else {
    std::cout << RenderExperimentDetail(e, campaign, events, a.tail);
  }
  return kExitOk;
}

}  // namespace

void AddShowCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<ShowArgs>();
  CLI::App* sub = app->add_subcommand(
      "show", "one experiment: recipe against the head, figures, events, failure tail");
  sub->add_option("id", args->id, "experiment id")->required();
  sub->add_option("--tail", args->tail, "stderr lines shown for a failure")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  sub->callback([args, options] {
    int rc = RunShow(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
