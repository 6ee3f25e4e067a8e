#include "client/requests/submit_request.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/requests/candidate_spec.h"
#include "client/requests/sweep_expansion.h"
#include "common/text_file.h"

namespace xv::client {
namespace {

// "k=v,k2=v2" for a candidate's own overrides.
std::string CandidateName(const std::vector<v1::Override>& own) {
  std::string name;
  for (const auto& o : own) name += (name.empty() ? "" : ",") + o.key() + "=" + o.value();
  return name;
}

// xvd's bound on a source and on a patch (daemon/store/source_table.h kMaxSourceBytes).
constexpr int64_t kMaxCodeFileBytes = 512 * 1024;

// One code candidate per --source and per --patch file (issue 16), each with the --set overrides;
// the daemon names them "source:<sha256 prefix>".
Status AddCodeCandidates(const SubmitArgs& a, const std::vector<v1::Override>& base,
                         v1::SubmitRequest* req) {
  for (const auto& [flag, paths] :
       {std::pair<const char*, const std::vector<std::string>*>{"--source", &a.sources},
        {"--patch", &a.patches}}) {
    for (const std::string& path : *paths) {
      std::string text;
      XV_RETURN_IF_ERROR(ReadRegularFile(path, kMaxCodeFileBytes, &text)
                             .WithContext(std::string(flag) + " " + path + ": "));
      v1::Candidate* cand = req->add_candidates();
      for (const auto& o : base) *cand->add_overrides() = o;
      if (std::string(flag) == "--source") {
        cand->set_source(std::move(text));
      } else {
        cand->set_patch(std::move(text));
      }
    }
  }
  for (const std::string& text : a.source_texts) {
    v1::Candidate* cand = req->add_candidates();
    for (const auto& o : base) *cand->add_overrides() = o;
    cand->set_source(text);
  }
  for (const std::string& text : a.patch_texts) {
    v1::Candidate* cand = req->add_candidates();
    for (const auto& o : base) *cand->add_overrides() = o;
    cand->set_patch(text);
  }
  return Status::Ok();
}

}  // namespace

Status BuildSubmitRequest(const SubmitArgs& a, v1::SubmitRequest* req) {
  if (a.recipe_path.empty()) {
    if (a.campaign.empty()) {
      return Status::InvalidArgument(
          "RECIPE: give a recipe file, or --campaign NAME to build candidates from its head");
    }
  } else {
    std::ifstream f(a.recipe_path, std::ios::binary);
    if (!f) return Status::InvalidArgument(a.recipe_path + ": cannot read the recipe file");
    std::stringstream text;
    text << f.rdbuf();
    req->set_recipe_yaml(text.str());
    req->set_recipe_name(std::filesystem::path(a.recipe_path).stem().string());
  }
  req->set_kind(a.kind);
  if (a.replicates < 1) {
    return Status::InvalidArgument("--replicates: must be >= 1, got " +
                                   std::to_string(a.replicates));
  }
  req->set_replicates(a.replicates);
  req->set_campaign(a.campaign);
  req->set_trainer(a.trainer);
  req->set_priority(a.priority);
  const char* user = ::getenv("USER");
  req->set_submitter(std::string("xvctl") + (user ? " (" + std::string(user) + ")" : ""));

  // --set changes the base recipe: its overrides come first in every candidate, so a candidate's
  // own overrides win. The candidate keeps its own name ("matrix_lr=0.03").
  std::vector<v1::Override> base;
  for (const auto& s : a.sets) {
    v1::Override o;
    XV_RETURN_IF_ERROR(ParseOverride(s, "--set", &o));
    base.push_back(o);
  }
  std::vector<std::vector<v1::Override>> owns;
  for (const auto& c : a.candidates) {
    std::vector<v1::Override> own;
    XV_RETURN_IF_ERROR(ParseCandidate(c, &own));
    owns.push_back(std::move(own));
  }
  std::vector<std::vector<v1::Override>> swept;
  XV_RETURN_IF_ERROR(ExpandSweeps(a.sweeps, &swept));
  for (auto& own : swept) owns.push_back(std::move(own));
  if (!a.sweeps.empty() && a.kind.empty() && a.candidates.empty()) req->set_kind("sweep");
  for (const auto& own : owns) {
    v1::Candidate* cand = req->add_candidates();
    cand->set_name(CandidateName(own));
    for (const auto& o : base) *cand->add_overrides() = o;
    for (const auto& o : own) *cand->add_overrides() = o;
  }
  const bool code =
      !a.sources.empty() || !a.patches.empty() || !a.source_texts.empty() || !a.patch_texts.empty();
  if (owns.empty() && !base.empty() && !code) {
    v1::Candidate* cand = req->add_candidates();
    for (const auto& o : base) *cand->add_overrides() = o;
  }
  return AddCodeCandidates(a, base, req);
}

nlohmann::json SubmitResponseJson(const v1::SubmitResponse& resp) {
  return {{"campaign_id", resp.campaign_id()},
          {"round_id", resp.round_id()},
          {"experiment_ids",
           std::vector<int64_t>(resp.experiment_ids().begin(), resp.experiment_ids().end())}};
}

}  // namespace xv::client
