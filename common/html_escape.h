// HTML and SVG escaping: every string that comes from the database (campaign and experiment names,
// knob values, failure text, stderr tails) goes through HtmlEscape before it reaches a dashboard
// page or a plot (common/progress_plot.h, xvctl plot). Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace xv {

// `text` with & < > " ' replaced by character references, safe inside element content and inside
// double- or single-quoted attribute values. Invalid UTF-8 passes through unchanged (the browser
// shows replacement characters; it cannot open a tag).
std::string HtmlEscape(std::string_view text);

}  // namespace xv
