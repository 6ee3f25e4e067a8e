// WorkerTable: the workers table. See worker_table.h.
#include "daemon/store/worker_table.h"

#include <optional>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/probe_figures.h"
#include "common/run_states.h"
#include "daemon/store/stored_text.h"

namespace xv::store {
namespace {

using nlohmann::json;

// A worker offline this long that never held an attempt is forgotten (UpsertWorker).
constexpr int kIdleWorkerHorizonHours = 24;

// The device a worker registered with, as workers.device_json.
json DeviceJson(const xv::v1::Register& reg) {
  const xv::v1::Device& d = reg.device();
  json device = {{"name", d.name()},
                 {"vendor", d.vendor()},
                 {"backend", d.backend()},
                 {"index", d.index()},
                 {"memory_bytes", d.memory_bytes()},
                 {"driver", d.driver()},
                 {"runtime", d.runtime()},
                 {"torch_version", d.torch_version()},
                 {"os", d.os()},
                 {"hostname", d.hostname()},
                 {"peak_flops", d.peak_flops()},
                 {"peak_flops_source", d.peak_flops_source()}};
  json env = json::object();
  for (const auto& [k, v] : d.env_knobs()) env[k] = v;
  device["env_knobs"] = env;
  return device;
}

// What a worker can run, as workers.capabilities_json.
json CapabilitiesJson(const xv::v1::Register& reg) {
  const xv::v1::Capabilities& cap = reg.capabilities();
  return {{"trainers", std::vector<std::string>(cap.trainers().begin(), cap.trainers().end())},
          {"attention_backends", std::vector<std::string>(cap.attention_backends().begin(),
                                                          cap.attention_backends().end())},
          {"sliding_window", cap.sliding_window()},
          {"dtypes", std::vector<std::string>(cap.dtypes().begin(), cap.dtypes().end())},
          {"max_concurrent", cap.max_concurrent()}};
}

// Worker rows do not pile up (issue 11: 300 made-up names lived forever): a worker offline for
// kIdleWorkerHorizonHours that never held an attempt is forgotten; registering again makes it
// anew. Workers that ran something stay, their rows are referenced by experiments and attempts.
Status ForgetIdleWorkers(SqliteConnection* c) {
  SqliteStatement prune;
  XV_RETURN_IF_ERROR(c->Prepare(
      "DELETE FROM workers WHERE state = 'offline' AND COALESCE(last_heartbeat, registered_at) < "
      "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?) "
      "AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.worker_id = workers.id) "
      "AND NOT EXISTS (SELECT 1 FROM experiments e WHERE e.worker_id = workers.id)",
      &prune));
  prune.Bind(1, "-" + std::to_string(kIdleWorkerHorizonHours) + " hours");
  XV_RETURN_IF_ERROR(prune.Run());
  if (c->Changes() > 0) {
    spdlog::info("forgot {} worker(s) offline for over {} h that never ran an attempt",
                 c->Changes(), kIdleWorkerHorizonHours);
  }
  return Status::Ok();
}

// The device probe (issue 3). A worker registering without one (--no-probe, probe failed) keeps
// the one stored before.
Status StoreProbe(SqliteConnection* c, const xv::v1::Register& reg) {
  if (reg.probe_json().empty()) return Status::Ok();
  ProbeFigures pf;
  const bool parsed = ParseProbeFigures(reg.probe_json(), &pf);
  SqliteStatement probe;
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE workers SET probe_json = ?, probe_matmul_tflops = ?, probe_bandwidth_gbs = ?, "
      "probed_at = " XV_NOW " WHERE name = ?",
      &probe));
  probe.Bind(1, reg.probe_json())
      .Bind(2,
            parsed && pf.matmul_tflops > 0 ? std::optional<double>(pf.matmul_tflops) : std::nullopt)
      .Bind(3, parsed && pf.bandwidth_gb_per_s > 0 ? std::optional<double>(pf.bandwidth_gb_per_s)
                                                   : std::nullopt)
      .Bind(4, reg.worker_name());
  return probe.Run();
}

}  // namespace

Status WorkerTable::ListWorkers(std::vector<xv::v1::WorkerInfo>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT w.id, w.name, w.state, w.device_json, COALESCE(w.last_heartbeat, ''), "
      "(SELECT MIN(e.id) FROM experiments e WHERE e.worker_id = w.id "
      " AND e.state IN ('assigned', 'running')), w.probe_json, "
      "w.probe_matmul_tflops, w.probe_bandwidth_gbs FROM workers w ORDER BY w.id",
      &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    xv::v1::WorkerInfo* w = &out->emplace_back();
    w->set_id(st.ColumnInt(0));
    w->set_name(st.ColumnText(1));
    w->set_state(st.ColumnText(2));
    std::string device = st.ColumnText(3);
    json dj = ParseBoundedJsonOrDiscarded(device);
    if (dj.is_object()) {
      w->mutable_device()->set_name(TextField(dj, "name"));
      w->mutable_device()->set_vendor(TextField(dj, "vendor"));
      w->mutable_device()->set_backend(TextField(dj, "backend"));
      w->mutable_device()->set_hostname(TextField(dj, "hostname"));
      if (auto idx = IntField(dj, "index")) w->mutable_device()->set_index(static_cast<int>(*idx));
      if (auto peak = NumberField(dj, "peak_flops")) w->mutable_device()->set_peak_flops(*peak);
    }
    w->set_last_heartbeat(st.ColumnText(4));
    w->set_current_experiment_id(st.IsNull(5) ? 0 : st.ColumnInt(5));
    w->set_probe_json(st.ColumnText(6));
    w->set_probe_matmul_tflops(st.IsNull(7) ? 0.0 : st.ColumnDouble(7));
    w->set_probe_bandwidth_gbs(st.IsNull(8) ? 0.0 : st.ColumnDouble(8));
  }
  return Status::Ok();
}

Status WorkerTable::UpsertWorker(const xv::v1::Register& reg, int64_t* worker_id) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  const xv::v1::Device& d = reg.device();
  const std::string device = DumpJsonLossless(DeviceJson(reg));
  const std::string caps = DumpJsonLossless(CapabilitiesJson(reg));
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    XV_RETURN_IF_ERROR(ForgetIdleWorkers(c));
    SqliteStatement st;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO workers(name, device_json, capabilities_json, backend, device_name, state, "
        "version, last_heartbeat) VALUES (?, ?, ?, ?, ?, 'idle', ?, " XV_NOW
        ") ON CONFLICT(name) DO UPDATE SET device_json = excluded.device_json, "
        "capabilities_json = excluded.capabilities_json, backend = excluded.backend, "
        "device_name = excluded.device_name, state = 'idle', version = excluded.version, "
        "registered_at = " XV_NOW ", last_heartbeat = excluded.last_heartbeat",
        &st));
    st.Bind(1, reg.worker_name())
        .Bind(2, device)
        .Bind(3, caps)
        .Bind(4, d.backend().empty() ? std::string("cpu") : d.backend())
        .Bind(5, d.name())
        .Bind(6, reg.version());
    XV_RETURN_IF_ERROR(st.Run());
    XV_RETURN_IF_ERROR(StoreProbe(c, reg));
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT id FROM workers WHERE name = ?", &sel));
    sel.Bind(1, reg.worker_name());
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::Internal("worker " + reg.worker_name() + " vanished after upsert");
    *worker_id = sel.ColumnInt(0);
    return Status::Ok();
  });
}

Status WorkerTable::SetWorkerState(int64_t worker_id, WorkerState state) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "UPDATE workers SET state = ?, last_heartbeat = " XV_NOW " WHERE id = ?", &st));
  st.Bind(1, std::string(ToString(state))).Bind(2, worker_id);
  return st.Run();
}

Status WorkerTable::MarkAllWorkersOffline() {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  return db_->conn()->Exec("UPDATE workers SET state = 'offline' WHERE state != 'offline'");
}

Status WorkerTable::TouchWorker(int64_t worker_id) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare("UPDATE workers SET last_heartbeat = " XV_NOW " WHERE id = ?", &st));
  st.Bind(1, worker_id);
  return st.Run();
}

}  // namespace xv::store
