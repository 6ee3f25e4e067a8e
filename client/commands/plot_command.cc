// xvctl plot --campaign NAME|ID -o FILE.svg|FILE.png [--width W --height H]: upstream's progress
// plot of a campaign (common/progress_plot.h). A .png is converted from the SVG by rsvg-convert
// (librsvg) when it is on PATH; without it, a .png is refused naming the fix.
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <iostream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/views/progress_points.h"
#include "common/progress_plot.h"

extern char** environ;

namespace xv::client {
namespace {

struct PlotArgs {
  std::string campaign;
  std::string output;
  int width = 960;
  int height = 480;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IoError("-o " + path + ": cannot write the file");
  return Status::Ok();
}

// rsvg-convert -o PNG SVG; Unavailable when the converter is not on PATH.
Status ConvertToPng(const std::string& svg_path, const std::string& png_path) {
  std::vector<std::string> args = {"rsvg-convert", "-o", png_path, svg_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "rsvg-convert", nullptr, nullptr, argv.data(), environ) != 0) {
    return Status::Unavailable("-o " + png_path +
                               ": no rsvg-convert on PATH to make a PNG (install librsvg2-bin, "
                               "or write .svg); the SVG is at " +
                               svg_path);
  }
  int wstatus = 0;
  if (waitpid(pid, &wstatus, 0) != pid || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Internal("rsvg-convert failed to convert " + svg_path + " to " + png_path);
  }
  return Status::Ok();
}

int RunPlot(const PlotArgs& a, const ClientOptions& options) {
  const bool png = EndsWith(a.output, ".png");
  if (!png && !EndsWith(a.output, ".svg")) {
    return ReportError(Status::InvalidArgument("-o " + a.output + ": must end in .svg or .png"));
  }
  DaemonClient client(options);
  v1::Campaign campaign;
  Status st = client.GetCampaign(a.campaign, &campaign);
  if (!st.ok()) return ReportError(st);
  ExperimentFilter filter;
  filter.campaign = std::to_string(campaign.id());
  std::vector<v1::Experiment> rows;
  st = ListFromDaemon(&client, filter, &rows);
  if (!st.ok()) return ReportError(st);
  ProgressPlot plot = BuildCampaignProgressPlot(campaign.name(), rows);
  plot.width = a.width;
  plot.height = a.height;
  const std::string svg_path = png ? a.output.substr(0, a.output.size() - 4) + ".svg" : a.output;
  st = WriteFile(svg_path, RenderProgressSvg(plot));
  if (st.ok() && png) st = ConvertToPng(svg_path, a.output);
  if (!st.ok()) return ReportError(st);
  const ProgressCounts c = CountProgress(plot);
  std::cout << "wrote " << a.output << ": " << c.experiments << " experiments, " << c.kept
            << " kept, " << c.discarded << " discarded, " << c.crashed << " crashed" << std::endl;
  return kExitOk;
}

}  // namespace

void AddPlotCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* sub = app->add_subcommand(
      "plot", "a campaign's progress plot: running best, kept changes, failures (SVG or PNG)");
  sub->add_option("--campaign", args->campaign, "the campaign (name or id)")->required();
  sub->add_option("-o,--output", args->output, "FILE.svg, or FILE.png (needs rsvg-convert)")
      ->required();
  sub->add_option("--width", args->width, "pixels")
      ->check(CLI::Range(320, 8000))
      ->capture_default_str();
  sub->add_option("--height", args->height, "pixels")
      ->check(CLI::Range(240, 8000))
      ->capture_default_str();
  sub->callback([args, options] {
    int rc = RunPlot(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
