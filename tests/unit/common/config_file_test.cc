// common/config_file.h: a YAML file of flags applied to a CLI11 app the way xvd and xv-worker use
// it: every long flag is a key, the command line wins, bad keys and values name the file and line,
// required flags may come from the file.
#include "common/config_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/unit/fixtures/scoped_temp_dir.h"

namespace xv {
namespace {

// A small program shaped like xvd's and xv-worker's command lines.
struct Program {
  CLI::App app{"test program"};
  std::string config, state_dir = "default", listen = "127.0.0.1:7470", data;
  int lease_ms = 15000;
  double rate = 60.0;
  bool no_probe = false;
  std::vector<std::string> peers;
  std::string mode = "auto";

  Program() {
    app.name("prog");
    app.add_option("--config", config, "config file");
    app.add_option("--state-dir", state_dir, "state directory");
    app.add_option("--listen", listen, "address");
    app.add_option("--lease-ms", lease_ms, "lease")->check(CLI::Range(100, 3600 * 1000));
    app.add_option("--rate-limit", rate, "rate");
    app.add_flag("--no-probe", no_probe, "skip the probe");
    app.add_option("--peer", peers, "peers (several)");
    app.add_option("--mode", mode, "mode")->check(CLI::IsMember({"auto", "nvml", "none"}));
    app.add_option("--data", data, "data directory")->required();
  }

  // Parses argv (argv[0] = "prog") with the file rules; the exit code (-1: go on).
  int Parse(std::vector<std::string> args, const ConfigFileRules& rules = ConfigFileRules()) {
    args.insert(args.begin(), "prog");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return ParseCommandLineWithConfigFile(&app, static_cast<int>(argv.size()), argv.data(), rules);
  }

  // Parses `args` without a file, then applies `yaml` as file "f.yaml".
  Status ParseThenApply(const std::vector<std::string>& args, const std::string& yaml,
                        const ConfigFileRules& rules = ConfigFileRules()) {
    std::vector<std::string> all = {"prog", "--data", "d"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (const std::string& a : all) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return ApplyConfigYaml(&app, yaml, "f.yaml", rules);
  }
};

TEST(ConfigFileTest, EveryLongFlagIsAKeyOfItsOwnType) {
  Program p;
  Status s = p.ParseThenApply({},
                              "state-dir: /var/lib/xv\n"
                              "listen: 0.0.0.0:7470\n"
                              "lease-ms: 30000\n"
                              "rate-limit: 2.5\n"
                              "no-probe: true\n"
                              "peer: [a, b]\n"
                              "mode: nvml\n");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(p.state_dir, "/var/lib/xv");
  EXPECT_EQ(p.listen, "0.0.0.0:7470");
  EXPECT_EQ(p.lease_ms, 30000);
  EXPECT_DOUBLE_EQ(p.rate, 2.5);
  EXPECT_TRUE(p.no_probe);
  EXPECT_EQ(p.peers, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.mode, "nvml");
}

TEST(ConfigFileTest, TheCommandLineWinsOverTheFile) {
  Program p;
  Status s = p.ParseThenApply({"--lease-ms", "500", "--peer", "x"},
                              "lease-ms: 30000\npeer: [a, b]\nstate-dir: /srv/xv\n");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(p.lease_ms, 500);
  EXPECT_EQ(p.peers, (std::vector<std::string>{"x"}));
  EXPECT_EQ(p.state_dir, "/srv/xv");  // not on the command line: the file's
}

TEST(ConfigFileTest, FlagsThatTakeNoValueAcceptFalse) {
  Program p;
  Status s = p.ParseThenApply({}, "no-probe: false\n");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(p.no_probe);
}

// Each bad file is refused with "f.yaml:LINE: KEY: ..." and the words that say why.
TEST(ConfigFileTest, BadKeysAndValuesNameTheFileLineAndKey) {
  const struct {
    std::string yaml, expected;
  } cases[] = {
      {"state-dir: x\nleas-ms: 300\n", "f.yaml:2: leas-ms: unknown key (did you mean 'lease-ms'?"},
      {"lease_ms: 300\n", "f.yaml:1: lease_ms: unknown key (did you mean 'lease-ms'?"},
      {"bogus: 1\n", "f.yaml:1: bogus: unknown key (the keys are the long flags of prog --help"},
      {"\n\nlease-ms: 5\n", "f.yaml:3: lease-ms: Value 5 not in range 100 to 3600000"},
      {"lease-ms: soon\n", "f.yaml:1: lease-ms: "},
      {"mode: cuda\n", "f.yaml:1: mode: "},
      {"no-probe: maybe\n", "f.yaml:1: no-probe: "},
      {"listen: [a, b]\n", "f.yaml:1: listen: takes one value, the file gives a list of 2"},
      {"listen:\n", "f.yaml:1: listen: no value"},
      {"listen: {host: a}\n", "f.yaml:1: listen: must be a value or a list of values"},
      {"peer: [a, [b]]\n", "f.yaml:1: peer: a list item must be a plain value"},
      {"peer: []\n", "f.yaml:1: peer: an empty list"},
      {"listen: a\nlisten: b\n", "f.yaml:2: listen: given twice"},
      {"config: other.yaml\n", "f.yaml:1: config: not allowed in a config file"},
      {"help: true\n", "f.yaml:1: help: not allowed in a config file"},
      {"- a\n- b\n", "f.yaml:1: must be a mapping of flag names to values"},
      {"listen: [a\n", "f.yaml:2: invalid YAML"},
  };
  for (const auto& c : cases) {
    Program p;
    Status s = p.ParseThenApply({}, c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.yaml;
    EXPECT_NE(s.message().find(c.expected), std::string::npos)
        << "file:\n"
        << c.yaml << "message: " << s.message() << "\nexpected: " << c.expected;
  }
}

TEST(ConfigFileTest, AnEmptyFileChangesNothing) {
  Program p;
  ASSERT_TRUE(p.ParseThenApply({}, "# only a comment\n").ok());
  EXPECT_EQ(p.lease_ms, 15000);
  EXPECT_EQ(p.state_dir, "default");
}

TEST(ConfigFileTest, OtherKeysAreLeftToTheProgram) {
  Program p;
  ConfigFileRules rules;
  rules.other_keys = {"trainers"};
  Status s = p.ParseThenApply({}, "trainers:\n  - name: libtorch\nlease-ms: 200\n", rules);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(p.lease_ms, 200);
  Program q;
  EXPECT_FALSE(q.ParseThenApply({}, "trainers: []\n").ok());  // without the rule: unknown
}

TEST(ConfigFileTest, ARequiredFlagMayComeFromTheFileOrTheCommandLine) {
  testing::ScopedTempDir dir;
  testing::WriteBytes(dir.File("with-data.yaml"), "data: /srv/data\nlease-ms: 250\n");
  testing::WriteBytes(dir.File("without-data.yaml"), "lease-ms: 250\n");
  {
    Program p;
    EXPECT_EQ(p.Parse({"--config", dir.File("with-data.yaml")}), -1);
    EXPECT_EQ(p.data, "/srv/data");
    EXPECT_EQ(p.lease_ms, 250);
  }
  {
    Program p;
    EXPECT_EQ(p.Parse({"--config", dir.File("with-data.yaml"), "--data", "/mine"}), -1);
    EXPECT_EQ(p.data, "/mine");
  }
  {
    Program p;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(p.Parse({"--config", dir.File("without-data.yaml")}), 2);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("--data is required (on the command line or as 'data:' in "),
              std::string::npos)
        << err;
  }
  {
    Program p;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(p.Parse({}), 2);
    EXPECT_NE(::testing::internal::GetCapturedStderr().find("--data is required"),
              std::string::npos);
  }
}

TEST(ConfigFileTest, AFileThatCannotBeReadOrIsBadStopsTheProgram) {
  testing::ScopedTempDir dir;
  testing::WriteBytes(dir.File("bad.yaml"), "data: d\nlease-ms: 1\n");
  {
    Program p;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(p.Parse({"--config", dir.File("missing.yaml")}), 2);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("missing.yaml: cannot read the config file"), std::string::npos) << err;
  }
  {
    Program p;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(p.Parse({"--config", dir.File("bad.yaml")}), 2);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("prog: " + dir.File("bad.yaml") + ":2: lease-ms: Value 1 not in range"),
              std::string::npos)
        << err;
  }
  {
    Program p;  // --help still works, and exits 0
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(p.Parse({"--help"}), 0);
    EXPECT_NE(::testing::internal::GetCapturedStdout().find("--lease-ms"), std::string::npos);
  }
}

TEST(ConfigFileTest, LongFlagNamesListsEveryLongFlag) {
  Program p;
  const std::vector<std::string> names = LongFlagNames(p.app);
  for (const char* flag : {"--help", "--config", "--state-dir", "--no-probe", "--data"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), flag), names.end()) << flag;
  }
}

}  // namespace
}  // namespace xv
