// `make install PREFIX=` into a scratch prefix: the programs, the systemd units with the prefix
// filled in (and `systemd-analyze verify` finding nothing to say about them), xv-enable-workers
// (one xv-worker@N per GPU of a fake KFD topology; xv-worker@cpu without GPUs), examples and docs.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char templ[] = "/tmp/xv-install-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    prefix_ = new std::string(std::string(templ) + "/prefix");
    const char* bin = std::getenv("XV_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "XV_BINARY_DIR (ctest sets it)";
    install_ = new CommandResult(RunCommand({"make", "-C", SourcePath(""), "install",
                                             "PREFIX=" + *prefix_, std::string("BUILD_DIR=") + bin},
                                            600));
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (prefix_ != nullptr) fs::remove_all(fs::path(*prefix_).parent_path(), ec);
    delete prefix_;
    delete install_;
  }
  void SetUp() override {
    ASSERT_EQ(install_->exit_code, 0) << "make install failed:\n"
                                      << install_->out << "\n"
                                      << install_->err;
  }

  static std::string* prefix_;
  static CommandResult* install_;
};
std::string* InstallTest::prefix_ = nullptr;
CommandResult* InstallTest::install_ = nullptr;

TEST_F(InstallTest, ProgramsExamplesAndDocsAreInstalled) {
  for (const char* program : {"xvd", "xv-worker", "xvctl", "xv-train"}) {
    EXPECT_TRUE(Executable(*prefix_ + "/bin/" + program)) << program;
  }
  EXPECT_TRUE(Executable(*prefix_ + "/sbin/xv-enable-workers"));
  for (const char* file :
       {"share/xv/examples/xvd.example.yaml", "share/xv/examples/worker-config.example.yaml",
        "share/doc/xv/operations.md"}) {
    EXPECT_TRUE(fs::is_regular_file(*prefix_ + "/" + file)) << file;
  }
  CommandResult help = RunCommand({*prefix_ + "/bin/xvd", "--help"}, 30);
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("--config"), std::string::npos);
}

TEST_F(InstallTest, UnitsNameThePrefixAndPassSystemdAnalyzeVerify) {
  const std::string units = *prefix_ + "/lib/systemd/system";
  for (const char* unit : {"xvd.service", "xv-worker@.service"}) {
    const std::string text = ReadText(units + "/" + unit);
    ASSERT_FALSE(text.empty()) << unit;
    EXPECT_EQ(text.find("/usr/local/bin"), std::string::npos) << unit << ":\n" << text;
    EXPECT_NE(text.find(*prefix_ + "/bin/"), std::string::npos) << unit;
    for (const char* hardening :
         {"NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes"}) {
      EXPECT_NE(text.find(hardening), std::string::npos) << unit << " " << hardening;
    }
  }
  // The GPUs stay reachable for the workers: no private /dev, no device allow-list.
  const std::string worker = ReadText(units + "/xv-worker@.service");
  EXPECT_EQ(worker.find("\nPrivateDevices="), std::string::npos);
  EXPECT_EQ(worker.find("\nDevicePolicy="), std::string::npos);
  EXPECT_EQ(worker.find("\nMemoryDenyWriteExecute="), std::string::npos);

  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed (Debian package systemd)";
  }
  // An instance as well as the template: %i expands in the instance.
  const std::string instance = units + "/xv-worker@0.service";
  fs::copy_file(units + "/xv-worker@.service", instance, fs::copy_options::overwrite_existing);
  CommandResult verify = RunCommand({"systemd-analyze", "verify", units + "/xvd.service",
                                     units + "/xv-worker@.service", instance},
                                    120);
  fs::remove(instance);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  // verify exits 0 on unknown keys and bad values too, printing a warning naming the file.
  const std::string said = verify.out + verify.err;
  EXPECT_EQ(said.find(units), std::string::npos) << "systemd-analyze verify:\n" << said;
  EXPECT_EQ(said.find("xvd.service"), std::string::npos) << said;
  EXPECT_EQ(said.find("xv-worker@"), std::string::npos) << said;
}

TEST_F(InstallTest, EnableWorkersEnablesOneInstancePerGpu) {
  const std::string script = *prefix_ + "/sbin/xv-enable-workers";
  const std::string sysfs = fs::path(*prefix_).parent_path().string() + "/sys";
  // A KFD topology: a CPU node (gpu_id 0) and two AMD GPUs.
  for (const auto& [node, id] :
       {std::pair<const char*, const char*>{"0", "0"}, {"1", "4242"}, {"2", "5151"}}) {
    const std::string dir = sysfs + "/class/kfd/kfd/topology/nodes/" + node;
    fs::create_directories(dir);
    std::ofstream(dir + "/gpu_id") << id << "\n";
  }
  const std::vector<std::pair<std::string, std::string>> env = {{"XV_SYSFS_ROOT", sysfs},
                                                                {"PATH", "/usr/bin:/bin"}};
  CommandResult r = RunCommand({script, "--dry-run"}, 30, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("found 0 NVIDIA and 2 AMD GPU(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("systemctl enable --now xv-worker@0 xv-worker@1\n"), std::string::npos)
      << r.out;

  r = RunCommand({script, "--dry-run", "--no-now"}, 30,
                 {{"XV_SYSFS_ROOT", sysfs + "/none"}, {"PATH", "/usr/bin:/bin"}});
  EXPECT_NE(r.out.find("systemctl enable xv-worker@cpu\n"), std::string::npos) << r.out;

  r = RunCommand({script, "--dry-run"}, 30, {{"XV_GPU_COUNT", "3"}});
  EXPECT_NE(r.out.find("xv-worker@0 xv-worker@1 xv-worker@2\n"), std::string::npos) << r.out;

  r = RunCommand({script, "--bogus"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown argument '--bogus'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace xv::e2e
