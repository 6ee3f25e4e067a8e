// CampaignTable: campaigns, their heads and state (migrations/0002_campaign_rounds.sql).
// Threading contract: as Database; writes are one BEGIN IMMEDIATE transaction each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/run_states.h"
#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"
#include "xv/v1/experiments.pb.h"

namespace xv::store {

class CampaignTable {
 public:
  explicit CampaignTable(Database* db) : db_(db) {}

  // Creates a campaign and its first head_history row. AlreadyExists when the name is taken.
  Status CreateCampaign(const NewCampaign& c, int64_t* id);
  // By id, or by name when id is 0. NotFound names what was asked. With `detail`, fills rounds
  // and head_history too.
  Status GetCampaign(int64_t id, const std::string& name, bool detail, xv::v1::Campaign* out);
  Status ListCampaigns(std::vector<xv::v1::Campaign>* out);
  // state: kActive or kPaused (InvalidArgument otherwise). NotFound as GetCampaign.
  Status SetCampaignState(int64_t id, const std::string& name, CampaignState state);
  // *found = false when no campaign has this name.
  Status FindCampaignHead(const std::string& name, bool* found, CampaignHead* out);
  // The largest seed of any experiment of the campaign (*any = false when it has none), so that
  // confirm rounds can run fresh seeds.
  Status MaxCampaignSeed(int64_t campaign_id, bool* any, int64_t* max_seed);

 private:
  Database* db_;
};

}  // namespace xv::store
