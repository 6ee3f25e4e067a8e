#include "client/campaign_time_budgets.h"

#include <string>

#include "client/views/run_eta.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::client {
namespace {

double TimeBudgetIn(const std::string& json_text) {
  const nlohmann::json j = ParseBoundedJsonOrDiscarded(json_text);
  if (j.is_object() && j.contains("time_budget_s") && j["time_budget_s"].is_number()) {
    return j["time_budget_s"].get<double>();
  }
  return 0;
}

}  // namespace

double CampaignTimeBudgets::ForCampaign(int64_t campaign_id) {
  auto it = budgets_.find(campaign_id);
  if (it != budgets_.end()) return it->second;
  double budget = 0;
  v1::Campaign campaign;
  if (campaign_id > 0 && client_->GetCampaignSummary(std::to_string(campaign_id), &campaign).ok()) {
    budget = TimeBudgetIn(campaign.budget_json());
    if (!(budget > 0)) budget = TimeBudgetIn(campaign.head_recipe_json());
  }
  budgets_[campaign_id] = budget;
  return budget;
}

double CampaignTimeBudgets::ForExperiment(const v1::Experiment& e) {
  return ExperimentTimeBudget(e, ForCampaign(e.campaign_id()));
}

}  // namespace xv::client
