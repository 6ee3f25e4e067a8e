#include "daemon/api/campaigns_service.h"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "common/run_states.h"
#include "daemon/api/grpc_status.h"
#include "daemon/api/reply_caps.h"
#include "daemon/api/request_limits.h"
#include "daemon/engine/budget_contract.h"
#include "daemon/engine/campaign_policy.h"

namespace xv::daemon {

namespace {

// The `xv-campaign-rounds` request metadata of GetCampaign (reply_caps.h) as a CampaignDetail.
Status ParseCampaignRoundsMetadata(const grpc::ServerContext& ctx, store::CampaignDetail* what) {
  *what = store::CampaignDetail();
  const auto& md = ctx.client_metadata();
  const auto it = md.find(kCampaignRoundsMetadata);
  if (it == md.end()) return Status::Ok();
  const std::string value(it->second.data(), it->second.size());
  const auto bad = [&value](const std::string& why) {
    return Status::InvalidArgument(std::string(kCampaignRoundsMetadata) + " metadata: " + why +
                                   " (got '" + value.substr(0, 60) +
                                   "'; send none or ids:ID,ID,...)");
  };
  what->newest_head_changes = 0;
  if (value == "none") {
    what->rounds = false;
    return Status::Ok();
  }
  if (value.rfind("ids:", 0) != 0) return bad("unknown form");
  size_t pos = 4;
  while (pos <= value.size()) {
    const size_t comma = std::min(value.find(',', pos), value.size());
    const std::string part = value.substr(pos, comma - pos);
    if (part.empty() || part.size() > 18 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      return bad("a round id is not a positive integer");
    }
    what->round_ids.push_back(std::stoll(part));
    if (what->round_ids.size() > static_cast<size_t>(kMaxCampaignRoundIds)) {
      return bad("more than " + std::to_string(kMaxCampaignRoundIds) + " round ids");
    }
    pos = comma + 1;
  }
  return Status::Ok();  // an id of another campaign's round matches none
}

}  // namespace

CampaignsService::CampaignsService(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
                                   SubmissionLimits limits)
    : store_(store), dispatcher_(dispatcher), closer_(closer), limits_(limits) {}

grpc::Status CampaignsService::CreateCampaign(grpc::ServerContext* ctx,
                                              const xv::v1::CreateCampaignRequest* req,
                                              xv::v1::Campaign* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/CreateCampaign");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "CreateCampaign"); !limited.ok()) {
    return limited;
  }
  if (Status s = CheckRequestLimits(*req); !s.ok()) {
    spdlog::info("campaign create refused ({}): {}", ctx->peer(),
                 BoundedStatusMessage(s.message()));
    return ToGrpcStatus(s);
  }
  if (req->name().empty()) return ToGrpcStatus(Status::InvalidArgument("name: empty"));
  if (req->base_recipe_yaml().empty()) {
    return ToGrpcStatus(
        Status::InvalidArgument("base_recipe_yaml: empty (send the recipe file's text)"));
  }
  if (req->base_recipe_yaml().size() > limits_.max_recipe_bytes) {
    return ToGrpcStatus(Status::InvalidArgument(
        "base_recipe_yaml: " + std::to_string(req->base_recipe_yaml().size()) +
        " bytes, over the limit of " + std::to_string(limits_.max_recipe_bytes)));
  }
  for (char c : req->trainer()) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return ToGrpcStatus(Status::InvalidArgument("trainer: " + QuoteExcerpt(req->trainer()) +
                                                  " is not a trainer name (letters, digits, - _ "
                                                  ". only)"));
    }
  }
  Recipe base;
  Status s = ParseRecipeYaml(req->base_recipe_yaml(), &base).WithContext("recipe: ");
  // The budget contract's time budget becomes the base recipe's before it is validated and
  // hashed, so the base, the head and every run of the campaign use it.
  BudgetContract budget;
  if (s.ok()) s = ParseBudgetContract(req->budget_json(), &budget);
  if (s.ok() && budget.time_budget_s) base.time_budget_s = *budget.time_budget_s;
  // The metric contract: val_bpb's context length and token count are pinned for the campaign.
  if (s.ok()) PinContractMetric(&budget, &base.sequence_len, &base.eval_tokens);
  if (s.ok()) s = ValidateRecipe(base).WithContext("recipe: ");
  ResolvedSizes sizes;
  if (s.ok()) s = ResolveSizes(base, &sizes).WithContext("recipe: ");
  CampaignPolicy policy;
  if (s.ok()) s = ParseCampaignPolicyText(req->policy(), &policy);
  if (s.ok() && req->max_attempts() != 0 && (req->max_attempts() < 1 || req->max_attempts() > 10)) {
    s = Status::InvalidArgument("max_attempts: must be 1..10, got " +
                                std::to_string(req->max_attempts()));
  }
  if (!s.ok()) return ToGrpcStatus(s);
  store::NewCampaign nc;
  nc.max_attempts = req->max_attempts() == 0 ? 2 : req->max_attempts();
  nc.name = req->name();
  nc.recipe_name = req->recipe_name();
  nc.trainer = req->trainer().empty() ? "libtorch" : req->trainer();
  nc.policy_json = CampaignPolicyToJson(policy);
  nc.device_filter = req->device_filter();
  nc.budget_json = BudgetContractToJson(budget);
  nc.base_hash = CanonicalHash(base);
  nc.base_recipe_json = RecipeToJson(base).dump();
  nc.base_resolved_json = ResolvedConfigJson(base, sizes).dump();
  int64_t id = 0;
  s = store_->campaigns().CreateCampaign(nc, &id);
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("campaign '{}' created (id {})", nc.name, id);
  return ToGrpcStatus(store_->campaigns().GetCampaign(id, "", true, resp));
}

grpc::Status CampaignsService::GetCampaign(grpc::ServerContext* ctx,
                                           const xv::v1::GetCampaignRequest* req,
                                           xv::v1::Campaign* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/GetCampaign");
      !denied.ok()) {
    return denied;
  }
  if (Status s = CheckRequestLimits(*req); !s.ok()) return ToGrpcStatus(s);
  store::CampaignDetail what;
  if (Status s = ParseCampaignRoundsMetadata(*ctx, &what); !s.ok()) return ToGrpcStatus(s);
  Status s = store_->campaigns().GetCampaign(req->id(), req->name(), what, resp);
  if (!s.ok()) return ToGrpcStatus(s);
  // A campaign of many rounds: its newest rounds and head changes, within the cap.
  int64_t omitted = TrimRowsToReplyCap(*resp, resp->mutable_head_history(), KeepRows::kLast,
                                       kMaxListReplyBytes / 4);
  omitted += TrimRowsToReplyCap(*resp, resp->mutable_rounds(), KeepRows::kLast);
  NoteRowsOmitted(ctx, omitted);
  return grpc::Status::OK;
}

grpc::Status CampaignsService::ListCampaigns(grpc::ServerContext* ctx,
                                             const xv::v1::ListCampaignsRequest*,
                                             xv::v1::ListCampaignsResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/ListCampaigns");
      !denied.ok()) {
    return denied;
  }
  std::vector<xv::v1::Campaign> found;
  Status s = store_->campaigns().ListCampaigns(&found);
  if (!s.ok()) return ToGrpcStatus(s);
  for (auto& c : found) *resp->add_campaigns() = std::move(c);
  NoteRowsOmitted(ctx, TrimRowsToReplyCap(*resp, resp->mutable_campaigns(), KeepRows::kLast));
  return grpc::Status::OK;
}

grpc::Status CampaignsService::SetState(const xv::v1::GetCampaignRequest& req, CampaignState state,
                                        xv::v1::Campaign* resp) {
  Status s = CheckRequestLimits(req);
  if (!s.ok()) return ToGrpcStatus(s);
  s = store_->campaigns().SetCampaignState(req.id(), req.name(), state);
  if (!s.ok()) return ToGrpcStatus(s);
  if (state == CampaignState::kActive) dispatcher_->RequestSchedule();
  return ToGrpcStatus(store_->campaigns().GetCampaign(req.id(), req.name(), false, resp));
}

grpc::Status CampaignsService::PauseCampaign(grpc::ServerContext* ctx,
                                             const xv::v1::GetCampaignRequest* req,
                                             xv::v1::Campaign* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/PauseCampaign");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "PauseCampaign"); !limited.ok()) {
    return limited;
  }
  return SetState(*req, CampaignState::kPaused, resp);
}

grpc::Status CampaignsService::ResumeCampaign(grpc::ServerContext* ctx,
                                              const xv::v1::GetCampaignRequest* req,
                                              xv::v1::Campaign* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/ResumeCampaign");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "ResumeCampaign"); !limited.ok()) {
    return limited;
  }
  return SetState(*req, CampaignState::kActive, resp);
}

grpc::Status CampaignsService::Decide(grpc::ServerContext* ctx, const xv::v1::DecideRequest* req,
                                      xv::v1::RoundInfo* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/Decide");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "Decide"); !limited.ok()) {
    return limited;
  }
  Status s = CheckRequestLimits(*req);
  if (!s.ok()) return ToGrpcStatus(s);
  s = closer_->DecideManually(req->round_id(), req->keep_experiment_id(), req->reason());
  if (!s.ok()) return ToGrpcStatus(s);
  store::RoundToDecide round;
  RoundState state = RoundState::kOpen;
  int unfinished = 0;
  s = store_->rounds().GetRoundState(req->round_id(), &round, &state, &unfinished);
  if (!s.ok()) return ToGrpcStatus(s);
  xv::v1::Campaign campaign;
  s = store_->campaigns().GetCampaign(round.campaign_id, "", true, &campaign);
  if (!s.ok()) return ToGrpcStatus(s);
  for (const auto& r : campaign.rounds()) {
    if (r.id() == req->round_id()) *resp = r;
  }
  return grpc::Status::OK;
}

grpc::Status CampaignsService::FailureSummary(grpc::ServerContext* ctx,
                                              const xv::v1::FailureSummaryRequest* req,
                                              xv::v1::FailureSummaryResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Campaigns/FailureSummary");
      !denied.ok()) {
    return denied;
  }
  Status s = CheckRequestLimits(*req);
  if (!s.ok()) return ToGrpcStatus(s);
  std::vector<xv::v1::KnobFailure> knobs;
  s = store_->experiments().FailureSummary(req->campaign_id(), req->campaign(), &knobs);
  if (!s.ok()) return ToGrpcStatus(s);
  for (auto& k : knobs) *resp->add_knobs() = std::move(k);
  NoteRowsOmitted(ctx, TrimRowsToReplyCap(*resp, resp->mutable_knobs(), KeepRows::kFirst));
  return grpc::Status::OK;
}

}  // namespace xv::daemon
