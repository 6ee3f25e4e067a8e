// CampaignTable: campaigns, their heads and state (migrations/0002_campaign_rounds.sql).
// Threading contract: as Database; writes are one BEGIN IMMEDIATE transaction each.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/run_states.h"
#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"
#include "xv/v1/experiments.pb.h"

namespace xv::store {

// Which of a campaign's rounds and head changes a detailed read fills, so that a caller that
// needs a few of them never reads them all (a campaign of 100k experiments has thousands).
struct CampaignDetail {
  bool rounds = true;              // false: no rounds
  int newest_rounds = 0;           // > 0: only the newest this many rounds
  std::vector<int64_t> round_ids;  // non-empty: only these rounds (ids of other campaigns: none)
  int newest_head_changes = -1;    // -1: the whole head history; 0: none; N: the newest N
};

// A campaign's rounds counted in SQL.
struct RoundCounts {
  int64_t rounds = 0;
  int64_t open = 0;
};

class CampaignTable {
 public:
  explicit CampaignTable(Database* db) : db_(db) {}

  // Creates a campaign and its first head_history row. AlreadyExists when the name is taken.
  Status CreateCampaign(const NewCampaign& c, int64_t* id);
  // By id, or by name when id is 0. NotFound names what was asked. With `detail`, fills rounds
  // and head_history too.
  Status GetCampaign(int64_t id, const std::string& name, bool detail, xv::v1::Campaign* out);
  // As GetCampaign with detail, filling only the rounds and head changes `what` names (each list
  // oldest first, as GetCampaign's).
  Status GetCampaign(int64_t id, const std::string& name, const CampaignDetail& what,
                     xv::v1::Campaign* out);
  // Every campaign's round counts, by campaign id (campaigns without rounds are absent).
  Status CountRounds(std::map<int64_t, RoundCounts>* out);
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
