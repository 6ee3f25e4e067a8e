// CampaignTimeBudgets: the time budget each campaign runs under, fetched from xvd once per
// campaign and cached, for the time-left estimates of `status` and `wait` (client/views/run_eta.h).
// Thread-safety: none; one owner. `client` must outlive it.
#pragma once

#include <cstdint>
#include <map>

#include "client/daemon_client.h"

namespace xv::client {

class CampaignTimeBudgets {
 public:
  explicit CampaignTimeBudgets(DaemonClient* client) : client_(client) {}

  // time_budget_s of the campaign's budget contract, else of its head recipe; 0 when unknown
  // (the campaign cannot be read, or neither says).
  double ForCampaign(int64_t campaign_id);
  // The experiment's own time_budget_s override, else its campaign's.
  double ForExperiment(const v1::Experiment& e);

 private:
  DaemonClient* client_;
  std::map<int64_t, double> budgets_;
};

}  // namespace xv::client
