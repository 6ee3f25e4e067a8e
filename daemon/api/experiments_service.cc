#include "daemon/api/experiments_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "common/run_states.h"
#include "daemon/api/grpc_status.h"
#include "daemon/api/reply_caps.h"
#include "daemon/api/request_limits.h"
#include "daemon/api/watch_stream.h"
#include "daemon/engine/campaign_policy.h"

namespace xv::daemon {
namespace {

// What Status shows for a worker: connection, drains and current work decide what a person wants
// to see; the stored state lags them. "drained" (a drain finished) is a name for clients only.
std::string ShownWorkerState(const Dispatcher* dispatcher, const xv::v1::WorkerInfo& w) {
  const Dispatcher::DrainProgress drain = dispatcher->DrainState(w.id());
  if (!dispatcher->IsConnected(w.id())) {
    return drain == Dispatcher::DrainProgress::kDrained
               ? "drained"
               : std::string(ToString(WorkerState::kOffline));
  }
  if (drain != Dispatcher::DrainProgress::kNone) {
    return std::string(ToString(WorkerState::kDraining));
  }
  return std::string(
      ToString(w.current_experiment_id() != 0 ? WorkerState::kBusy : WorkerState::kIdle));
}

// A Watch refused before it starts: finishes with `status` at once and deletes itself when done.
class RefusedWatchReactor final : public grpc::ServerWriteReactor<xv::v1::WatchEvent> {
 public:
  explicit RefusedWatchReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

int64_t MillisBetween(std::chrono::steady_clock::time_point from,
                      std::chrono::steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

grpc::ServerWriteReactor<xv::v1::WatchEvent>* RefusedWatch(const grpc::Status& status) {
  return new RefusedWatchReactor(status);
}

}  // namespace

ExperimentsService::ExperimentsService(store::Store* store, Dispatcher* dispatcher,
                                       SubmissionLimits limits, std::string version,
                                       RoundCloser* closer)
    : store_(store),
      dispatcher_(dispatcher),
      closer_(closer),
      limits_(limits),
      version_(std::move(version)) {}

xv::Status ExperimentsService::BuildCampaignSubmission(const xv::v1::SubmitRequest& req,
                                                       store::NewSubmission* sub) {
  return BuildCampaignRound(store_, req, limits_, CampaignRoundOptions{}, sub);
}

grpc::Status ExperimentsService::Submit(grpc::ServerContext* ctx, const xv::v1::SubmitRequest* req,
                                        xv::v1::SubmitResponse* resp) {
  Caller caller;
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/Submit", &caller);
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "Submit"); !limited.ok()) {
    return limited;
  }
  const auto started = std::chrono::steady_clock::now();
  store::NewSubmission sub;
  xv::Status s = CheckRequestLimits(*req);
  if (s.ok()) s = BuildCampaignSubmission(*req, &sub);
  const auto built = std::chrono::steady_clock::now();
  if (!s.ok()) {
    spdlog::info("submit refused ({}): {}", ctx->peer(), BoundedStatusMessage(s.message()));
    return ToGrpcStatus(s);
  }
  // A token's submissions carry its label, whatever the request says: a submit token cancels only
  // what it submitted (Cancel).
  if (authorizer_ != nullptr && caller.kind == Caller::Kind::kToken) {
    sub.submitter = caller.Label();
  } else if (sub.submitter.empty()) {
    sub.submitter = ctx->peer();
  }
  store::SubmissionIds ids;
  s = store_->submissions().InsertSubmission(sub, &ids);
  if (!s.ok()) {
    spdlog::error("submit: {}", BoundedStatusMessage(s.ToString()));
    if (s.code() != xv::Status::Code::kFailedPrecondition &&
        !store_->database().WriteFault().empty()) {
      s = xv::Status::FailedPrecondition("the daemon is in read-only mode: " + s.message());
    }
    return ToGrpcStatus(s);
  }
  const auto stored = std::chrono::steady_clock::now();
  resp->set_campaign_id(ids.campaign_id);
  resp->set_round_id(ids.round_id);
  for (int64_t id : ids.experiment_ids) resp->add_experiment_ids(id);
  // The experiments are queued: the dispatcher places them now, not at its next tick.
  dispatcher_->RequestSchedule();
  // A round made only of reused results is complete at once. A failure here is logged; the
  // daemon loop decides the round on its next tick.
  if (closer_ != nullptr) {
    const xv::Status decided = closer_->DecideReadyRounds(nullptr);
    if (!decided.ok()) spdlog::error("submit: deciding rounds: {}", decided.ToString());
  }
  // Where a Submit's time goes: validating and resolving (no lock), storing (bounded
  // transactions and the publish), and deciding (the pass runs on the dispatcher's thread).
  spdlog::info(
      "submitted round {} of campaign '{}': {} experiment(s) (built {} ms, stored {} ms, "
      "decided {} ms)",
      ids.round_id, sub.campaign, ids.experiment_ids.size(), MillisBetween(started, built),
      MillisBetween(built, stored), MillisBetween(stored, std::chrono::steady_clock::now()));
  return grpc::Status::OK;
}

grpc::Status ExperimentsService::ListExperiments(grpc::ServerContext* ctx,
                                                 const xv::v1::ListExperimentsRequest* req,
                                                 xv::v1::ListExperimentsResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/ListExperiments");
      !denied.ok()) {
    return denied;
  }
  xv::Status s = CheckRequestLimits(*req);
  if (!s.ok()) return ToGrpcStatus(s);
  std::vector<xv::v1::Experiment> found;
  s = store_->experiments().ListExperiments(*req, &found);
  if (!s.ok()) return ToGrpcStatus(s);
  if (ctx->client_metadata().count(kCountMatchingMetadata) > 0) {
    int64_t matching = 0;
    s = store_->experiments().CountExperiments(*req, &matching);
    if (!s.ok()) return ToGrpcStatus(s);
    ctx->AddTrailingMetadata(kRowsMatchingMetadata, std::to_string(matching));
  }
  size_t bytes = 0;
  for (auto& e : found) {
    const size_t row = e.ByteSizeLong() + 8;  // the row and its field header
    if (resp->experiments_size() > 0 && bytes + row > kMaxListReplyBytes) {
      resp->set_truncated(true);
      break;
    }
    bytes += row;
    *resp->add_experiments() = std::move(e);
  }
  return grpc::Status::OK;
}

grpc::Status ExperimentsService::GetExperiment(grpc::ServerContext* ctx,
                                               const xv::v1::GetExperimentRequest* req,
                                               xv::v1::Experiment* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/GetExperiment");
      !denied.ok()) {
    return denied;
  }
  return ToGrpcStatus(store_->experiments().GetExperiment(req->id(), resp));
}

grpc::Status ExperimentsService::Status(grpc::ServerContext* ctx, const xv::v1::StatusRequest*,
                                        xv::v1::StatusResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/Status");
      !denied.ok()) {
    return denied;
  }
  std::map<std::string, int64_t> counts;
  xv::Status s = store_->experiments().CountByState(&counts);
  if (!s.ok()) return ToGrpcStatus(s);
  resp->set_version(version_);
  resp->set_database(store_->database().path());
  int64_t queued = 0, running = 0, finished = 0;
  for (const auto& [name, n] : counts) {
    ExperimentState state = ExperimentState::kQueued;
    if (!ParseExperimentState(name, &state) || IsTerminal(state)) {
      finished += n;
    } else if (state == ExperimentState::kQueued) {
      queued += n;
    } else {
      running += n;  // assigned or running
    }
  }
  resp->set_queued(queued);
  resp->set_running(running);
  resp->set_finished(finished);
  std::vector<xv::v1::WorkerInfo> workers;
  s = store_->workers().ListWorkers(&workers);
  if (!s.ok()) return ToGrpcStatus(s);
  const std::string fault = store_->database().WriteFault();
  if (!fault.empty())
    resp->set_write_mode("read-only: " + fault + " (" + store_->database().path() + ")");
  std::set<std::string> offered;  // trainers of the connected workers
  for (auto& w : workers) {
    w.set_state(ShownWorkerState(dispatcher_, w));
    for (const std::string& t : dispatcher_->TrainersOf(w.id())) {
      w.add_trainers(t);
      offered.insert(t);
    }
    *resp->add_workers() = std::move(w);
  }
  if (counts["queued"] > 0) {
    // Queued experiments wait for a worker offering their trainer; say which trainers none offers.
    std::map<std::string, int64_t> queued_by_trainer;
    s = store_->experiments().CountQueuedByTrainer(&queued_by_trainer);
    if (!s.ok()) return ToGrpcStatus(s);
    for (const auto& [trainer, n] : queued_by_trainer) {
      if (offered.count(trainer) != 0) continue;
      xv::v1::UnservedTrainer* u = resp->add_unserved_trainers();
      u->set_trainer(trainer);
      u->set_queued(n);
    }
  }
  for (ExperimentState state : {ExperimentState::kAssigned, ExperimentState::kRunning}) {
    xv::v1::ListExperimentsRequest req;
    req.set_state(std::string(ToString(state)));
    req.set_limit(1000);
    std::vector<xv::v1::Experiment> active;
    s = store_->experiments().ListExperiments(req, &active);
    if (!s.ok()) return ToGrpcStatus(s);
    for (auto& e : active) *resp->add_active() = std::move(e);
  }
  return grpc::Status::OK;
}

grpc::Status ExperimentsService::CheckCancelsOwn(const Caller& caller, int64_t experiment_id) {
  if (authorizer_ == nullptr || caller.kind != Caller::Kind::kToken ||
      caller.role != TokenRole::kSubmit) {
    return grpc::Status::OK;  // admin, the local owner and an open daemon cancel anything
  }
  std::string submitter;
  xv::Status s = store_->experiments().SubmitterOf(experiment_id, &submitter);
  if (!s.ok()) return ToGrpcStatus(s);
  if (submitter == caller.Label()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "Cancel: experiment " + std::to_string(experiment_id) +
                          " was not submitted by this token (" + caller.Label() +
                          "); a submit token cancels only its own experiments, an admin any");
}

grpc::Status ExperimentsService::Cancel(grpc::ServerContext* ctx, const xv::v1::CancelRequest* req,
                                        xv::v1::CancelResponse* resp) {
  Caller caller;
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/Cancel", &caller);
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "Cancel"); !limited.ok()) {
    return limited;
  }
  if (grpc::Status not_own = CheckCancelsOwn(caller, req->experiment_id()); !not_own.ok()) {
    return not_own;
  }
  ExperimentState state = ExperimentState::kQueued;
  int64_t worker_id = 0;
  int attempt = 0;
  xv::Status s =
      store_->attempts().CancelExperiment(req->experiment_id(), &state, &worker_id, &attempt);
  if (!s.ok()) return ToGrpcStatus(s);
  if (worker_id != 0) {
    dispatcher_->SendCancel(worker_id, req->experiment_id(), attempt, "cancelled by request");
  }
  resp->set_state(std::string(ToString(state)));
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<xv::v1::WatchEvent>* ExperimentsService::Watch(
    grpc::CallbackServerContext* ctx, const xv::v1::WatchRequest* req) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/Watch");
      !denied.ok()) {
    return RefusedWatch(denied);
  }
  return StartWatch(store_, watch_hub_, ctx, *req);
}

grpc::Status ExperimentsService::DrainWorker(grpc::ServerContext* ctx,
                                             const xv::v1::DrainWorkerRequest* req,
                                             xv::v1::DrainWorkerResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Experiments/DrainWorker");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "DrainWorker"); !limited.ok()) {
    return limited;
  }
  if (xv::Status s = CheckRequestLimits(*req); !s.ok()) return ToGrpcStatus(s);
  if (req->worker().empty() == !req->all()) {
    return ToGrpcStatus(
        xv::Status::InvalidArgument("worker: give a worker name or id, or all (not both)"));
  }
  std::vector<int64_t> told;
  xv::Status s = dispatcher_->Drain(
      req->worker(), req->all(), req->reason().empty() ? "drain requested" : req->reason(), &told);
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("drain ({}): {} worker(s)", ctx->peer(), told.size());
  std::vector<xv::v1::WorkerInfo> workers;
  s = store_->workers().ListWorkers(&workers);
  if (!s.ok()) return ToGrpcStatus(s);
  for (auto& w : workers) {
    if (std::find(told.begin(), told.end(), w.id()) == told.end()) continue;
    w.set_state(std::string(ToString(WorkerState::kDraining)));
    *resp->add_workers() = std::move(w);
  }
  return grpc::Status::OK;
}

}  // namespace xv::daemon
