// Tests of SubmissionTable, CampaignTable and PlanTable: lookups by id or name, and a submission
// stored all or nothing.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <fstream>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/migration_runner.h"
#include "daemon/store/store.h"
#include "store_with_worker.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeFinished;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

using testing::QueryInt;
using testing::StoreWithWorker;

TEST(Lookup, CampaignsAndPlansByIdOrNameWithNotFoundNamingTheRequest) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  std::map<std::string, int64_t> campaign_ids;
  for (const char* name : {"lr", "wd"}) {
    NewCampaign nc;
    nc.name = name;
    nc.base_hash = std::string("base-") + name;
    nc.base_recipe_json = R"({"depth":2})";
    nc.base_resolved_json = R"({"depth":2,"model_dim":128})";
    ASSERT_TRUE(store->campaigns().CreateCampaign(nc, &campaign_ids[name]).ok());
  }
  xv::v1::Campaign c;
  ASSERT_TRUE(store->campaigns().GetCampaign(0, "wd", false, &c).ok());
  EXPECT_EQ(c.id(), campaign_ids["wd"]);
  ASSERT_TRUE(store->campaigns().GetCampaign(campaign_ids["lr"], "", true, &c).ok());
  EXPECT_EQ(c.name(), "lr");
  EXPECT_EQ(c.head_history_size(), 1);
  Status s = store->campaigns().GetCampaign(99, "", false, &c);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "campaign id 99: no such campaign");
  s = store->campaigns().SetCampaignState(0, "nope", CampaignState::kPaused);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "campaign 'nope': no such campaign");
  std::vector<xv::v1::Campaign> campaigns;
  ASSERT_TRUE(store->campaigns().ListCampaigns(&campaigns).ok());
  ASSERT_EQ(campaigns.size(), 2u);
  EXPECT_EQ(campaigns[1].name(), "wd");

  // Plan names may repeat: by name is the newest.
  std::vector<int64_t> plan_ids;
  for (const char* name : {"nightly", "nightly", "other"}) {
    StoredPlan plan;
    plan.campaign_id = campaign_ids["lr"];
    plan.name = name;
    plan.yaml = "phases: []\n";
    ASSERT_TRUE(store->plans().InsertPlan(plan, &plan_ids.emplace_back()).ok());
  }
  StoredPlan plan;
  ASSERT_TRUE(store->plans().GetPlan(0, "nightly", &plan).ok());
  EXPECT_EQ(plan.id, plan_ids[1]);
  EXPECT_EQ(plan.campaign, "lr");
  ASSERT_TRUE(store->plans().GetPlan(plan_ids[0], "", &plan).ok());
  EXPECT_EQ(plan.name, "nightly");
  EXPECT_EQ(plan.state, PlanState::kRunning);
  s = store->plans().GetPlan(99, "", &plan);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "plan id 99: no such plan");
  s = store->plans().GetPlan(0, "nope", &plan);
  EXPECT_EQ(s.message(), "plan 'nope': no such plan");
  std::vector<StoredPlan> plans;
  ASSERT_TRUE(store->plans().ListPlans("", &plans).ok());
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[2].name, "other");
  plans.clear();
  ASSERT_TRUE(store->plans().ListPlans("done", &plans).ok());
  EXPECT_TRUE(plans.empty());
}

TEST(Submission, AllRowsOrNoneAndRecipesDeduplicated) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  NewSubmission sub = MakeSubmission(3);
  sub.experiments[2].device_requirement = "tpu";  // violates the CHECK constraint
  SubmissionIds ids;
  EXPECT_FALSE(store->submissions().InsertSubmission(sub, &ids).ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM experiments"), 0);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM rounds"), 0);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), 0);
  // Two submissions of the same configs share recipe rows but get their own rounds.
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids).ok());
  SubmissionIds ids2;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids2).ok());
  EXPECT_EQ(ids.campaign_id, ids2.campaign_id);
  EXPECT_NE(ids.round_id, ids2.round_id);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), 3);  // base + 2
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM experiments"), 4);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM events WHERE type = 'submit'"), 2);
  std::string integrity;
  ASSERT_TRUE(store->database().IntegrityCheck(&integrity).ok());
  EXPECT_EQ(integrity, "ok");
}

}  // namespace
}  // namespace xv::store
