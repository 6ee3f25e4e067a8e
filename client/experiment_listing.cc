#include "client/experiment_listing.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "client/numeric_ref.h"
#include "daemon/store/results_reader.h"

namespace xv::client {
namespace {

constexpr int kPageSize = 500;

// Fetches one request's rows; with `matching` non-null also the count of the request's matches
// past its cursor (-1 when unknown).
using PageFetch = std::function<Status(const v1::ListExperimentsRequest&,
                                       std::vector<v1::Experiment>*, int64_t* matching)>;

// The `filter.limit` ids next to `cursor` in one direction, in id order: descending, the highest
// below it (0: from the newest); ascending, the lowest above it. Pages of at most kPageSize, so the
// cost follows the limit, not the table. A server that ignores the cursor or the order cannot make
// it loop: only rows past the cursor are taken.
Status ListIdRange(const ExperimentFilter& filter, const PageFetch& fetch, bool descending,
                   int64_t cursor, std::vector<v1::Experiment>* out, int64_t* matching) {
  out->clear();
  const auto past_cursor = [&](int64_t id) {
    return descending ? cursor == 0 || id < cursor : id > cursor;
  };
  bool first = true;
  while (static_cast<int>(out->size()) < filter.limit) {
    v1::ListExperimentsRequest req;
    ApplyFilter(filter, &req);
    req.set_descending(descending);
    req.set_after_id(cursor);
    const int want = std::min(kPageSize, filter.limit - static_cast<int>(out->size()));
    req.set_limit(want);
    std::vector<v1::Experiment> page;
    XV_RETURN_IF_ERROR(fetch(req, &page, first ? matching : nullptr));
    first = false;
    size_t taken = 0;
    for (auto& e : page) {
      if (!past_cursor(e.id())) continue;
      cursor = e.id();
      out->push_back(std::move(e));
      ++taken;
    }
    if (static_cast<int>(page.size()) < want || taken == 0) break;
  }
  if (static_cast<int>(out->size()) > filter.limit) out->resize(filter.limit);
  if (descending) std::reverse(out->begin(), out->end());
  return Status::Ok();
}

Status ListPaged(const ExperimentFilter& filter, const PageFetch& fetch,
                 std::vector<v1::Experiment>* out, int64_t* matching = nullptr) {
  out->clear();
  if (filter.sort == "val_bpb") {
    // Offset pages in the server's val_bpb order.
    int offset = filter.offset;
    bool first = true;
    while (true) {
      v1::ListExperimentsRequest req;
      ApplyFilter(filter, &req);
      req.set_order_by("val_bpb");
      const int want = filter.limit > 0
                           ? std::min(kPageSize, filter.limit - static_cast<int>(out->size()))
                           : kPageSize;
      req.set_limit(want);
      req.set_offset(offset);
      std::vector<v1::Experiment> page;
      XV_RETURN_IF_ERROR(fetch(req, &page, first ? matching : nullptr));
      first = false;
      offset += static_cast<int>(page.size());
      for (auto& e : page) out->push_back(std::move(e));
      if (static_cast<int>(page.size()) < want) break;
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
  if (filter.limit > 0) {
    return ListIdRange(filter, fetch, /*descending=*/true, filter.before_id, out, matching);
  }
  if (filter.before_id > 0) {
    return Status::InvalidArgument("--before: pages need a page size (--limit), not --all");
  }
  int64_t after = 0;
  while (true) {
    v1::ListExperimentsRequest req;
    ApplyFilter(filter, &req);
    req.set_limit(kPageSize);
    req.set_after_id(after);
    std::vector<v1::Experiment> page;
    XV_RETURN_IF_ERROR(fetch(req, &page, nullptr));
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
// With `matching` non-null, the first request also asks the daemon to count the matches.
Status FetchWholePage(DaemonClient* client, v1::ListExperimentsRequest req,
                      std::vector<v1::Experiment>* page, int64_t* matching) {
  page->clear();
  while (true) {
    v1::ListExperimentsResponse resp;
    if (matching != nullptr) {
      XV_RETURN_IF_ERROR(client->ListExperiments(req, &resp, matching));
      matching = nullptr;
    } else {
      XV_RETURN_IF_ERROR(client->ListExperiments(req, &resp));
    }
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
  req->set_round_id(filter.round_id);
}

namespace {

PageFetch DaemonFetch(DaemonClient* client) {
  return [client](const v1::ListExperimentsRequest& req, std::vector<v1::Experiment>* page,
                  int64_t* matching) { return FetchWholePage(client, req, page, matching); };
}

PageFetch DatabaseFetch(store::ResultsReader* st) {
  return [st](const v1::ListExperimentsRequest& req, std::vector<v1::Experiment>* page,
              int64_t* matching) {
    if (matching != nullptr) XV_RETURN_IF_ERROR(st->CountExperiments(req, matching));
    return st->ListExperiments(req, page);
  };
}

// One page: the page's rows and one more, which tells whether more match.
Status ListOnePage(const ExperimentFilter& filter, const PageFetch& fetch, ExperimentPage* page) {
  *page = ExperimentPage();
  if (filter.limit < 0) return Status::InvalidArgument("--limit: must be >= 0");
  if (filter.offset < 0) return Status::InvalidArgument("--offset: must be >= 0");
  if (filter.before_id < 0) return Status::InvalidArgument("--before: must be an id > 0");
  const bool by_val_bpb = filter.sort == "val_bpb";
  if (by_val_bpb && filter.before_id > 0) {
    return Status::InvalidArgument("--before: pages id order; with --sort val_bpb use --offset");
  }
  if (!by_val_bpb && filter.offset > 0) {
    return Status::InvalidArgument("--offset: pages --sort val_bpb; in id order use --before");
  }
  ExperimentFilter f = filter;
  const int rows = filter.limit > 0 ? filter.limit : kDefaultPageRows;
  f.limit = rows + 1;
  if (filter.after_id > 0) {
    if (by_val_bpb || filter.before_id > 0) {
      return Status::InvalidArgument("after_id: pages id order upwards, without before or sort");
    }
    XV_RETURN_IF_ERROR(
        ListIdRange(f, fetch, /*descending=*/false, f.after_id, &page->rows, &page->matching));
    page->more = page->rows.size() > static_cast<size_t>(rows);
    if (page->more) {
      page->rows.resize(rows);  // lowest ids first: the extra row is the last
      page->next_after = page->rows.back().id();
    }
    return Status::Ok();
  }
  XV_RETURN_IF_ERROR(ListPaged(f, fetch, &page->rows, &page->matching));
  if (page->matching >= 0 && by_val_bpb) {
    page->matching = std::max<int64_t>(0, page->matching - filter.offset);
  }
  page->more = page->rows.size() > static_cast<size_t>(rows);
  if (!page->more) return Status::Ok();
  if (by_val_bpb) {
    page->rows.resize(rows);  // best first: the extra row is the last
    page->next_offset = filter.offset + rows;
  } else {
    page->rows.erase(page->rows.begin());  // oldest first: the extra row is the first
    page->next_before = page->rows.front().id();
  }
  return Status::Ok();
}

}  // namespace

Status PageFromDaemon(DaemonClient* client, const ExperimentFilter& filter, ExperimentPage* page) {
  return ListOnePage(filter, DaemonFetch(client), page);
}

Status PageFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        ExperimentPage* page) {
  std::unique_ptr<store::ResultsReader> st;
  XV_RETURN_IF_ERROR(store::ResultsReader::Open(db_path, &st));
  return ListOnePage(filter, DatabaseFetch(st.get()), page);
}

Status ListFromDaemon(DaemonClient* client, const ExperimentFilter& filter,
                      std::vector<v1::Experiment>* out) {
  return ListPaged(filter, DaemonFetch(client), out);
}

Status ListFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        std::vector<v1::Experiment>* out) {
  std::unique_ptr<store::ResultsReader> st;
  XV_RETURN_IF_ERROR(store::ResultsReader::Open(db_path, &st));
  return ListPaged(filter, DatabaseFetch(st.get()), out);
}

}  // namespace xv::client
