#include "client/experiment_listing.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "client/numeric_ref.h"
#include "daemon/store/results_reader.h"

namespace xv::client {
namespace {

constexpr int kPageSize = 500;

using PageFetch =
    std::function<Status(const v1::ListExperimentsRequest&, std::vector<v1::Experiment>*)>;

// The `filter.limit` highest ids, in id order: newest-first pages of at most kPageSize, so the
// cost follows the limit, not the table.
Status ListNewest(const ExperimentFilter& filter, const PageFetch& fetch,
                  std::vector<v1::Experiment>* out) {
  int64_t before = 0;  // 0: from the newest
  while (static_cast<int>(out->size()) < filter.limit) {
    v1::ListExperimentsRequest req;
    ApplyFilter(filter, &req);
    req.set_descending(true);
    req.set_after_id(before);
    const int want = std::min(kPageSize, filter.limit - static_cast<int>(out->size()));
    req.set_limit(want);
    std::vector<v1::Experiment> page;
    XV_RETURN_IF_ERROR(fetch(req, &page));
    size_t taken = 0;
    for (auto& e : page) {
      if (before != 0 && e.id() >= before) continue;  // a server that ignores the order
      before = e.id();
      out->push_back(std::move(e));
      ++taken;
    }
    if (static_cast<int>(page.size()) < want || taken == 0) break;
  }
  if (static_cast<int>(out->size()) > filter.limit) out->resize(filter.limit);
  std::reverse(out->begin(), out->end());
  return Status::Ok();
}

Status ListPaged(const ExperimentFilter& filter,
                 const std::function<Status(const v1::ListExperimentsRequest&,
                                            std::vector<v1::Experiment>*)>& fetch,
                 std::vector<v1::Experiment>* out) {
  out->clear();
  if (filter.sort == "val_bpb") {
    // Offset pages in the server's val_bpb order.
    int offset = 0;
    while (true) {
      v1::ListExperimentsRequest req;
      ApplyFilter(filter, &req);
      req.set_order_by("val_bpb");
      req.set_limit(kPageSize);
      req.set_offset(offset);
      std::vector<v1::Experiment> page;
      XV_RETURN_IF_ERROR(fetch(req, &page));
      offset += static_cast<int>(page.size());
      for (auto& e : page) out->push_back(std::move(e));
      if (static_cast<int>(page.size()) < kPageSize) break;
      if (filter.limit > 0 && static_cast<int>(out->size()) >= filter.limit) break;
    }
    if (filter.limit > 0 && static_cast<int>(out->size()) > filter.limit) {
      out->resize(filter.limit);
    }
    return Status::Ok();
  }
  if (!filter.sort.empty() && filter.sort != "id") {
    return Status::InvalidArgument("--sort: must be id or val_bpb, got '" + filter.sort + "'");
  }
  if (filter.limit > 0) return ListNewest(filter, fetch, out);
  int64_t after = 0;
  while (true) {
    v1::ListExperimentsRequest req;
    ApplyFilter(filter, &req);
    req.set_limit(kPageSize);
    req.set_after_id(after);
    std::vector<v1::Experiment> page;
    XV_RETURN_IF_ERROR(fetch(req, &page));
    for (auto& e : page) {
      if (e.id() <= after) continue;  // a server that ignores after_id must not loop forever
      after = e.id();
      out->push_back(std::move(e));
    }
    if (static_cast<int>(page.size()) < kPageSize || page.empty()) break;
  }
  return Status::Ok();
}

// One page of `req` from the daemon, whole: a reply cut short by the daemon's size cap
// (truncated) is continued from its last row until `req.limit()` rows or the end.
Status FetchWholePage(DaemonClient* client, v1::ListExperimentsRequest req,
                      std::vector<v1::Experiment>* page) {
  page->clear();
  while (true) {
    v1::ListExperimentsResponse resp;
    XV_RETURN_IF_ERROR(client->ListExperiments(req, &resp));
    for (auto& e : *resp.mutable_experiments()) page->push_back(std::move(e));
    const int got = resp.experiments_size();
    if (!resp.truncated() || got == 0 || req.limit() - got <= 0) return Status::Ok();
    req.set_limit(req.limit() - got);
    if (req.order_by() == "val_bpb") {
      req.set_offset(req.offset() + got);
    } else {
      req.set_after_id(page->back().id());
    }
  }
}

}  // namespace

void ApplyFilter(const ExperimentFilter& filter, v1::ListExperimentsRequest* req) {
  if (!filter.campaign.empty()) {
    int64_t id = 0;
    if (ParseNumericRef(filter.campaign, &id)) {
      req->set_campaign_id(id);
    } else {
      req->set_campaign(filter.campaign);
    }
  }
  req->set_state(filter.state);
  req->set_decision(filter.decision);
}

Status ListFromDaemon(DaemonClient* client, const ExperimentFilter& filter,
                      std::vector<v1::Experiment>* out) {
  return ListPaged(
      filter,
      [client](const v1::ListExperimentsRequest& req, std::vector<v1::Experiment>* page) {
        return FetchWholePage(client, req, page);
      },
      out);
}

Status ListFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        std::vector<v1::Experiment>* out) {
  std::unique_ptr<store::ResultsReader> st;
  XV_RETURN_IF_ERROR(store::ResultsReader::Open(db_path, &st));
  return ListPaged(
      filter,
      [&st](const v1::ListExperimentsRequest& req, std::vector<v1::Experiment>* page) {
        return st->ListExperiments(req, page);
      },
      out);
}

}  // namespace xv::client
