// The dashboard's server-rendered HTML pages: overview, campaign, experiment and error pages.
// Self-contained (inline CSS and SVG, no external assets); complete without JavaScript. The
// overview carries one small inline script (with the response's CSP nonce) that refreshes its
// counts from /api/overview. Every database string is HTML-escaped.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/progress_plot.h"
#include "daemon/web/dashboard_reader.h"
#include "daemon/web/svg_plot.h"

namespace xv::daemon::web {

// `script_nonce`: the nonce the response's Content-Security-Policy allows for inline scripts.
std::string RenderOverviewPage(const OverviewData& data, const std::string& write_fault,
                               const std::string& script_nonce);
std::string RenderCampaignPage(const CampaignPageData& data);
std::string RenderExperimentPage(const ExperimentPageData& data);
// A page for 4xx/5xx answers; `message` is escaped.
std::string RenderErrorPage(int status, const std::string& reason, const std::string& message);

// The campaign's progress plot, the picture `xvctl plot` draws (common/progress_plot.h): running
// best over kept runs, kept changes annotated, crashes marked, outliers clipped.
ProgressPlot CampaignProgressPlot(const CampaignPageData& data);
// The campaign's val_bpb over rounds: one marker per finished run (x = the round's ordinal,
// 1-based, in creation order), kept candidates and head controls in their own series, and the
// head's value after each round as a line.
SvgPlot ValBpbOverRoundsPlot(const CampaignPageData& data);
// Training loss over steps of the experiment's current attempt.
SvgPlot LossCurvePlot(const ExperimentPageData& data);

}  // namespace xv::daemon::web
