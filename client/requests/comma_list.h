// The comma lists of xvctl's override flags: `--candidate "k=v,k2=v2"` and `--sweep k=v1,v2`.
// Items are YAML scalar text, so a comma splits only at the top level: not inside [] or {} (which
// must nest properly) and not inside '...' or "..." quotes ('' in single quotes and \" in double
// quotes, as in YAML, do not end the quote). One splitter serves both flags so they agree on what
// an item is. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace xv::client {

// `s` without leading and trailing spaces and tabs: how list items, keys and values are read.
std::string TrimBlanks(const std::string& s);

// Splits `text` at its top-level commas into *items, in order, each trimmed with TrimBlanks.
// Empty items are kept ("a,,b" -> {"a", "", "b"}; "" -> {""}): whether one is an error is the
// caller's rule. InvalidArgument "unbalanced brackets or quotes" (callers prefix the flag and
// text) when a quote is not closed, a bracket is not closed, a closing bracket has no opener, or
// a closing bracket does not match its opener ("[0.8, 0.95}"). On error *items is unchanged.
Status SplitCommaList(const std::string& text, std::vector<std::string>* items);

}  // namespace xv::client
