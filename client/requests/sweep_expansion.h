// Sweep expansion for `xvctl submit --sweep key=v1,v2,v3`: one candidate per value; several --sweep
// flags give the cartesian product (the first flag varies slowest). Values are YAML scalar text,
// split by SplitCommaList (client/requests/comma_list.h): commas inside [] {} or quotes do not
// split
// ("adam_betas=[0.8, 0.95],[0.9, 0.95]").
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::client {

// One --sweep flag: a knob and its values, in order.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

// "key=v1,v2,..." -> axis. InvalidArgument naming "--sweep" and the text when there is no '=', the
// key is empty, a value is empty, a value repeats, or brackets/quotes are unbalanced.
Status ParseSweep(const std::string& text, SweepAxis* out);

// At most this many candidates are expanded (the daemon's own limit per round, max_candidates, is
// usually lower and is checked there); a larger product is refused before it is built.
constexpr size_t kMaxSweepCandidates = 4096;

// The cartesian product of `sweeps` (each parsed with ParseSweep; a knob may appear in one flag
// only). Each element is one candidate's overrides, one per axis, in flag order. Empty input gives
// an empty output. InvalidArgument naming "--sweep" when the product exceeds kMaxSweepCandidates.
// On error *out is unchanged.
Status ExpandSweeps(const std::vector<std::string>& sweeps,
                    std::vector<std::vector<v1::Override>>* out);

}  // namespace xv::client
