// ResultsReader: the database opened read-only for xvctl when no xvd answers (`xvctl results`,
// `xvctl campaign show|list`, `xvctl results --failures`). It answers only the reads xvctl needs,
// through the store's own query classes (no SQL of its own), and can run beside a live xvd
// because the database is in WAL mode. The one store header code outside daemon/ includes.
// Threading contract: as Database (every method may be called from any thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::store {

class Store;

class ResultsReader {
 public:
  // Opens the existing database at `path` read-only. Fails when it does not exist, or has no or a
  // newer schema than this binary.
  static Status Open(const std::string& path, std::unique_ptr<ResultsReader>* out);
  ~ResultsReader();
  ResultsReader(const ResultsReader&) = delete;
  ResultsReader& operator=(const ResultsReader&) = delete;

  // As ExperimentQueries::ListExperiments: the filters of `req`, ordered by id.
  Status ListExperiments(const xv::v1::ListExperimentsRequest& req,
                         std::vector<xv::v1::Experiment>* out);
  // As ExperimentQueries::CountExperiments: the rows of `req`'s page and every page after it.
  Status CountExperiments(const xv::v1::ListExperimentsRequest& req, int64_t* out);
  // As ExperimentQueries::GetExperiment: NotFound when no experiment has this id.
  Status GetExperiment(int64_t id, xv::v1::Experiment* out);
  // As CampaignTable::GetCampaign: by id, or by name when id is 0; `detail` adds rounds and head
  // history.
  Status GetCampaign(int64_t id, const std::string& name, bool detail, xv::v1::Campaign* out);
  // As CampaignTable::ListCampaigns.
  Status ListCampaigns(std::vector<xv::v1::Campaign>* out);
  // As ExperimentQueries::FailureSummary: campaign_id 0 and name "" = every campaign.
  Status FailureSummary(int64_t campaign_id, const std::string& name,
                        std::vector<xv::v1::KnobFailure>* out);

 private:
  explicit ResultsReader(std::unique_ptr<Store> store);
  std::unique_ptr<Store> store_;
};

}  // namespace xv::store
