#include "daemon/engine/campaign_policy.h"

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"

namespace xv::daemon {
namespace {

// Takes the daemon's own keys out of `node` (a mapping) into *out.
Status TakeDaemonKeys(YAML::Node node, CampaignPolicy* out) {
  if (node["decide"]) {
    const YAML::Node d = node["decide"];
    const std::string v = d.IsScalar() ? d.Scalar() : "";
    if (v != "auto" && v != "manual") {
      return Status::InvalidArgument("policy: decide: must be auto or manual, got '" + v + "'");
    }
    out->manual = v == "manual";
    node.remove("decide");
  }
  if (node["pool_head_runs"]) {
    const YAML::Node p = node["pool_head_runs"];
    bool value = false;
    if (!p.IsScalar() || !YAML::convert<bool>::decode(p, value)) {
      return Status::InvalidArgument("policy: pool_head_runs: must be true or false");
    }
    out->pool_head_runs = value;
    node.remove("pool_head_runs");
  }
  return Status::Ok();
}

}  // namespace

Status ParseCampaignPolicyText(const std::string& text, CampaignPolicy* out) {
  CampaignPolicy p;
  p.set = true;
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("policy: ") + e.what());
  }
  std::string rest;
  if (node.IsMap()) {
    XV_RETURN_IF_ERROR(TakeDaemonKeys(node, &p));
    YAML::Emitter emitter;
    emitter << YAML::Flow << node;
    rest = node.size() == 0 ? "" : emitter.c_str();
  } else if (!node.IsNull()) {
    return Status::InvalidArgument("policy: must be a mapping of fields");
  }
  XV_RETURN_IF_ERROR(sched::ParseAcceptancePolicyYaml(rest, &p.acceptance).WithContext("policy: "));
  *out = p;
  return Status::Ok();
}

Status ParseStoredCampaignPolicy(const std::string& json_text, CampaignPolicy* out) {
  nlohmann::json j = ParseBoundedJsonOrDiscarded(json_text.empty() ? "{}" : json_text);
  if (!j.is_object()) return Status::InvalidArgument("policy_json: not a JSON object");
  CampaignPolicy p;
  if (j.empty()) {
    *out = p;
    return Status::Ok();
  }
  p.set = true;
  if (j.contains("decide")) {
    p.manual = j["decide"] == "manual";
    j.erase("decide");
  }
  if (j.contains("pool_head_runs")) {
    p.pool_head_runs = j["pool_head_runs"].is_boolean() && j["pool_head_runs"].get<bool>();
    j.erase("pool_head_runs");
  }
  XV_RETURN_IF_ERROR(
      sched::ParseAcceptancePolicyJson(j, &p.acceptance).WithContext("policy_json: "));
  *out = p;
  return Status::Ok();
}

std::string CampaignPolicyToJson(const CampaignPolicy& policy) {
  if (!policy.set) return "{}";
  nlohmann::json j = sched::AcceptancePolicyToJson(policy.acceptance);
  j["decide"] = policy.manual ? "manual" : "auto";
  j["pool_head_runs"] = policy.pool_head_runs;
  return j.dump();
}

}  // namespace xv::daemon
