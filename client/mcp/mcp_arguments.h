// The arguments of `xvctl mcp`'s submit tool, from JSON into the flags of `xvctl submit`
// (client/requests/submit_request.h), so an agent's submission is built exactly as the CLI builds
// one. Override values may be JSON values or YAML text: a string is taken verbatim as YAML scalar
// text, as on the command line ("0.03", "[0.8, 0.95]", "relu2"); a number, boolean, array or object
// is written as its JSON text, which YAML reads as the same value. Errors name the argument path
// ("arguments.candidates[1].matrix_lr: ...").
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "client/requests/submit_request.h"
#include "common/status.h"

namespace xv::client {

// One override value as YAML text (see above). InvalidArgument naming `field` for null.
Status OverrideValueText(const nlohmann::json& value, const std::string& field, std::string* out);

// {"k": v, "k2": v2} -> "k=v,k2=v2" (keys in the object's order), checked to read back through
// ParseCandidate as exactly these overrides: a string value whose commas or quotes would split or
// change it is refused naming its field. An empty object is refused.
Status OverrideMapText(const nlohmann::json& overrides, const std::string& field, std::string* out);

// The submit tool's arguments (an object whose top-level types the server checked against the
// tool's schema): recipe_path, campaign, set, candidates, sweep, replicates, round_kind, trainer,
// priority -> SubmitArgs. `set` is an object of overrides or a list of "k=v"; each candidate an
// object of overrides or a "k=v,k2=v2" string; `sweep` an object {knob: [values]} or a list of
// "k=v1,v2". Code candidates: source_paths and patch_paths (files on this machine) and sources
// and patches (the texts), lists of strings. Neither recipe_path nor campaign: InvalidArgument
// naming recipe_path.
Status SubmitArgsFromJson(const nlohmann::json& arguments, SubmitArgs* out);

}  // namespace xv::client
