// The configuration files with the real programs: an xv-worker whose every option (daemon, data,
// name, device, trainer, work dir) comes from its --config file beside `trainers` registers with a
// real xvd and runs an experiment; a flag on the command line wins over the file; a bad key or
// value stops either program before it does anything, naming the file, the line and the key.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

using json = nlohmann::json;

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// The workers xvd knows, by name -> state.
std::map<std::string, std::string> WorkerStates(const Sandbox& sb) {
  std::map<std::string, std::string> states;
  json j = json::parse(sb.Xvctl({"workers", "--json"}, 30).out, nullptr, false);
  if (!j.is_object()) return states;
  for (const json& w : j["workers"]) states[w["name"]] = w["state"];
  return states;
}

TEST(ConfigFilesTest, AWorkerConfiguredOnlyByItsFileRegistersAndRuns) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  Sandbox sb("config-files");
  ChildGuard xvd;
  ASSERT_TRUE(sb.StartDaemon(&xvd));
  std::filesystem::create_directories(sb.data());
  const std::string config = WriteFile(sb.Path("worker.yaml"),
                                       "# every option of this worker\n"
                                       "daemon: " +
                                           sb.daemon() + "\n" + "data: " + sb.data() + "\n" +
                                           "name: from-file\n"
                                           "device: cpu\n"
                                           "trainer-bin: " +
                                           SourcePath("tests/fixtures/fake_trainer.sh") + "\n" +
                                           "work-dir: " + sb.work_dir("from-file") + "\n" +
                                           "kill-grace: 1\n"
                                           "trainers:\n"
                                           "  - name: libtorch\n"
                                           "    kind: libtorch\n");
  // The command line wins: this worker is called from-flag, not from-file.
  ChildGuard worker({BinaryPath("xv-worker"), "--config", config, "--name", "from-flag"}, {},
                    sb.Path("worker.log"));
  bool registered = false;
  for (int i = 0; i < 240 && !registered; ++i) {
    auto states = WorkerStates(sb);
    registered = states.count("from-flag") && states["from-flag"] != "offline";
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(registered) << "worker.log:\n" << FileTail(sb.Path("worker.log"));
  EXPECT_EQ(WorkerStates(sb).count("from-file"), 0u);

  CommandResult sub = sb.Xvctl(
      {"submit", SourcePath("recipes/cpu-tiny.yaml"), "--set", "time_budget_s=2", "--json"});
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  CommandResult waited = sb.Xvctl({"wait", "--timeout", "120"}, 180);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err << FileTail(sb.Path("worker.log"));
  CommandResult results = sb.Xvctl({"results", "--json"});
  EXPECT_NE(results.out.find("succeeded"), std::string::npos) << results.out;
  EXPECT_NE(results.out.find("from-flag"), std::string::npos) << results.out;
}

TEST(ConfigFilesTest, BadFilesStopBothProgramsNamingFileLineAndKey) {
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  Sandbox sb("config-refusals");
  const struct {
    const char* program;
    std::string yaml, expected;
  } cases[] = {
      {"xvd", "state-dir: " + sb.state() + "\nleas-ms: 3000\n",
       ":2: leas-ms: unknown key (did you mean 'lease-ms'?"},
      {"xvd", "state-dir: " + sb.state() + "\n\nlease-ms: 5\n",
       ":3: lease-ms: Value 5 not in range 100 to 3600000"},
      {"xv-worker", "data: " + sb.data() + "\nhealth-source: psychic\n", ":2: health-source: "},
      {"xv-worker", "trainers:\n  - {name: libtorch, kind: libtorch}\ndeamon: x\n",
       ":3: deamon: unknown key (did you mean 'daemon'?"},
      {"xv-worker", "name: w\n", "--data is required (on the command line or as 'data:' in "},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string path = WriteFile(sb.Path("bad" + std::to_string(n++) + ".yaml"), c.yaml);
    CommandResult r = RunCommand({BinaryPath(c.program), "--config", path}, 60);
    EXPECT_EQ(r.exit_code, 2) << c.program << " " << c.yaml << r.out << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.program << " with\n"
                                                         << c.yaml << "said:\n"
                                                         << r.err;
    if (c.expected[0] == ':') {
      EXPECT_NE(r.err.find(path + c.expected), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(sb.state() + "/xv.db")) << "xvd stopped before starting";
}

}  // namespace
}  // namespace xv::e2e
