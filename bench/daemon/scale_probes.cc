#include "bench/daemon/scale_probes.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/integration/daemon_fake_worker.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char kRecipeYaml[] =
    "depth: 2\naspect_ratio: 64\nhead_dim: 64\nwindow_pattern: SL\nvocab_size: 8192\n"
    "sequence_len: 256\ndevice_batch_size: 4\ntotal_batch_size: 2048\ndtype: float32\n"
    "time_budget_s: 25\neval_tokens: 16384\nattention_backend: math\ndevice: auto\n";

std::string StepJson(int64_t step) {
  return nlohmann::json{{"type", "step"},       {"t", 1.0},        {"step", step},
                        {"loss", 8.0},          {"lrm", 1.0},      {"dt_ms", 100.0},
                        {"tok_per_sec", 20480}, {"progress", 0.5}, {"remaining_s", 10.0}}
      .dump();
}

grpc::Status Submit(xv::v1::Experiments::Stub* stub, const std::string& campaign, int candidates,
                    int replicates, int64_t seed0, xv::v1::SubmitResponse* resp) {
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(kRecipeYaml);
  req.set_recipe_name("cpu-tiny");
  req.set_campaign(campaign);
  req.set_submitter("xv-bench-daemon");
  req.set_replicates(replicates);
  for (int i = 0; i < candidates; ++i) {
    auto* o = req.add_candidates()->add_overrides();
    o->set_key("seed");
    o->set_value(std::to_string(seed0 + static_cast<int64_t>(i) * replicates));
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return stub->Submit(&ctx, req, resp);
}

// Times one unary call into `out`; false when it failed.
template <typename Call>
bool Timed(std::vector<double>* out, Call&& call) {
  const double t0 = Now();
  const grpc::Status s = call();
  out->push_back(Now() - t0);
  return s.ok();
}

}  // namespace

std::string ProbeQueries(const std::shared_ptr<grpc::Channel>& channel, const std::string& campaign,
                         int calls, ScaleFigures* out) {
  auto stub = xv::v1::Experiments::NewStub(channel);
  xv::v1::ListExperimentsRequest newest;
  newest.set_campaign(campaign);
  newest.set_descending(true);
  newest.set_limit(20);
  xv::v1::ListExperimentsResponse top;
  grpc::ClientContext ctx0;
  if (!stub->ListExperiments(&ctx0, newest, &top).ok() || top.experiments_size() == 0) {
    return "ListExperiments of campaign " + campaign + " found nothing";
  }
  const int64_t max_id = top.experiments(0).id();
  std::mt19937_64 rng(7);
  for (int i = 0; i < calls; ++i) {
    const int64_t some_id = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_id));
    bool ok = true;
    ok &= Timed(&out->query_s["newest 20 of the campaign"], [&] {
      grpc::ClientContext ctx;
      xv::v1::ListExperimentsResponse r;
      return stub->ListExperiments(&ctx, newest, &r);
    });
    ok &= Timed(&out->query_s["best 10 by val_bpb"], [&] {
      xv::v1::ListExperimentsRequest req;
      req.set_campaign(campaign);
      req.set_order_by("val_bpb");
      req.set_limit(10);
      grpc::ClientContext ctx;
      xv::v1::ListExperimentsResponse r;
      return stub->ListExperiments(&ctx, req, &r);
    });
    ok &= Timed(&out->query_s["newest 20 failed of the campaign"], [&] {
      xv::v1::ListExperimentsRequest req = newest;  // a state few rows have: none here
      req.set_state("failed");
      grpc::ClientContext ctx;
      xv::v1::ListExperimentsResponse r;
      return stub->ListExperiments(&ctx, req, &r);
    });
    ok &= Timed(&out->query_s["page of 500 at a random id"], [&] {
      xv::v1::ListExperimentsRequest req;
      req.set_campaign(campaign);
      req.set_limit(500);
      req.set_after_id(some_id);
      grpc::ClientContext ctx;
      xv::v1::ListExperimentsResponse r;
      return stub->ListExperiments(&ctx, req, &r);
    });
    ok &= Timed(&out->query_s["one experiment (GetExperiment)"], [&] {
      xv::v1::GetExperimentRequest req;
      req.set_id(some_id);
      grpc::ClientContext ctx;
      xv::v1::Experiment r;
      grpc::Status s = stub->GetExperiment(&ctx, req, &r);
      return s.error_code() == grpc::StatusCode::NOT_FOUND ? grpc::Status::OK : s;
    });
    ok &= Timed(&out->query_s["Status"], [&] {
      grpc::ClientContext ctx;
      xv::v1::StatusResponse r;
      return stub->Status(&ctx, xv::v1::StatusRequest(), &r);
    });
    if (!ok) return "a query failed at call " + std::to_string(i);
  }
  return "";
}

std::string ProbeDispatch(const std::shared_ptr<grpc::Channel>& channel, int calls,
                          ScaleFigures* out) {
  auto stub = xv::v1::Experiments::NewStub(channel);
  xv::daemon::fake::FakeWorker worker(channel, "bench-dispatch");
  xv::v1::DaemonMessage msg;
  if (!worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg)) {
    return "dispatch worker: no Registered";
  }
  worker.StartHeartbeats(std::chrono::milliseconds(msg.registered().heartbeat_interval_ms()));
  std::string err;
  for (int i = 0; i < calls && err.empty(); ++i) {
    // The Submit runs on a thread of its own while this one reads the worker's stream, so the
    // Assign's arrival is timed on its own, whether it comes before or after the Submit's reply.
    double t0 = 0, replied = 0;
    grpc::Status s;
    std::thread submitter([&] {
      xv::v1::SubmitResponse resp;
      t0 = Now();
      s = Submit(stub.get(), "bench-dispatch", 1, 1, 5000000 + i, &resp);
      replied = Now();
    });
    const bool assigned = worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg);
    const double assign_read = Now();
    submitter.join();
    if (!s.ok()) {
      err = "dispatch Submit: " + s.error_message();
      break;
    }
    if (!assigned) {
      err = "dispatch worker: stream ended before an Assign";
      break;
    }
    out->dispatch_s.push_back(assign_read - t0);
    out->dispatch_queued_s.push_back(assign_read - replied);
    out->dispatch_submit_s.push_back(replied - t0);
    const auto& spec = msg.assign().spec();
    worker.SendEvent(spec.experiment_id(), spec.attempt(), 1, xv::daemon::fake::SummaryJson(2.0));
    xv::v1::WorkerMessage fin;
    fin.mutable_finished()->set_experiment_id(spec.experiment_id());
    fin.mutable_finished()->set_attempt(spec.attempt());
    fin.mutable_finished()->set_state("succeeded");
    fin.mutable_finished()->set_last_seq(1);
    fin.mutable_finished()->set_wall_seconds(0.001);
    worker.Send(fin);
    const int64_t id = spec.experiment_id();
    if (!worker.ReadUntil(
            [&](auto& m) {
              return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == id;
            },
            &msg)) {
      err = "dispatch worker: no ack of its Finished";
    }
  }
  worker.Close();
  return err;
}

std::string ProbeBigSubmit(const std::shared_ptr<grpc::Channel>& channel, int64_t rows,
                           ScaleFigures* out) {
  auto stub = xv::v1::Experiments::NewStub(channel);
  xv::daemon::fake::FakeWorker worker(channel, "bench-hold");
  xv::v1::DaemonMessage msg;
  if (!worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg)) {
    return "hold worker: no Registered";
  }
  worker.StartHeartbeats(std::chrono::milliseconds(msg.registered().heartbeat_interval_ms()));
  xv::v1::SubmitResponse held;
  grpc::Status s = Submit(stub.get(), "bench-hold", 1, 1, 6000000, &held);
  if (!s.ok()) return "hold Submit: " + s.error_message();
  if (!worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg)) {
    return "hold worker: no Assign";
  }
  const int64_t exp = msg.assign().spec().experiment_id();
  const int attempt = msg.assign().spec().attempt();
  int64_t seq = 0;
  // One probe round: a Status call, then 64 step events (a full batch: stored at once) and the
  // time until their ack.
  auto probe = [&](std::vector<double>* status_s, std::vector<double>* ack_s) -> bool {
    if (!Timed(status_s, [&] {
          grpc::ClientContext ctx;
          xv::v1::StatusResponse r;
          return stub->Status(&ctx, xv::v1::StatusRequest(), &r);
        })) {
      return false;
    }
    const double t0 = Now();
    for (int i = 0; i < 64; ++i) worker.SendEvent(exp, attempt, ++seq, StepJson(seq));
    const int64_t last = seq;
    if (!worker.ReadUntil([&](auto& m) { return m.has_ack() && m.ack().seq() >= last; }, &msg)) {
      return false;
    }
    ack_s->push_back(Now() - t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return true;
  };
  for (const double until = Now() + 1.0; Now() < until;) {
    if (!probe(&out->status_idle_s, &out->ack_idle_s)) return "idle probe failed";
  }
  std::atomic<bool> done{false};
  std::string submit_err;
  std::thread submitter([&] {
    const double t0 = Now();
    int64_t left = rows, seed = 7000000;
    while (left > 0) {
      const int replicates = 16;
      const int candidates =
          static_cast<int>(std::min<int64_t>(250, (left + replicates - 1) / replicates));
      xv::v1::SubmitResponse resp;
      const grpc::Status st = Submit(stub.get(), "bench-big", candidates, replicates, seed, &resp);
      if (!st.ok()) {
        submit_err = "big Submit: " + st.error_message();
        break;
      }
      left -= resp.experiment_ids_size();
      out->big_submit_rows += resp.experiment_ids_size();
      seed += static_cast<int64_t>(candidates) * replicates;
    }
    out->big_submit_s = Now() - t0;
    done = true;
  });
  std::string err;
  do {  // at least once, however fast the submit
    if (!probe(&out->status_during_submit_s, &out->ack_during_submit_s)) {
      err = "probe during the submit failed";
      break;
    }
  } while (!done.load());
  submitter.join();
  // The big campaign's rows stay queued: pause it so the hold worker gets none of them.
  xv::v1::GetCampaignRequest pause;
  pause.set_name("bench-big");
  xv::v1::Campaign campaign;
  grpc::ClientContext pctx;
  const grpc::Status paused =
      xv::v1::Campaigns::NewStub(channel)->PauseCampaign(&pctx, pause, &campaign);
  if (!paused.ok()) return "PauseCampaign bench-big: " + paused.error_message();
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(exp);
  fin.mutable_finished()->set_attempt(attempt);
  fin.mutable_finished()->set_state("failed");
  fin.mutable_finished()->set_last_seq(seq);
  fin.mutable_finished()->set_wall_seconds(1);
  worker.Send(fin);
  worker.Close();
  if (!submit_err.empty()) return submit_err;
  return err;
}

}  // namespace xv::bench
