// ResultsReader: xvctl's read-only reads through the store's query classes. See results_reader.h.
#include "daemon/store/results_reader.h"

#include <utility>

#include "daemon/store/store.h"

namespace xv::store {

ResultsReader::ResultsReader(std::unique_ptr<Store> store) : store_(std::move(store)) {}
ResultsReader::~ResultsReader() = default;

Status ResultsReader::Open(const std::string& path, std::unique_ptr<ResultsReader>* out) {
  std::unique_ptr<Store> store;
  XV_RETURN_IF_ERROR(Store::OpenReadOnly(path, &store));
  out->reset(new ResultsReader(std::move(store)));
  return Status::Ok();
}

Status ResultsReader::ListExperiments(const xv::v1::ListExperimentsRequest& req,
                                      std::vector<xv::v1::Experiment>* out) {
  return store_->experiments().ListExperiments(req, out);
}

Status ResultsReader::CountExperiments(const xv::v1::ListExperimentsRequest& req, int64_t* out) {
  return store_->experiments().CountExperiments(req, out);
}

Status ResultsReader::GetExperiment(int64_t id, xv::v1::Experiment* out) {
  return store_->experiments().GetExperiment(id, out);
}

Status ResultsReader::GetCampaign(int64_t id, const std::string& name, bool detail,
                                  xv::v1::Campaign* out) {
  return store_->campaigns().GetCampaign(id, name, detail, out);
}

Status ResultsReader::ListCampaigns(std::vector<xv::v1::Campaign>* out) {
  return store_->campaigns().ListCampaigns(out);
}

Status ResultsReader::FailureSummary(int64_t campaign_id, const std::string& name,
                                     std::vector<xv::v1::KnobFailure>* out) {
  return store_->experiments().FailureSummary(campaign_id, name, out);
}

}  // namespace xv::store
