// Parsing of xvctl's override syntax: `--set key=value` and `--candidate "k=v,k2=v2"`. Values are
// YAML scalar text and may contain commas inside brackets or quotes ("adam_betas=[0.8, 0.95]").
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::client {

// "key=value" -> override. InvalidArgument naming `what` (e.g. "--set") when there is no '=' or the
// key is empty.
Status ParseOverride(const std::string& text, const std::string& what, v1::Override* out);

// "k=v,k2=v2" -> the overrides, in order, split by SplitCommaList (client/requests/comma_list.h):
// commas inside [] {} or quotes do not split; empty items ("k=v,") are skipped. InvalidArgument
// naming
// "--candidate" and the text when brackets or quotes are unbalanced or no override is left.
Status ParseCandidate(const std::string& text, std::vector<v1::Override>* out);

}  // namespace xv::client
