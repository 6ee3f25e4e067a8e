#include "daemon/web/dashboard_json.h"

#include <cmath>

#include <google/protobuf/util/json_util.h>

namespace xv::daemon::web {
namespace {

using nlohmann::json;

json OptionalNumber(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}

}  // namespace

json MessageJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, opts).ok()) return nullptr;
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

std::optional<double> MeasuredMfuPercent(const xv::v1::Result& r) {
  if (r.measured_peak_flops() <= 0 || r.flops_per_token() <= 0 || !(r.tok_per_sec() > 0)) {
    return std::nullopt;
  }
  return 100.0 * static_cast<double>(r.flops_per_token()) * r.tok_per_sec() /
         r.measured_peak_flops();
}

json OverviewJson(const OverviewData& data, const std::string& write_fault) {
  json j;
  j["experiments_by_state"] = data.experiments_by_state;
  auto queued = data.experiments_by_state.find("queued");
  j["queue_depth"] = queued == data.experiments_by_state.end() ? 0 : queued->second;
  j["read_only_mode"] = !write_fault.empty();
  j["write_fault"] = write_fault;
  json workers = json::array();
  for (const WorkerView& w : data.workers) {
    json wj = MessageJson(w.info);
    wj["heartbeat_age_s"] = OptionalNumber(w.heartbeat_age_s);
    workers.push_back(std::move(wj));
  }
  j["workers"] = std::move(workers);
  json campaigns = json::array();
  for (const CampaignSummary& c : data.campaigns) {
    json cj = MessageJson(c.campaign);
    cj["rounds"] = c.rounds;
    cj["open_rounds"] = c.open_rounds;
    cj["head_candidate"] = c.head_candidate;
    cj["head_experiment_id"] = c.head_experiment_id;
    cj["head_val_bpb"] = OptionalNumber(c.head_val_bpb);
    cj["head_changed_at"] = c.head_changed_at;
    campaigns.push_back(std::move(cj));
  }
  j["campaigns"] = std::move(campaigns);
  j["campaigns_omitted"] = data.campaigns_omitted;  // older campaigns not listed
  json recent = json::array();
  for (const auto& e : data.recent) recent.push_back(MessageJson(e));
  j["recent_experiments"] = std::move(recent);
  return j;
}

json CampaignJson(const CampaignPageData& data) {
  json j;
  j["campaign"] = MessageJson(data.campaign);
  json decisions = json::array();
  for (const auto& r : data.campaign.rounds()) {
    if (r.decision_json().empty()) continue;
    json d = json::parse(r.decision_json(), nullptr, false);
    decisions.push_back({{"round_id", r.id()},
                         {"summary", r.decision_summary()},
                         {"kept_candidate", r.kept_candidate()},
                         {"decision", d.is_discarded() ? json(r.decision_json()) : d}});
  }
  j["decisions"] = std::move(decisions);
  json experiments = json::array();
  for (const auto& e : data.experiments) experiments.push_back(MessageJson(e));
  j["experiments"] = std::move(experiments);
  // A page of the campaign's experiments: older ones follow when experiments_truncated;
  // GET /api/campaigns/ID?before=<next_before>&limit=<limit> is the next page.
  j["experiments_truncated"] = data.experiments_truncated;
  j["experiments_total"] = data.experiments_total;
  j["next_before"] = data.experiments_truncated ? json(data.next_before) : json(nullptr);
  j["before"] = data.query.before_id > 0 ? json(data.query.before_id) : json(nullptr);
  j["limit"] = data.query.limit;
  j["rounds_omitted"] = data.rounds_omitted;  // older rounds not in campaign.rounds
  return j;
}

json ExperimentJson(const ExperimentPageData& data) {
  json j;
  const xv::v1::Experiment& e = data.experiment;
  j["experiment"] = MessageJson(e);
  json overrides = json::parse(e.overrides_json(), nullptr, false);
  j["knobs"] = overrides.is_discarded() ? json(e.overrides_json()) : overrides;
  json figures = nullptr;
  if (e.has_result()) {
    const xv::v1::Result& r = e.result();
    figures = {
        {"val_bpb", OptionalNumber(r.val_bpb())},
        {"tok_per_sec", OptionalNumber(r.tok_per_sec())},
        {"mfu_percent", r.mfu_percent() < 0 ? json(nullptr) : json(r.mfu_percent())},
        {"mfu_peak_flops", r.peak_flops() > 0 ? json(r.peak_flops()) : json(nullptr)},
        {"mfu_peak_flops_source", r.peak_flops_source()},
        {"mfu_measured_percent", OptionalNumber(MeasuredMfuPercent(r))},
        {"measured_peak_flops",
         r.measured_peak_flops() > 0 ? json(r.measured_peak_flops()) : json(nullptr)},
        {"peak_vram_mb", OptionalNumber(r.peak_vram_mb())},
        {"peak_reserved_mb", OptionalNumber(r.peak_reserved_mb())},
        {"energy_j", r.health().has_energy_j() ? json(r.health().energy_j()) : json(nullptr)},
        {"avg_power_w",
         r.health().has_avg_power_w() ? json(r.health().avg_power_w()) : json(nullptr)}};
  }
  j["figures"] = std::move(figures);
  json curve = json::array();
  for (const CurvePoint& p : data.loss_curve) {
    curve.push_back({{"step", p.step},
                     {"loss", OptionalNumber(p.loss)},
                     {"tok_per_sec", OptionalNumber(p.tok_per_sec)}});
  }
  j["loss_curve"] = std::move(curve);
  j["metric_rows"] = data.metric_rows;
  json latest = nullptr;  // the current attempt's latest step row
  if (data.latest) {
    latest = {{"step", data.latest->step},
              {"loss", OptionalNumber(data.latest->loss)},
              {"tok_per_sec", OptionalNumber(data.latest->tok_per_sec)},
              {"mfu_percent", OptionalNumber(data.latest->mfu_percent)},
              {"progress", OptionalNumber(data.latest->progress)}};
  }
  j["latest_step"] = std::move(latest);
  return j;
}

}  // namespace xv::daemon::web
