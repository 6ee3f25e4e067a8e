// xv-bench-daemon: load on a real xvd (the binary, as a child process on a fresh state dir, unix
// socket only), from in-process fake workers (tests/integration/daemon_fake_worker.h: one gRPC
// Session stream each, runs that finish at once). In one run, four phases:
//   1. single submits: K Submit calls of one candidate each (no worker connected);
//   2. assignment: N workers take the K experiments, each run reporting only its summary event and
//      Finished, acknowledged before the next: experiments/s, and a worker's idle gap from sending
//      Finished to its next Assign;
//   3. batched submits: K experiments in Submit calls of B candidates (no worker connected);
//   4. event ingest: N workers take those K, each run streaming E `step` events (in EventBatch
//      messages of up to 64, as xv-worker sends them) then its summary before Finished: events/s,
//      and the cost of one step event beyond the run's own cost.
// Ingestion (issue 18's "metric rows/s with 64 workers streaming") is counted from the daemon's
// side: the metrics rows the event phase added (SELECT COUNT(*) FROM metrics, read-only, before
// and after), divided by the stream window: the first step event sent .. the last step event
// acknowledged (an ack means committed). Each run's assignment and its Finished transaction lie
// outside a run's stream, but a worker's turnaround between two runs lies inside the window, so
// `--experiments` equal to `--workers` (one long stream each) measures ingestion alone. The old
// figure stays beside it, labelled "whole phase": runs x E / seconds of the whole event phase.
// The bench's own CPU (the fake workers, in this process) is printed beside xvd's: on a small
// machine the client may be what bounds the figure.
// Printed: submit latency p50/p99 per call and per experiment, experiments/s, events/s, the
// daemon's CPU time per experiment (from /proc), database bytes per experiment (SQLite pages in
// use, WAL included), and the ratios batched/single and with/without events. Every submitted
// experiment must end succeeded (checked through Status), else the exit code is 1.
//
// Usage: xv-bench-daemon [--workers N] [--experiments K] [--events E] [--batch B] [--xvd PATH]
//                        [--work-dir DIR] [--keep]
#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "bench/daemon/database_fill.h"
#include "bench/daemon/scale_probes.h"
#include "bench/daemon/user_read_probes.h"
#include "tests/e2e/process_harness.h"
#include "tests/integration/daemon_fake_worker.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace fs = std::filesystem;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The p-th percentile (0..100) of `v` by nearest rank.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  rank = std::min(std::max<size_t>(rank, 1), v.size());
  return v[rank - 1];
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CPU seconds (user + system) in a /proc/.../stat text (a process's or a thread's); -1 when
// unreadable.
double TaskCpuSeconds(const std::string& stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state letter
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds (user + system) of process `pid` so far, from /proc/PID/stat; -1 when unreadable.
double ProcessCpuSeconds(pid_t pid) {
  return TaskCpuSeconds(ReadText("/proc/" + std::to_string(pid) + "/stat"));
}

// CPU seconds (user + system) of each thread of process `pid` so far, by thread id, from
// /proc/PID/task/TID/stat.
std::map<pid_t, double> ThreadCpuSeconds(pid_t pid) {
  std::map<pid_t, double> out;
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    const std::string name = entry.path().filename().string();
    const pid_t tid = static_cast<pid_t>(std::atol(name.c_str()));
    const double s = TaskCpuSeconds(ReadText(tasks + "/" + name + "/stat"));
    if (tid > 0 && s >= 0) out[tid] = s;
  }
  return out;
}

// The most CPU seconds one thread used between two ThreadCpuSeconds readings (a thread missing
// from `before` started in between).
double BusiestThreadCpuSeconds(const std::map<pid_t, double>& before,
                               const std::map<pid_t, double>& after) {
  double most = 0;
  for (const auto& [tid, s] : after) {
    auto it = before.find(tid);
    most = std::max(most, s - (it == before.end() ? 0.0 : it->second));
  }
  return most;
}

// A "VmHWM:" / "VmRSS:" figure of /proc/PID/status in KiB; -1 when unreadable.
int64_t ProcessMemoryKib(pid_t pid, const std::string& field) {
  std::istringstream in(ReadText("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + field.size());
  }
  return -1;
}

// CPU seconds (user + system) of this process (the bench and its fake workers) so far.
double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// {"n", "p50", "p99", "max"} of latencies in seconds, as milliseconds.
nlohmann::json LatencyJson(const std::vector<double>& s) {
  return {{"n", s.size()},
          {"p50_ms", 1e3 * Percentile(s, 50)},
          {"p99_ms", 1e3 * Percentile(s, 99)},
          {"max_ms", 1e3 * Percentile(s, 100)}};
}

// Bytes of the database's pages in use (page_count - freelist_count) x page_size, read through a
// read-only connection, so pages still in the WAL count; -1 on error.
int64_t DatabaseBytes(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return -1;
  }
  sqlite3_busy_timeout(db, 5000);
  auto pragma = [db](const char* sql) -> int64_t {
    sqlite3_stmt* st = nullptr;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
  };
  const int64_t pages = pragma("PRAGMA page_count");
  const int64_t free_pages = pragma("PRAGMA freelist_count");
  const int64_t page_size = pragma("PRAGMA page_size");
  sqlite3_close(db);
  if (pages < 0 || free_pages < 0 || page_size < 0) return -1;
  return (pages - free_pages) * page_size;
}

// The single integer `sql` reads from the database (read-only connection); -1 on error.
int64_t QueryCount(const std::string& db_path, const char* sql) {
  sqlite3* db = nullptr;
  int64_t v = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

// The base recipe of every submitted experiment: cpu-tiny's shape; the fake runs ignore it.
const char kRecipeYaml[] =
    "depth: 2\naspect_ratio: 64\nhead_dim: 64\nwindow_pattern: SL\nvocab_size: 8192\n"
    "sequence_len: 256\ndevice_batch_size: 4\ntotal_batch_size: 2048\ndtype: float32\n"
    "time_budget_s: 25\neval_tokens: 16384\nattention_backend: math\ndevice: auto\n";

// One candidate overriding the seed: every experiment of the bench has its own resolved config,
// so none is answered from an earlier identical run.
void AddSeedCandidate(xv::v1::SubmitRequest* req, int64_t seed) {
  auto* o = req->add_candidates()->add_overrides();
  o->set_key("seed");
  o->set_value(std::to_string(seed));
}

struct SubmitFigures {
  std::vector<double> call_s;  // per Submit call
  int64_t experiments = 0;
  double seconds = 0;  // the whole phase
  bool ok = true;
};

// Submits `k` experiments in calls of `batch` candidates (seeds seed0, seed0+1, ...) to campaign
// `campaign`.
SubmitFigures SubmitExperiments(xv::v1::Experiments::Stub* stub, const std::string& campaign,
                                int64_t k, int batch, int64_t seed0) {
  SubmitFigures f;
  const double start = Now();
  for (int64_t done = 0; done < k;) {
    xv::v1::SubmitRequest req;
    req.set_recipe_yaml(kRecipeYaml);
    req.set_recipe_name("cpu-tiny");
    req.set_campaign(campaign);
    req.set_submitter("xv-bench-daemon");
    const int64_t n = std::min<int64_t>(batch, k - done);
    for (int64_t i = 0; i < n; ++i) AddSeedCandidate(&req, seed0 + done + i);
    xv::v1::SubmitResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    const double t0 = Now();
    const grpc::Status s = stub->Submit(&ctx, req, &resp);
    f.call_s.push_back(Now() - t0);
    if (!s.ok() || resp.experiment_ids_size() != n) {
      std::fprintf(stderr, "xv-bench-daemon: Submit of %lld candidates to %s: %s (%d ids)\n",
                   static_cast<long long>(n), campaign.c_str(), s.error_message().c_str(),
                   resp.experiment_ids_size());
      f.ok = false;
      break;
    }
    done += n;
    f.experiments = done;
  }
  f.seconds = Now() - start;
  return f;
}

// A step event as xv-train writes it (trainer/train/training_loop.cc).
std::string StepEventJson(int64_t step) {
  return nlohmann::json{{"type", "step"},
                        {"t", 1.0 + 0.1 * step},
                        {"step", step},
                        {"loss", 9.0 - 0.001 * step},
                        {"lrm", 1.0},
                        {"dt_ms", 100.0},
                        {"tok_per_sec", 20480},
                        {"mfu_percent", nullptr},
                        {"progress", 0.5},
                        {"remaining_s", 10.0},
                        {"epoch", 0}}
      .dump();
}

// Step events per message (EventBatch): xv-worker's WorkerSession::kMaxEventsPerBatch.
constexpr size_t kEventsPerMessage = 64;

struct RunFigures {
  int64_t finished = 0;
  int64_t events = 0;
  double seconds = 0;         // workers started .. the k-th Finished acknowledged
  std::vector<double> gap_s;  // Finished sent .. next Assign read, per worker
  // The stream window: the first step event sent .. the last run's step events acknowledged (its
  // ack read by the worker: an upper bound of the commit time); 0 without step events.
  double stream_s = 0;
  double bench_cpu_s = 0;  // this process's CPU (the fake workers) over the phase
  bool ok = true;
};

// N fake workers run queued experiments until `k` have finished, each run sending `events` step
// events and a summary, then Finished, and waiting for its acknowledgement; then every worker is
// drained (Experiments.DrainWorker) and closes its session.
RunFigures RunWorkers(const std::shared_ptr<grpc::Channel>& channel,
                      xv::v1::Experiments::Stub* stub, int workers, int64_t k, int events,
                      const std::string& phase) {
  RunFigures f;
  std::atomic<int64_t> finished{0}, sent{0};
  std::mutex gaps_mu;
  double first_step_sent = 0, last_step_acked = 0;  // guarded by gaps_mu
  // Every run sends the same step events: rendered once, so that the workers' CPU goes to sending.
  std::vector<std::string> step_jsons;
  for (int e = 0; e < events; ++e) step_jsons.push_back(StepEventJson(e));
  std::vector<std::thread> threads;
  const double cpu_start = SelfCpuSeconds();
  const double start = Now();
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      xv::daemon::fake::FakeWorker worker(channel, "bench-" + phase + "-" + std::to_string(w));
      xv::v1::DaemonMessage msg;
      if (!worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg)) {
        std::fprintf(stderr, "xv-bench-daemon: worker %d: no Registered\n", w);
        return;
      }
      worker.StartHeartbeats(std::chrono::milliseconds(msg.registered().heartbeat_interval_ms()));
      std::vector<double> gaps;
      double finished_at = -1;
      double my_first_sent = 0, my_last_acked = 0;
      // Assigns read while waiting for an acknowledgement: once the store holds a Finished, another
      // worker's scheduling pass may push this worker its next run before the ack goes out.
      std::deque<xv::v1::Assign> pending;
      for (;;) {
        xv::v1::Assign assign;
        if (!pending.empty()) {
          assign = std::move(pending.front());
          pending.pop_front();
        } else {
          if (!worker.ReadUntil([](auto& m) { return m.has_assign() || m.has_drain(); }, &msg) ||
              msg.has_drain()) {
            break;
          }
          assign = msg.assign();
        }
        if (finished_at > 0) gaps.push_back(Now() - finished_at);
        const auto& spec = assign.spec();
        int64_t seq = 0;
        if (events > 0 && my_first_sent == 0) my_first_sent = Now();
        for (int e = 0; e < events;) {
          // Batches of up to 64, as xv-worker's outbox sends the events it holds ready.
          const int n = std::min<int>(events - e, static_cast<int>(kEventsPerMessage));
          const std::vector<std::string> batch(step_jsons.begin() + e, step_jsons.begin() + e + n);
          e += n;
          worker.SendEventBatch(spec.experiment_id(), spec.attempt(), seq + 1, batch);
          seq += static_cast<int64_t>(batch.size());
        }
        worker.SendEvent(spec.experiment_id(), spec.attempt(), ++seq,
                         xv::daemon::fake::SummaryJson(2.0));
        sent += seq;
        xv::v1::WorkerMessage fin;
        fin.mutable_finished()->set_experiment_id(spec.experiment_id());
        fin.mutable_finished()->set_attempt(spec.attempt());
        fin.mutable_finished()->set_state("succeeded");
        fin.mutable_finished()->set_last_seq(seq);
        fin.mutable_finished()->set_wall_seconds(0.001);
        worker.Send(fin);
        finished_at = Now();
        const int64_t id = spec.experiment_id();
        bool steps_acked = events == 0;
        if (!worker.ReadUntil(
                [&](auto& m) {
                  if (m.has_assign()) pending.push_back(m.assign());
                  if (!steps_acked && m.has_ack() && m.ack().experiment_id() == id &&
                      m.ack().seq() >= events) {
                    steps_acked = true;
                    my_last_acked = Now();
                  }
                  return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == id;
                },
                &msg)) {
          std::fprintf(stderr, "xv-bench-daemon: worker %d: stream ended before the ack of %lld\n",
                       w, static_cast<long long>(id));
          break;
        }
        ++finished;
      }
      worker.Close();
      std::lock_guard<std::mutex> lock(gaps_mu);
      f.gap_s.insert(f.gap_s.end(), gaps.begin(), gaps.end());
      if (my_first_sent > 0 && (first_step_sent == 0 || my_first_sent < first_step_sent)) {
        first_step_sent = my_first_sent;
      }
      last_step_acked = std::max(last_step_acked, my_last_acked);
    });
  }
  // Wait for the k runs; give up when none has finished for 20 s (the fake worker's session
  // deadline is 60 s).
  int64_t last_count = -1;
  double last_progress = start;
  while (finished.load() < k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const int64_t now_count = finished.load();
    if (now_count != last_count) {
      last_count = now_count;
      last_progress = Now();
    } else if (Now() - last_progress > 20) {
      std::fprintf(stderr, "xv-bench-daemon: phase %s: no run finished for 20 s\n", phase.c_str());
      break;
    }
  }
  f.seconds = Now() - start;
  f.bench_cpu_s = SelfCpuSeconds() - cpu_start;
  f.finished = finished.load();
  f.events = sent.load();
  xv::v1::DrainWorkerRequest drain;
  drain.set_all(true);
  drain.set_reason("xv-bench-daemon: phase " + phase + " done");
  xv::v1::DrainWorkerResponse drained;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = stub->DrainWorker(&ctx, drain, &drained);
  if (!s.ok()) {
    std::fprintf(stderr, "xv-bench-daemon: DrainWorker: %s\n", s.error_message().c_str());
  }
  for (auto& t : threads) t.join();
  if (first_step_sent > 0 && last_step_acked > first_step_sent) {
    f.stream_s = last_step_acked - first_step_sent;
  }
  f.ok = f.finished == k;
  if (!f.ok) {
    std::fprintf(stderr, "xv-bench-daemon: phase %s: %lld of %lld runs finished\n", phase.c_str(),
                 static_cast<long long>(f.finished), static_cast<long long>(k));
  }
  return f;
}

bool StatusCounts(xv::v1::Experiments::Stub* stub, xv::v1::StatusResponse* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status s = stub->Status(&ctx, xv::v1::StatusRequest(), out);
  if (!s.ok()) std::fprintf(stderr, "xv-bench-daemon: Status: %s\n", s.error_message().c_str());
  return s.ok();
}

// Failures the fake worker's EXPECT checks recorded outside any test; printed, true when any.
bool ReportFakeWorkerFailures() {
  const testing::TestResult& r = testing::UnitTest::GetInstance()->ad_hoc_test_result();
  for (int i = 0; i < r.total_part_count(); ++i) {
    const testing::TestPartResult& part = r.GetTestPartResult(i);
    if (part.failed()) {
      std::fprintf(stderr, "xv-bench-daemon: fake worker check failed at %s:%d: %s\n",
                   part.file_name() ? part.file_name() : "?", part.line_number(), part.summary());
    }
  }
  return r.Failed();
}

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

bool ParseCount(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > max) {
    std::fprintf(stderr, "%s: expected an integer in %lld..%lld, got '%s'\n", flag.c_str(),
                 static_cast<long long>(min), static_cast<long long>(max), text.c_str());
    return false;
  }
  *out = v;
  return true;
}

int Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: xv-bench-daemon [--workers N] [--experiments K] [--events E] [--batch B] "
      "[--xvd PATH] [--work-dir DIR] [--keep]\n"
      "                       [--fill-experiments N] [--fill-metrics M] [--big-submit R]\n"
      "                       [--probe-calls C] [--json FILE] [--quick]\n"
      "  --workers      fake workers connected at once (default 4)\n"
      "  --experiments  experiments per phase: single submits, then batched (default 400)\n"
      "  --events       step events each run streams in the event phase (default 50)\n"
      "  --batch        candidates per batched Submit (default 64, at most 256)\n"
      "  --xvd          the daemon binary (default: xvd beside this program)\n"
      "  --work-dir     where state/ and xvd.log are made (default a fresh /tmp directory)\n"
      "  --keep         keep the state dir and xvd.log\n"
      "  --fill-experiments  scale phase: grow the batched campaign to N experiments by direct\n"
      "                 SQLite copies (xvd stopped), restart xvd, probe dispatch, queries and a "
      "big\n"
      "                 submit (default 0: no scale phase)\n"
      "  --fill-metrics total metrics rows the fill adds (default 100 per filled experiment)\n"
      "  --big-submit   rows of the big submit in the scale phase (default 10000)\n"
      "  --probe-calls  calls per latency probe in the scale phase (default 200)\n"
      "  --json         also write every figure to FILE as one JSON object\n"
      "  --quick        small sizes for a smoke test: 2 workers, K 24, E 5, B 8, fill 2000\n"
      "                 experiments and 100000 metrics rows, big submit 1000, 30 probe calls\n");
  return out == stdout ? 0 : 2;
}

// The reads of a user or an agent (user_read_probes.h) against the xvd serving `state`: xvctl
// from beside `xvd`, the dashboard on the port in state/http.port, the batched campaign.
std::string ProbeUserReadsOf(const std::string& xvd, const std::string& state, int64_t shown_max_id,
                             int calls, const std::shared_ptr<grpc::Channel>& channel,
                             std::map<std::string, std::vector<double>>* out) {
  xv::bench::UserReadTargets t;
  t.xvctl = (fs::path(xvd).parent_path() / "xvctl").string();
  t.state_dir = state;
  t.campaign = "bench-batched";
  t.shown_max_id = shown_max_id;
  if (!fs::exists(t.xvctl)) return "no xvctl beside " + xvd + " (build it: ninja xvctl)";
  if (!xv::e2e::WaitForPath(state + "/http.port", 30)) return "xvd wrote no http.port";
  t.http_port = std::atoi(xv::e2e::ReadFileText(state + "/http.port").c_str());
  auto stub = xv::v1::Campaigns::NewStub(channel);
  xv::v1::GetCampaignRequest creq;
  creq.set_name(t.campaign);
  xv::v1::Campaign campaign;
  grpc::ClientContext cctx;
  if (!stub->GetCampaign(&cctx, creq, &campaign).ok()) return "GetCampaign " + t.campaign;
  t.campaign_id = campaign.id();
  xv::v1::ListExperimentsRequest newest;
  newest.set_descending(true);
  newest.set_limit(1);
  xv::v1::ListExperimentsResponse top;
  grpc::ClientContext lctx;
  if (!xv::v1::Experiments::NewStub(channel)->ListExperiments(&lctx, newest, &top).ok() ||
      top.experiments_size() == 0) {
    return "ListExperiments: nothing";
  }
  t.max_experiment_id = top.experiments(0).id();
  // xvctl is a process per call (its start included): fewer of them, but 100, the fewest whose
  // nearest-rank p99 is not simply the slowest call (with 20, one call slowed by the machine was
  // the p99).
  return xv::bench::ProbeUserReads(t, calls, std::min(calls, 100), out);
}

// The scale phase: xvd is stopped; the batched campaign is grown to `fill_experiments` rows with
// `fill_metrics` metrics rows by direct SQLite copies; xvd starts again on the big database; then
// dispatch latency, results-style queries and a big submit's effect on Status and event acks are
// probed, and xvd's memory and the database's size read. Returns the exit code (0 or 1).
int RunScalePhase(const std::string& xvd, const std::string& work_dir, int64_t fill_experiments,
                  int64_t fill_metrics, int64_t big_submit, int calls, nlohmann::json* figures) {
  const std::string state = work_dir + "/state";
  const std::string db_path = state + "/xv.db";
  xv::bench::FillFigures fill;
  const int64_t per_exp =
      fill_experiments > 0 ? (fill_metrics + fill_experiments - 1) / fill_experiments : 0;
  std::printf(
      "\nscale phase: filling %s to %lld experiments, %lld metrics rows each (direct SQLite)\n",
      db_path.c_str(), static_cast<long long>(fill_experiments), static_cast<long long>(per_exp));
  const std::string err =
      xv::bench::FillDatabase(db_path, "bench-batched", fill_experiments, per_exp, &fill);
  if (!err.empty()) {
    std::fprintf(stderr, "xv-bench-daemon: %s\n", err.c_str());
    return 1;
  }
  const int64_t db_filled = DatabaseBytes(db_path);
  std::printf("filled: +%lld experiments, +%lld metrics rows in %.1f s; database %.1f MB\n",
              static_cast<long long>(fill.experiments_added),
              static_cast<long long>(fill.metrics_added), fill.seconds, db_filled / 1e6);
  const double t0 = Now();
  // The dashboard too (its JSON API is probed): on a port the kernel picks, in state/http.port.
  xv::e2e::ChildGuard daemon(
      {xvd, "--state-dir", state, "--listen", "none", "--rate-limit", "0", "--http", "127.0.0.1:0"},
      {}, work_dir + "/xvd.log");
  const std::string socket = state + "/xvd.sock";
  if (!xv::e2e::WaitForUnixListener(socket, 300)) {
    std::fprintf(stderr,
                 "xv-bench-daemon: xvd did not listen on the filled database; its log:\n%s\n",
                 xv::e2e::FileTail(work_dir + "/xvd.log").c_str());
    return 1;
  }
  const double startup_s = Now() - t0;
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  xv::bench::ScaleFigures f;
  std::string probe_err = xv::bench::ProbeQueries(channel, "bench-batched", calls, &f);
  if (probe_err.empty()) {
    probe_err = ProbeUserReadsOf(xvd, state, fill.source_max_id, calls, channel, &f.query_s);
  }
  if (probe_err.empty()) probe_err = xv::bench::ProbeDispatch(channel, calls, &f);
  if (probe_err.empty() && big_submit > 0) {
    probe_err = xv::bench::ProbeBigSubmit(channel, big_submit, &f);
  }
  const int64_t rss_peak = ProcessMemoryKib(daemon.pid(), "VmHWM:");
  const int64_t rss = ProcessMemoryKib(daemon.pid(), "VmRSS:");
  const double stop_start = Now();
  const int wait_status = daemon.Stop();
  const double stop_s = Now() - stop_start;
  int rc = 0;
  if (!probe_err.empty()) {
    std::fprintf(stderr, "xv-bench-daemon: scale phase: %s\n", probe_err.c_str());
    rc = 1;
  }
  if (wait_status != 0) {
    std::fprintf(stderr,
                 "xv-bench-daemon: xvd did not exit cleanly after the scale phase (wait "
                 "status %d)\n",
                 wait_status);
    rc = 1;
  }
  if (ReportFakeWorkerFailures()) rc = 1;

  auto ms = [](double s) { return s * 1e3; };
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    std::printf("%-46s %7zu %9.2f %9.2f %9.2f\n", name.c_str(), v.size(), ms(Percentile(v, 50)),
                ms(Percentile(v, 99)), ms(Percentile(v, 100)));
  };
  std::printf("\n%-46s %7s %9s %9s %9s\n", "at scale (xvd restarted on the filled database)",
              "calls", "p50 ms", "p99 ms", "max ms");
  for (const auto& [name, v] : f.query_s) row(name, v);
  row("dispatch: Submit start .. Assign read", f.dispatch_s);
  row("dispatch: Submit reply .. Assign read", f.dispatch_queued_s);
  row("dispatch: the Submit call itself", f.dispatch_submit_s);
  row("Status, idle", f.status_idle_s);
  row("Status, during the big submit", f.status_during_submit_s);
  row("ack of 64 step events, idle", f.ack_idle_s);
  row("ack of 64 step events, during the big submit", f.ack_during_submit_s);
  std::printf(
      "big submit: %lld rows in %.2f s; xvd start on the filled database %.2f s; xvd RSS "
      "peak %.1f MiB; exit %.2f s after SIGTERM\n",
      static_cast<long long>(f.big_submit_rows), f.big_submit_s, startup_s, rss_peak / 1024.0,
      stop_s);

  nlohmann::json& j = (*figures)["scale"];
  j["experiments"] = fill_experiments;
  j["metrics_rows_filled"] = fill.metrics_added;
  j["fill_s"] = fill.seconds;
  j["db_bytes"] = db_filled;
  j["startup_s"] = startup_s;
  for (const auto& [name, v] : f.query_s) j["queries"][name] = LatencyJson(v);
  j["dispatch"] = LatencyJson(f.dispatch_s);
  j["dispatch_queued"] = LatencyJson(f.dispatch_queued_s);
  j["dispatch_submit"] = LatencyJson(f.dispatch_submit_s);
  j["status_idle"] = LatencyJson(f.status_idle_s);
  j["status_during_submit"] = LatencyJson(f.status_during_submit_s);
  j["ack_idle"] = LatencyJson(f.ack_idle_s);
  j["ack_during_submit"] = LatencyJson(f.ack_during_submit_s);
  j["big_submit_rows"] = f.big_submit_rows;
  j["big_submit_s"] = f.big_submit_s;
  j["xvd_rss_peak_kib"] = rss_peak;
  j["xvd_rss_kib"] = rss;
  j["xvd_stop_s"] = stop_s;
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines as they come, also into a pipe or a file
  int64_t workers = 4, k = 400, events = 50, batch = 64;
  std::string xvd = SelfDir() + "/xvd";
  std::string work_dir =
      (fs::temp_directory_path() / ("xv-bench-daemon-" + std::to_string(getpid()))).string();
  bool keep = false;
  int64_t fill_experiments = 0, fill_metrics = -1, big_submit = 10000, probe_calls = 200;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      workers = 2, k = 24, events = 5, batch = 8;
      fill_experiments = 2000, fill_metrics = 100000, big_submit = 1000, probe_calls = 30;
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return Usage(stdout);
    if (a == "--keep" || a == "--quick") {
      keep = keep || a == "--keep";
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return Usage(stderr);
    }
    const std::string v = argv[++i];
    bool ok = true;
    if (a == "--workers") {
      ok = ParseCount(a, v, 1, 256, &workers);
    } else if (a == "--experiments") {
      ok = ParseCount(a, v, 1, 1000000, &k);
    } else if (a == "--events") {
      ok = ParseCount(a, v, 0, 1000000, &events);
    } else if (a == "--batch") {
      ok = ParseCount(a, v, 1, 256, &batch);  // the daemon's limit of candidates per Submit
    } else if (a == "--fill-experiments") {
      ok = ParseCount(a, v, 0, 10000000, &fill_experiments);
    } else if (a == "--fill-metrics") {
      ok = ParseCount(a, v, 0, 1000000000, &fill_metrics);
    } else if (a == "--big-submit") {
      ok = ParseCount(a, v, 0, 1000000, &big_submit);
    } else if (a == "--probe-calls") {
      ok = ParseCount(a, v, 1, 100000, &probe_calls);
    } else if (a == "--json") {
      json_path = v;
    } else if (a == "--xvd") {
      xvd = v;
    } else if (a == "--work-dir") {
      work_dir = v;
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return Usage(stderr);
    }
    if (!ok) return 2;
  }
  if (access(xvd.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "xv-bench-daemon: --xvd: %s is not an executable (build xvd first)\n",
                 xvd.c_str());
    return 2;
  }
  std::error_code ec;
  if (fs::exists(work_dir + "/state")) {
    std::fprintf(stderr, "xv-bench-daemon: --work-dir: %s/state exists; give a fresh directory\n",
                 work_dir.c_str());
    return 2;
  }
  // Only what the bench made is removed at the end: the directory itself when it made it.
  const bool made_work_dir = !fs::exists(work_dir);
  fs::create_directories(work_dir + "/state", ec);
  if (ec) {
    std::fprintf(stderr, "xv-bench-daemon: --work-dir: cannot create %s/state: %s\n",
                 work_dir.c_str(), ec.message().c_str());
    return 2;
  }
  const std::string state = work_dir + "/state";
  const std::string socket = state + "/xvd.sock";
  const std::string db_path = state + "/xv.db";

  if (fill_metrics < 0) fill_metrics = 100 * fill_experiments;
  int rc = 0;
  nlohmann::json figures = {{"workers", workers},
                            {"experiments_per_phase", k},
                            {"events_per_run", events},
                            {"batch", batch}};
  {
    // The bench measures the daemon's own throughput: no per-caller rate limit.
    xv::e2e::ChildGuard daemon({xvd, "--state-dir", state, "--listen", "none", "--rate-limit", "0"},
                               {}, work_dir + "/xvd.log");
    if (!xv::e2e::WaitForUnixListener(socket, 20)) {
      std::fprintf(stderr, "xv-bench-daemon: xvd did not listen on %s; its log:\n%s\n",
                   socket.c_str(), xv::e2e::FileTail(work_dir + "/xvd.log").c_str());
      return 1;
    }
    auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
    auto stub = xv::v1::Experiments::NewStub(channel);
    std::printf(
        "xv-bench-daemon: xvd %s on %s; %lld fake workers (in this process), %lld experiments per "
        "phase, %lld step events per run in the event phase, batches of %lld\n",
        xvd.c_str(), state.c_str(), static_cast<long long>(workers), static_cast<long long>(k),
        static_cast<long long>(events), static_cast<long long>(batch));

    const pid_t pid = daemon.pid();
    const int64_t db0 = DatabaseBytes(db_path);
    double cpu = ProcessCpuSeconds(pid);
    auto cpu_delta = [&] {
      const double now = ProcessCpuSeconds(pid);
      const double d = now - cpu;
      cpu = now;
      return d;
    };

    const SubmitFigures single = SubmitExperiments(stub.get(), "bench-single", k, 1, 1000);
    const double single_cpu = cpu_delta();
    const int64_t db_single_queued = DatabaseBytes(db_path);
    const RunFigures plain =
        single.ok ? RunWorkers(channel, stub.get(), static_cast<int>(workers), k, 0, "assign")
                  : RunFigures{};
    const double plain_cpu = cpu_delta();
    const int64_t db_plain_done = DatabaseBytes(db_path);
    const SubmitFigures batched =
        SubmitExperiments(stub.get(), "bench-batched", k, static_cast<int>(batch), 1000 + 2 * k);
    const double batched_cpu = cpu_delta();
    const int64_t db_batched_queued = DatabaseBytes(db_path);
    const char* kCountMetrics = "SELECT COUNT(*) FROM metrics";
    const int64_t metrics_before = QueryCount(db_path, kCountMetrics);
    const std::map<pid_t, double> threads_before = ThreadCpuSeconds(pid);
    const RunFigures streamed = batched.ok
                                    ? RunWorkers(channel, stub.get(), static_cast<int>(workers), k,
                                                 static_cast<int>(events), "events")
                                    : RunFigures{};
    const double streamed_cpu = cpu_delta();
    // The event writer's store thread (the busiest): its transactions are serial, so its CPU per
    // event bounds ingestion whatever the other threads do.
    const double busiest_thread_cpu =
        BusiestThreadCpuSeconds(threads_before, ThreadCpuSeconds(pid));
    const int64_t db_streamed_done = DatabaseBytes(db_path);
    const int64_t metrics_stored = QueryCount(db_path, kCountMetrics) - metrics_before;

    xv::v1::StatusResponse status;
    const bool status_ok = StatusCounts(stub.get(), &status);
    int64_t succeeded = 0;
    for (const char* campaign : {"bench-single", "bench-batched"}) {
      for (int64_t after = 0;;) {
        xv::v1::ListExperimentsRequest req;
        req.set_campaign(campaign);
        req.set_state("succeeded");
        req.set_limit(1000);
        req.set_after_id(after);
        xv::v1::ListExperimentsResponse resp;
        grpc::ClientContext ctx;
        if (!stub->ListExperiments(&ctx, req, &resp).ok() || resp.experiments_size() == 0) break;
        succeeded += resp.experiments_size();
        after = resp.experiments(resp.experiments_size() - 1).id();
      }
    }

    // Submit latency.
    auto ms = [](double s) { return s * 1e3; };
    auto rate = [](double n, double s) { return s > 0 ? n / s : 0.0; };
    std::printf("\n%-34s %9s %9s %9s %9s %11s %13s %12s\n", "submit (no worker connected)", "calls",
                "p50 ms", "p99 ms", "max ms", "per exp ms", "experiments/s", "xvd cpu ms/exp");
    for (const auto* f : {&single, &batched}) {
      const bool is_single = f == &single;
      const double c = is_single ? single_cpu : batched_cpu;
      std::printf("%-34s %9zu %9.2f %9.2f %9.2f %11.3f %13.0f %12.3f\n",
                  is_single
                      ? "single (1 candidate per call)"
                      : ("batched (" + std::to_string(batch) + " candidates per call)").c_str(),
                  f->call_s.size(), ms(Percentile(f->call_s, 50)), ms(Percentile(f->call_s, 99)),
                  ms(Percentile(f->call_s, 100)), rate(ms(f->seconds), f->experiments),
                  rate(f->experiments, f->seconds), rate(ms(c), f->experiments));
    }
    std::printf("\n%-34s %9s %9s %13s %11s %11s %12s\n", "runs (fake, finish at once)", "runs",
                "seconds", "experiments/s", "events/s", "gap p50 ms", "xvd cpu ms/exp");
    for (const auto* f : {&plain, &streamed}) {
      const bool is_plain = f == &plain;
      const double c = is_plain ? plain_cpu : streamed_cpu;
      std::printf(
          "%-34s %9lld %9.2f %13.1f %11.0f %11.2f %12.3f\n",
          is_plain ? "summary only" : (std::to_string(events) + " step events + summary").c_str(),
          static_cast<long long>(f->finished), f->seconds, rate(f->finished, f->seconds),
          rate(static_cast<double>(f->events), f->seconds), ms(Percentile(f->gap_s, 50)),
          rate(ms(c), f->finished));
    }
    std::printf(
        "(gap: a worker's Finished sent .. its next Assign read, acknowledgement included; "
        "gap p99 %.2f ms / %.2f ms)\n",
        ms(Percentile(plain.gap_s, 99)), ms(Percentile(streamed.gap_s, 99)));

    // Ingestion, counted from the daemon's side (see the top of this file).
    const double whole_phase_rows_per_s = rate(
        static_cast<double>(streamed.finished) * static_cast<double>(events), streamed.seconds);
    const double ingest_rows_per_s = rate(static_cast<double>(metrics_stored), streamed.stream_s);
    const int64_t xvd_hwm_kib = ProcessMemoryKib(pid, "VmHWM:");
    std::printf("\ningestion, %lld workers streaming %lld step events per run:\n",
                static_cast<long long>(workers), static_cast<long long>(events));
    std::printf(
        "  metric rows stored (daemon's COUNT(*) FROM metrics, phase delta): %lld of %lld\n",
        static_cast<long long>(metrics_stored), static_cast<long long>(streamed.finished * events));
    std::printf("  stream window (first step event sent .. last step event acked): %.2f s\n",
                streamed.stream_s);
    std::printf("  metric rows stored/s in the stream window: %.0f\n", ingest_rows_per_s);
    std::printf(
        "  whole phase (runs x events / phase seconds, assignment and turnaround "
        "included): %.0f/s\n",
        whole_phase_rows_per_s);
    std::printf(
        "  CPU over the phase: xvd %.2f s, this bench's fake workers %.2f s (%.0f%% and "
        "%.0f%% of the %u cores' time)\n",
        streamed_cpu, streamed.bench_cpu_s,
        100 * rate(streamed_cpu, streamed.seconds * std::thread::hardware_concurrency()),
        100 * rate(streamed.bench_cpu_s, streamed.seconds * std::thread::hardware_concurrency()),
        std::thread::hardware_concurrency());
    // xvd's CPU per step event: the event phase's CPU per run less the summary-only phase's.
    const double cpu_us_per_step_event =
        events > 0 && streamed.finished > 0 && plain.finished > 0
            ? 1e6 * (streamed_cpu / streamed.finished - plain_cpu / plain.finished) / events
            : 0.0;
    std::printf("  xvd CPU per step event %.1f us (so one whole core stores at most %.0f rows/s)\n",
                cpu_us_per_step_event,
                cpu_us_per_step_event > 0 ? 1e6 / cpu_us_per_step_event : 0.0);
    const int64_t step_events = streamed.finished * events;
    const double busiest_us_per_step_event =
        step_events > 0 ? 1e6 * busiest_thread_cpu / static_cast<double>(step_events) : 0.0;
    std::printf(
        "  busiest xvd thread (the event writer's store thread) %.2f s CPU, %.2f us per step "
        "event (so it stores at most %.0f rows/s)\n",
        busiest_thread_cpu, busiest_us_per_step_event,
        busiest_us_per_step_event > 0 ? 1e6 / busiest_us_per_step_event : 0.0);
    std::printf("  xvd VmHWM (resident peak) %.1f MiB\n", xvd_hwm_kib / 1024.0);

    std::printf("\n%-58s %12s\n", "database (SQLite pages in use, WAL included)", "bytes");
    std::printf("%-58s %12lld\n", "fresh", static_cast<long long>(db0));
    auto per = [](int64_t a, int64_t b, int64_t n) {
      return n > 0 && a >= 0 && b >= 0 ? static_cast<double>(b - a) / static_cast<double>(n) : 0.0;
    };
    std::printf("%-58s %12.0f\n", "per experiment, queued (single submit: round + experiment)",
                per(db0, db_single_queued, k));
    std::printf("%-58s %12.0f\n", "per experiment, queued (batched submit)",
                per(db_plain_done, db_batched_queued, k));
    std::printf("%-58s %12.0f\n", "per run finished, summary only (attempt, result, events)",
                per(db_single_queued, db_plain_done, k));
    std::printf("%-58s %12.0f\n",
                ("per run finished, " + std::to_string(events) + " step events + summary").c_str(),
                per(db_batched_queued, db_streamed_done, k));
    if (events > 0) {
      std::printf(
          "%-58s %12.0f\n", "per step event (difference of the two above)",
          (per(db_batched_queued, db_streamed_done, k) - per(db_single_queued, db_plain_done, k)) /
              static_cast<double>(events));
    }
    std::printf("%-58s %12lld\n", "total", static_cast<long long>(db_streamed_done));

    std::printf("\nratios:\n");
    std::printf("  submit experiments/s, batched / single: %.1fx\n",
                rate(batched.experiments, batched.seconds) /
                    std::max(rate(single.experiments, single.seconds), 1e-9));
    std::printf("  runs/s, summary only / with %lld step events: %.2fx\n",
                static_cast<long long>(events),
                rate(plain.finished, plain.seconds) /
                    std::max(rate(streamed.finished, streamed.seconds), 1e-9));
    if (events > 0 && plain.finished > 0 && streamed.finished > 0) {
      const double extra = streamed.seconds / streamed.finished - plain.seconds / plain.finished;
      std::printf(
          "  wall cost of one step event beyond the run's own: %.1f us (all %lld workers "
          "together)\n",
          1e6 * extra / static_cast<double>(events), static_cast<long long>(workers));
    }

    const bool counts_ok =
        status_ok && status.queued() == 0 && status.running() == 0 && succeeded == 2 * k;
    if (!counts_ok) {
      std::fprintf(stderr,
                   "xv-bench-daemon: expected %lld succeeded and nothing queued or running; "
                   "found %lld succeeded, %lld queued, %lld running\n",
                   static_cast<long long>(2 * k), static_cast<long long>(succeeded),
                   static_cast<long long>(status.queued()),
                   static_cast<long long>(status.running()));
    }
    // Every step event of every finished run must be a metrics row.
    const bool metrics_ok = metrics_stored == streamed.finished * events;
    if (!metrics_ok) {
      std::fprintf(stderr, "xv-bench-daemon: %lld metrics rows stored, expected %lld\n",
                   static_cast<long long>(metrics_stored),
                   static_cast<long long>(streamed.finished * events));
    }
    if (!single.ok || !batched.ok || !plain.ok || !streamed.ok || !counts_ok || !metrics_ok ||
        ReportFakeWorkerFailures()) {
      rc = 1;
    }
    figures["batched_submit_s"] = batched.seconds;
    figures["events_phase_s"] = streamed.seconds;
    figures["runs_per_s_summary_only"] = rate(plain.finished, plain.seconds);
    figures["runs_per_s_with_events"] = rate(streamed.finished, streamed.seconds);
    // The ingestion figure (stream window, daemon's count); the whole phase's figure, labelled.
    figures["metric_rows_per_s"] = ingest_rows_per_s;
    figures["metric_rows_per_s_whole_phase"] = whole_phase_rows_per_s;
    figures["metric_rows_stored"] = metrics_stored;
    figures["stream_window_s"] = streamed.stream_s;
    figures["xvd_cpu_s_events_phase"] = streamed_cpu;
    figures["xvd_busiest_thread_cpu_s_events_phase"] = busiest_thread_cpu;
    figures["xvd_busiest_thread_us_per_step_event"] = busiest_us_per_step_event;
    figures["bench_cpu_s_events_phase"] = streamed.bench_cpu_s;
    figures["xvd_cpu_us_per_step_event"] = cpu_us_per_step_event;
    figures["gap_summary_only"] = LatencyJson(plain.gap_s);
    figures["gap_with_events"] = LatencyJson(streamed.gap_s);
    figures["xvd_cpu_ms_per_run_with_events"] = rate(ms(streamed_cpu), streamed.finished);
    figures["db_bytes_per_step_event"] = events > 0 ? (per(db_batched_queued, db_streamed_done, k) -
                                                       per(db_single_queued, db_plain_done, k)) /
                                                          static_cast<double>(events)
                                                    : 0.0;
    figures["xvd_rss_peak_kib"] = xvd_hwm_kib;
    figures["xvd_rss_kib"] = ProcessMemoryKib(pid, "VmRSS:");
    const double stop_start = Now();
    const int wait_status = daemon.Stop();
    figures["xvd_stop_s"] = Now() - stop_start;
    std::printf("xvd exited %.2f s after SIGTERM\n", Now() - stop_start);
    if (wait_status != 0) {
      std::fprintf(stderr, "xv-bench-daemon: xvd did not exit cleanly (wait status %d); log %s\n",
                   wait_status, (work_dir + "/xvd.log").c_str());
      rc = 1;
    }
  }
  if (rc == 0 && fill_experiments > 0) {
    rc = RunScalePhase(xvd, work_dir, fill_experiments, fill_metrics, big_submit,
                       static_cast<int>(probe_calls), &figures);
  }
  if (!json_path.empty()) {
    figures["ok"] = rc == 0;
    std::ofstream(json_path) << figures.dump(2) << "\n";
  }
  if (rc != 0 || keep) {
    std::printf("state dir and xvd.log kept in %s\n", work_dir.c_str());
  } else {
    fs::remove_all(work_dir + "/state", ec);
    fs::remove(work_dir + "/xvd.log", ec);
    if (made_work_dir) fs::remove(work_dir, ec);
  }
  return rc;
}
