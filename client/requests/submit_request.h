// SubmitRequest building for `xvctl submit`: the recipe file (or none: the campaign head), --set,
// --candidate and --sweep flags into one v1::SubmitRequest. Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::client {

// The flags of `xvctl submit`.

struct SubmitArgs {
  std::string recipe_path;
  std::vector<std::string> sets;
  std::vector<std::string> candidates;
  std::vector<std::string> sweeps;
  std::vector<std::string> sources;  // --source FILE: a whole train.py per candidate (issue 16)
  std::vector<std::string> patches;  // --patch FILE: a unified diff per candidate
  std::vector<std::string> source_texts;  // as --source, the text itself (the MCP submit tool)
  std::vector<std::string> patch_texts;   // as --patch, the diff itself
  std::string kind;
  int replicates = 1;
  std::string campaign;
  std::string trainer;
  int priority = 0;
  bool json = false;
};

// Fills `req`. --set overrides come first in every candidate; candidates are the --candidate flags
// in order, then the --sweep product (ExpandSweeps); each candidate is named by its own overrides
// ("matrix_lr=0.03"). Without --candidate/--sweep, --set makes one candidate. --sweep alone makes a
// round of kind "sweep" unless --round-kind says otherwise. Without a recipe file, --campaign is
// required (the daemon builds from its head). Code candidates (issue 16) come last: one per
// --source FILE (Candidate.source, the file's text) and per --patch FILE (Candidate.patch), then
// per source_texts and patch_texts entry, each with the --set overrides; with them, --set alone
// makes no extra candidate. InvalidArgument naming the flag on bad input (a file that is not a
// readable regular file of <= 512 KiB).
Status BuildSubmitRequest(const SubmitArgs& args, v1::SubmitRequest* req);

// `submit --json`: {"campaign_id", "round_id", "experiment_ids"}.
nlohmann::json SubmitResponseJson(const v1::SubmitResponse& resp);

}  // namespace xv::client
