// HTML escaping for the dashboard: every string that comes from the database (campaign and
// experiment names, knob values, failure text, stderr tails) goes through HtmlEscape before it
// reaches a page. Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace xv::daemon::web {

// `text` with & < > " ' replaced by character references, safe inside element content and inside
// double- or single-quoted attribute values. Invalid UTF-8 passes through unchanged (the browser
// shows replacement characters; it cannot open a tag).
std::string HtmlEscape(std::string_view text);

}  // namespace xv::daemon::web
