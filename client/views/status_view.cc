#include "client/views/status_view.h"

#include <vector>

#include "client/views/device_health_view.h"
#include "client/views/experiment_view.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::client {

nlohmann::json StatusJson(const v1::StatusResponse& resp, const std::string& address) {
  nlohmann::json workers = nlohmann::json::array(), active = nlohmann::json::array();
  for (const auto& w : resp.workers()) {
    workers.push_back(
        {{"id", w.id()},
         {"name", w.name()},
         {"state", w.state()},
         {"device", w.device().name()},
         {"backend", w.device().backend()},
         {"current_experiment_id", w.current_experiment_id()},
         {"last_heartbeat", w.last_heartbeat()},
         {"probe", WorkerProbeJson(w)},
         {"trainers", std::vector<std::string>(w.trainers().begin(), w.trainers().end())}});
  }
  nlohmann::json unserved = nlohmann::json::array();
  for (const auto& u : resp.unserved_trainers()) {
    unserved.push_back({{"trainer", u.trainer()}, {"queued", u.queued()}});
  }
  for (const auto& e : resp.active()) active.push_back(ExperimentJson(e));
  nlohmann::json j = {{"address", address},
                      {"version", resp.version()},
                      {"database", resp.database()},
                      {"queued", resp.queued()},
                      {"running", resp.running()},
                      {"finished", resp.finished()},
                      {"workers", workers},
                      {"active", active},
                      {"write_mode", resp.write_mode().empty() ? "read-write" : resp.write_mode()}};
  j["unserved_trainers"] = unserved;
  return j;
}

nlohmann::json WorkersJson(const v1::StatusResponse& resp) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& w : resp.workers()) {
    nlohmann::json probe = ParseBoundedJsonOrDiscarded(w.probe_json());
    arr.push_back({{"id", w.id()},
                   {"name", w.name()},
                   {"state", w.state()},
                   {"device", w.device().name()},
                   {"vendor", w.device().vendor()},
                   {"backend", w.device().backend()},
                   {"current_experiment_id", w.current_experiment_id()},
                   {"last_heartbeat", w.last_heartbeat()},
                   {"probe", WorkerProbeJson(w)},
                   {"probe_json", probe.is_object() ? probe : nlohmann::json(nullptr)}});
  }
  return {{"workers", arr}};
}

}  // namespace xv::client
