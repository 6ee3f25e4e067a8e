// xv-train: the LibTorch GPT trainer (docs/events.md: command line, events, exit codes).
//   xv-train [train] (--recipe FILE.yaml | --recipe-json FILE.json) --data DIR [--set K=V ...]
//            [--device auto|cpu|cuda] [--save CKPT] [--init-from CKPT]
//   xv-train fingerprint [--device ...]
//   xv-train probe [--recipe FILE.yaml] [--device ...]
//   xv-train verify ...
// LibTorch's c10::Error and every std::exception are caught here and turned into an `error` event
// and an exit code.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "common/recipe.h"
#include "trainer/device/compute_device.h"
#include "trainer/device/device_fingerprint.h"
#include "trainer/device/device_probe.h"
#include "trainer/events/event_writer.h"
#include "trainer/events/exit_codes.h"
#include "trainer/train/recipe_loader.h"
#include "trainer/train/train_command.h"
#include "trainer/verify/verify_command.h"

namespace xv::trainer {
namespace {

bool LooksLikeOutOfMemory(const std::string& what) {
  return what.find("out of memory") != std::string::npos ||
         what.find("OutOfMemory") != std::string::npos;
}

// Parses `args` (without the subcommand) with `app`; on failure writes the usage error.
// Returns -1 to continue, or the exit code.
int Parse(CLI::App& app, std::vector<std::string> args, EventWriter* events) {
  std::reverse(args.begin(), args.end());  // CLI11 consumes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return ReportFailure(events, kExitInvalidConfig,
                         std::string(e.what()) + " (xv-train " + app.get_name() + " --help)");
  }
  return -1;
}

int RunTrain(const std::vector<std::string>& args, double start_time, EventWriter* events) {
  CLI::App app("Train a GPT recipe for its time budget; events on stdout.", "train");
  TrainCommandOptions o;
  o.start_time = start_time;
  app.add_option("--recipe", o.recipe_path, "recipe YAML");
  app.add_option("--recipe-json", o.recipe_json_path, "recipe JSON (the worker's spec)");
  app.add_option("--data", o.data_dir, "data directory made by xvctl prepare")->required();
  app.add_option("--set", o.sets, "KEY=VALUE override (repeatable)");
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N (default: the recipe's)");
  app.add_option("--save", o.save_path, "write the final weights (safetensors)");
  app.add_option("--init-from", o.init_from, "start from these weights (safetensors)");
  if (int rc = Parse(app, args, events); rc >= 0) return rc;
  return RunTrainCommand(o, events);
}

int RunFingerprint(const std::vector<std::string>& args, EventWriter* events) {
  CLI::App app("Print the device fingerprint as one JSON object.", "fingerprint");
  std::string device = "auto";
  app.add_option("--device", device, "auto | cpu | cuda | cuda:N");
  if (int rc = Parse(app, args, events); rc >= 0) return rc;
  ComputeDevice d;
  if (Status s = SelectComputeDevice(device, &d); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  std::printf("%s\n", DeviceFingerprint(d).dump().c_str());
  return kExitOk;
}

int RunProbe(const std::vector<std::string>& args, EventWriter* events) {
  CLI::App app("Measure matmul TFLOP/s, attention time and bandwidth (JSON).", "probe");
  std::string device = "auto", recipe_path;
  std::vector<std::string> sets;
  app.add_option("--device", device, "auto | cpu | cuda | cuda:N");
  app.add_option("--recipe", recipe_path,
                 "recipe YAML for the attention shapes (default: built-in)");
  app.add_option("--set", sets, "KEY=VALUE override (repeatable)");
  if (int rc = Parse(app, args, events); rc >= 0) return rc;
  Recipe recipe;
  if (!recipe_path.empty() || !sets.empty()) {
    Status s = recipe_path.empty() ? Status::Ok() : LoadRecipe(recipe_path, "", sets, &recipe);
    if (recipe_path.empty()) {
      for (const auto& kv : sets) {
        size_t eq = kv.find('=');
        if (s.ok() && eq != std::string::npos)
          s = ApplyOverride(kv.substr(0, eq), kv.substr(eq + 1), &recipe);
      }
    }
    if (!s.ok()) return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  ResolvedSizes sizes;
  if (Status s = ResolveSizes(recipe, &sizes); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  ComputeDevice d;
  if (Status s = SelectComputeDevice(device, &d); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  std::printf("%s\n", RunDeviceProbe(d, recipe, sizes).dump().c_str());
  return kExitOk;
}

int Dispatch(int argc, char** argv, double start_time, EventWriter* events) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command = "train";
  if (!args.empty() && args[0].rfind("-", 0) != 0) {
    command = args[0];
    args.erase(args.begin());
  }
  if (command == "train") return RunTrain(args, start_time, events);
  if (command == "fingerprint") return RunFingerprint(args, events);
  if (command == "probe") return RunProbe(args, events);
  if (command == "verify") return RunVerifyCommand(argc - 1, argv + 1);
  return ReportFailure(
      events, kExitInvalidConfig,
      "unknown command '" + command + "' (expected train, fingerprint, probe or verify)");
}

}  // namespace
}  // namespace xv::trainer

int main(int argc, char** argv) {
  using namespace xv::trainer;
  const double start_time = UnixSecondsNow();
  EventWriter events(stdout);
  try {
    return Dispatch(argc, argv, start_time, &events);
  } catch (const c10::OutOfMemoryError& e) {
    return ReportFailure(&events, kExitOutOfMemory, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    return ReportFailure(&events, LooksLikeOutOfMemory(what) ? kExitOutOfMemory : kExitCrash,
                         "LibTorch: " + what);
  } catch (const std::bad_alloc&) {
    return ReportFailure(&events, kExitOutOfMemory, "host out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return ReportFailure(&events, LooksLikeOutOfMemory(e.what()) ? kExitOutOfMemory : kExitCrash,
                         e.what());
  }
}
