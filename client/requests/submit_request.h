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
// required (the daemon builds from its head). InvalidArgument naming the flag on bad input.
Status BuildSubmitRequest(const SubmitArgs& args, v1::SubmitRequest* req);

// `submit --json`: {"campaign_id", "round_id", "experiment_ids"}.
nlohmann::json SubmitResponseJson(const v1::SubmitResponse& resp);

}  // namespace xv::client
