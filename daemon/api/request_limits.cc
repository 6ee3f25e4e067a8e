#include "daemon/api/request_limits.h"

#include "common/run_states.h"
#include "daemon/store/source_table.h"

#include <map>
#include <utility>

#include <google/protobuf/descriptor.h>

namespace xv::daemon {
namespace {

// Every experiment state's name (common/run_states.h), in order.
std::vector<std::string> ExperimentStateNames() {
  std::vector<std::string> names;
  for (int i = 0; !ToString(static_cast<ExperimentState>(i)).empty(); ++i) {
    names.emplace_back(ToString(static_cast<ExperimentState>(i)));
  }
  return names;
}

// "" (no filter) and `names`.
std::vector<std::string> WithEmpty(std::vector<std::string> names) {
  names.insert(names.begin(), "");
  return names;
}

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr bool kName = true;
constexpr bool kText = false;

// The accepted words of an enum-like field, for its error: "queued, assigned, ... (or empty)".
std::string DescribeAllowed(const std::vector<std::string>& allowed) {
  std::string words;
  bool empty_allowed = false;
  for (const std::string& w : allowed) {
    if (w.empty()) {
      empty_allowed = true;
      continue;
    }
    if (!words.empty()) words += ", ";
    words += w;
  }
  return words + (empty_allowed ? " (or empty)" : "");
}

Status CheckOneField(const RequestFieldLimit& limit, const std::string& path,
                     const std::string& value) {
  XV_RETURN_IF_ERROR(CheckTextField(path, value, limit.max_bytes, limit.is_name));
  if (limit.allowed.empty()) return Status::Ok();
  for (const std::string& w : limit.allowed) {
    if (value == w) return Status::Ok();
  }
  return Status::InvalidArgument(path + ": " + QuoteExcerpt(value) + " is not one of " +
                                 DescribeAllowed(limit.allowed));
}

// Walks `m` (a part of the request `request_name` at `path`/`pattern`).
Status CheckMessageFields(const Message& m, const std::string& request_name,
                          const std::string& path, const std::string& pattern) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string field_path = path.empty() ? f->name() : path + "." + f->name();
    const std::string field_pattern = pattern.empty() ? f->name() : pattern + "." + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      const RequestFieldLimit* found =
          FindRequestFieldLimit(request_name, field_pattern + (f->is_repeated() ? "[]" : ""));
      const RequestFieldLimit fallback{"", "", kMaxDetailBytes, kText, {}};
      const RequestFieldLimit& limit = found != nullptr ? *found : fallback;
      std::string scratch;
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j) {
          XV_RETURN_IF_ERROR(CheckOneField(limit, field_path + "[" + std::to_string(j) + "]",
                                           r->GetRepeatedStringReference(m, f, j, &scratch)));
        }
      } else {
        XV_RETURN_IF_ERROR(CheckOneField(limit, field_path, r->GetStringReference(m, f, &scratch)));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j) {
          XV_RETURN_IF_ERROR(CheckMessageFields(r->GetRepeatedMessage(m, f, j), request_name,
                                                field_path + "[" + std::to_string(j) + "]",
                                                field_pattern + "[]"));
        }
      } else if (r->HasField(m, f)) {
        XV_RETURN_IF_ERROR(
            CheckMessageFields(r->GetMessage(m, f), request_name, field_path, field_pattern));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const std::vector<RequestFieldLimit>& RequestFieldLimits() {
  static const std::vector<RequestFieldLimit>* const kTable = new std::vector<RequestFieldLimit>{
      // Experiments
      {"SubmitRequest", "recipe_yaml", kMaxRecipeTextBytes, kText, {}},
      {"SubmitRequest", "recipe_name", kMaxNameBytes, kName, {}},
      {"SubmitRequest", "candidates[].name", kMaxNameBytes, kName, {}},
      {"SubmitRequest", "candidates[].overrides[].key", kMaxKindBytes, kName, {}},
      {"SubmitRequest", "candidates[].overrides[].value", kMaxOverrideValueBytes, kText, {}},
      // Code candidates (issue 16): a train.py or a diff, bounded as a stored source.
      {"SubmitRequest", "candidates[].source", store::kMaxSourceBytes, kText, {}},
      {"SubmitRequest", "candidates[].patch", store::kMaxSourceBytes, kText, {}},
      {"SubmitRequest", "campaign", kMaxNameBytes, kName, {}},
      {"SubmitRequest", "trainer", kMaxKindBytes, kName, {}},
      {"SubmitRequest", "submitter", kMaxNameBytes, kName, {}},
      {"SubmitRequest",
       "kind",
       kMaxKindBytes,
       kName,
       {"", "candidates", "sweep", "ablation", "confirm"}},
      {"ListExperimentsRequest", "state", kMaxKindBytes, kName, WithEmpty(ExperimentStateNames())},
      {"ListExperimentsRequest", "campaign", kMaxNameBytes, kName, {}},
      {"ListExperimentsRequest",
       "decision",
       kMaxKindBytes,
       kName,
       {"", "keep", "discard", "pending", "control"}},
      {"ListExperimentsRequest", "order_by", kMaxKindBytes, kName, {"", "id", "val_bpb"}},
      {"WatchRequest", "campaign", kMaxNameBytes, kName, {}},
      {"WatchRequest", "kinds[]", kMaxKindBytes, kName, {}},
      {"DrainWorkerRequest", "worker", kMaxNameBytes, kName, {}},
      {"DrainWorkerRequest", "reason", kMaxDetailBytes, kText, {}},
      // Campaigns
      {"CreateCampaignRequest", "name", kMaxNameBytes, kName, {}},
      {"CreateCampaignRequest", "base_recipe_yaml", kMaxRecipeTextBytes, kText, {}},
      {"CreateCampaignRequest", "recipe_name", kMaxNameBytes, kName, {}},
      {"CreateCampaignRequest", "policy", kMaxPolicyTextBytes, kText, {}},
      {"CreateCampaignRequest", "device_filter", kMaxNameBytes, kName, {}},
      {"CreateCampaignRequest", "trainer", kMaxKindBytes, kName, {}},
      {"CreateCampaignRequest", "budget_json", kMaxBudgetJsonBytes, kText, {}},
      {"GetCampaignRequest", "name", kMaxNameBytes, kName, {}},
      {"DecideRequest", "reason", kMaxDetailBytes, kText, {}},
      {"FailureSummaryRequest", "campaign", kMaxNameBytes, kName, {}},
      // Plans
      {"SubmitPlanRequest", "yaml", kMaxPlanYamlBytes, kText, {}},
      {"SubmitPlanRequest", "base_recipe_yaml", kMaxRecipeTextBytes, kText, {}},
      {"SubmitPlanRequest", "policy", kMaxPolicyTextBytes, kText, {}},
      {"SubmitPlanRequest", "submitter", kMaxNameBytes, kName, {}},
      {"GetPlanRequest", "name", kMaxNameBytes, kName, {}},
      {"ListPlansRequest",
       "state",
       kMaxKindBytes,
       kName,
       {"", "running", "paused", "done", "failed", "cancelled"}},
  };
  return *kTable;
}

const RequestFieldLimit* FindRequestFieldLimit(const std::string& request,
                                               const std::string& field) {
  static const auto* const kIndex = [] {
    auto* index = new std::map<std::pair<std::string, std::string>, const RequestFieldLimit*>();
    for (const RequestFieldLimit& row : RequestFieldLimits()) {
      (*index)[{row.request, row.field}] = &row;
    }
    return index;
  }();
  auto it = kIndex->find({request, field});
  return it == kIndex->end() ? nullptr : it->second;
}

Status CheckRequestLimits(const Message& request) {
  return CheckMessageFields(request, request.GetDescriptor()->name(), "", "");
}

}  // namespace xv::daemon
