// deploy/slurm/xv-workers.sbatch under a real Slurm: the test starts a one-node slurmctld + slurmd
// in a temporary directory (auth/none, two fake GPUs as GRES so that --gpus-per-task=1 binds one
// to each task), a real xvd on 127.0.0.1, and sbatches the script with two tasks of CPU workers
// running the fake trainer. Both workers register under slurm-JOBID-TASK, an experiment runs on one
// of them, and `scancel` (SIGTERM to the tasks, as at the time limit) ends the job cleanly: the
// workers exit, the batch script says so, xvd sees them go offline.
//
// Skipped, saying why, when not root or Slurm (Debian's slurm-wlm, deploy/install-deps.sh) is not
// installed or does not start here.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A TCP port nothing listens on right now.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool WaitUntil(const std::function<bool()>& done, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return done();
}

// One slurmctld and one slurmd (node "xvnode", 2 CPUs, 2 GRES gpus) in `dir`.
class OneNodeSlurm {
 public:
  explicit OneNodeSlurm(const std::string& dir) : dir_(dir) {}
  ~OneNodeSlurm() {
    for (const char* pid_file : {"/slurmd.pid", "/slurmctld.pid"}) {
      const pid_t pid = std::atoi(ReadText(dir_ + pid_file).c_str());
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      WaitUntil([pid] { return ::kill(pid, 0) != 0; }, 20);
      if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
    }
  }

  // "" when both daemons run and the node is idle; else why not (with their logs).
  std::string Start() {
    fs::create_directories(dir_ + "/ctld");
    fs::create_directories(dir_ + "/d");
    std::ofstream(dir_ + "/slurm.conf")
        << "ClusterName=xvtest\n"
        << "SlurmctldHost=localhost(127.0.0.1)\n"
        << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
        << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/none\nCredType=cred/none\n"
        << "StateSaveLocation=" << dir_ << "/ctld\nSlurmdSpoolDir=" << dir_ << "/d\n"
        << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\nSlurmdPidFile=" << dir_
        << "/slurmd.pid\n"
        << "SlurmctldLogFile=" << dir_ << "/slurmctld.log\nSlurmdLogFile=" << dir_
        << "/slurmd.log\n"
        << "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSwitchType=switch/none\n"
        << "MpiDefault=none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        << "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
        << "JobAcctGatherType=jobacct_gather/none\nReturnToService=2\nKillWait=30\n"
        << "GresTypes=gpu\n"
        << "NodeName=xvnode NodeAddr=127.0.0.1 CPUs=2 RealMemory=100 Gres=gpu:2 State=UNKNOWN\n"
        << "PartitionName=xv Nodes=xvnode Default=YES MaxTime=INFINITE State=UP\n";
    // Two "GPUs" Slurm can hand out: any device files do for the binding.
    std::ofstream(dir_ + "/gres.conf") << "AutoDetect=off\n"
                                       << "NodeName=xvnode Name=gpu File=/dev/null\n"
                                       << "NodeName=xvnode Name=gpu File=/dev/zero\n";
    CommandResult ctld = RunCommand({"/usr/sbin/slurmctld", "-i"}, 60, env());
    if (ctld.exit_code != 0) return "slurmctld did not start: " + ctld.err + Logs();
    CommandResult d = RunCommand({"/usr/sbin/slurmd", "-N", "xvnode"}, 60, env());
    if (d.exit_code != 0) return "slurmd did not start: " + d.err + Logs();
    std::string last;
    if (!WaitUntil(
            [&] {
              last = RunCommand({"sinfo", "-h", "-o", "%T"}, 30, env()).out;
              return last.find("idle") != std::string::npos;
            },
            60)) {
      return "the node did not become idle within 60 s (sinfo: " + last + ")" + Logs();
    }
    return "";
  }

  std::vector<std::pair<std::string, std::string>> env() const {
    return {{"SLURM_CONF", dir_ + "/slurm.conf"}};
  }
  std::string Logs() const {
    return "\n--- slurmctld.log\n" + ReadText(dir_ + "/slurmctld.log") + "\n--- slurmd.log\n" +
           ReadText(dir_ + "/slurmd.log");
  }

 private:
  std::string dir_;
};

TEST(SlurmWorkersTest, SbatchRunsOneWorkerPerGpuThatEndsCleanlyOnSigterm) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run slurmctld and slurmd";
  for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch"}) {
    if (::access(bin, X_OK) != 0) {
      GTEST_SKIP() << bin << " is not installed (Debian package slurm-wlm; deploy/install-deps.sh)";
    }
  }
  ASSERT_TRUE(Sandbox::BinariesBuilt());
  Sandbox sb("slurm");
  OneNodeSlurm slurm(sb.Path("slurm"));
  const std::string why = slurm.Start();
  if (!why.empty()) GTEST_SKIP() << "Slurm cannot run on this machine: " << why;

  ChildGuard xvd;
  ASSERT_TRUE(sb.StartDaemon(&xvd, {"--listen", "127.0.0.1:0", "--http", "off"}));
  ASSERT_TRUE(WaitForPath(sb.state() + "/xvd.port", 30));
  const std::string port = std::to_string(std::atoi(ReadText(sb.state() + "/xvd.port").c_str()));
  fs::create_directories(sb.data());

  auto env = slurm.env();
  const std::string bin_dir = fs::path(BinaryPath("xv-worker")).parent_path().string();
  const std::string job_out = sb.Path("job.out");
  CommandResult submitted =
      RunCommand({"sbatch", "--parsable", "--ntasks=2", "--cpus-per-task=1", "--time=10",
                  "--output=" + job_out, "--chdir=" + sb.dir().string(),
                  "--export=ALL,XV_DAEMON=127.0.0.1:" + port + ",XV_DATA=" + sb.data() +
                      ",XV_DEVICE=cpu,XV_BIN_DIR=" + bin_dir +
                      ",XV_WORK_ROOT=" + sb.Path("slurm-work") + ",XV_WORKER_ARGS=--trainer-bin " +
                      SourcePath("tests/fixtures/fake_trainer.sh") + " --kill-grace 1",
                  SourcePath("deploy/slurm/xv-workers.sbatch")},
                 60, env);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err << slurm.Logs();
  const std::string job = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
  const std::string names[] = {"slurm-" + job + "-0", "slurm-" + job + "-1"};
  auto logs = [&] {
    return "\n--- job.out\n" + ReadText(job_out) + "\n--- xvd.log\n" +
           ReadText(sb.Path("xvd.log")) + slurm.Logs();
  };

  // Both workers register under their Slurm names.
  json workers;
  auto states = [&] {
    std::map<std::string, std::string> by_name;
    CommandResult r = sb.Xvctl({"workers", "--json"}, 30);
    workers = json::parse(r.out, nullptr, false);
    if (workers.is_object()) {
      for (const json& w : workers["workers"]) by_name[w["name"]] = w["state"];
    }
    return by_name;
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto s = states();
        return s.count(names[0]) && s[names[0]] != "offline" && s.count(names[1]) &&
               s[names[1]] != "offline";
      },
      90))
      << "workers: " << workers.dump() << logs();
  const std::string out = ReadText(job_out);
  // --gpus-per-task=1 gave each task its own GPU.
  EXPECT_NE(out.find("task 0 on "), std::string::npos) << out;
  EXPECT_NE(out.find("task 1 on "), std::string::npos) << out;
  EXPECT_NE(out.find("(CUDA_VISIBLE_DEVICES=0)"), std::string::npos) << out;
  EXPECT_NE(out.find("(CUDA_VISIBLE_DEVICES=1)"), std::string::npos) << out;

  // They take work: one experiment on the fake trainer succeeds on a Slurm worker.
  CommandResult sub = sb.Xvctl(
      {"submit", SourcePath("recipes/cpu-tiny.yaml"), "--set", "time_budget_s=2", "--json"}, 60);
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err << logs();
  CommandResult waited = sb.Xvctl({"wait", "--timeout", "120"}, 180);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err << logs();
  CommandResult results = sb.Xvctl({"results", "--json"}, 60);
  EXPECT_NE(results.out.find("succeeded"), std::string::npos) << results.out << logs();
  EXPECT_NE(results.out.find("slurm-" + job + "-"), std::string::npos) << results.out;

  // scancel: Slurm sends SIGTERM to the tasks (and the batch script); the job ends cleanly.
  CommandResult cancel = RunCommand({"scancel", job}, 30, env);
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_TRUE(WaitUntil(
      [&] {
        return RunCommand({"squeue", "-h", "-j", job}, 30, env).out.empty();
      },
      90))
      << "the job is still queued or running" << logs();
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto s = states();
        return s[names[0]] == "offline" && s[names[1]] == "offline";
      },
      60))
      << "workers: " << workers.dump() << logs();
  const std::string final_out = ReadText(job_out);
  EXPECT_NE(final_out.find("xv-worker stopped"), std::string::npos)
      << "each worker stopped on SIGTERM and said so" << logs();
  std::printf("slurm job %s: 2 workers registered, an experiment ran, scancel ended them\n",
              job.c_str());
}

}  // namespace
}  // namespace xv::e2e
