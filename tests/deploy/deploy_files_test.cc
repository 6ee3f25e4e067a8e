// deploy/ and docs/operations.md agree with the programs and with each other: every flag of
// `xvd --help` and `xv-worker --help` is documented; the Kubernetes manifests parse and carry what
// they must (one xvd replica with a volume, probes on /healthz and /readyz at the health port, GPU
// requests, the Secrets and images the docs name, config keys that are flags); the example config
// files hold only flags; the sbatch script is valid bash with the Slurm directives it relies on;
// with XV_STATIC_XVCTL, xvctl loads no gRPC, protobuf, abseil, SQLite or PCRE2 shared object.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& OperationsDoc() {
  static const std::string doc = ReadText(SourcePath("docs/operations.md"));
  return doc;
}

// The long flags ("--lease-ms") a program's --help lists.
std::set<std::string> HelpFlags(const std::string& program) {
  CommandResult r = RunCommand({BinaryPath(program), "--help"}, 30);
  EXPECT_EQ(r.exit_code, 0) << program << " --help: " << r.err;
  std::set<std::string> flags;
  const std::regex flag(R"((^|[\s,])(--[a-z][a-z0-9-]*))");
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    // Only the option column: a line that starts with spaces and a dash.
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] != '-') continue;
    std::smatch m;
    std::string rest = line.substr(first, line.find("  ", first) - first);
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), flag);
         it != std::sregex_iterator(); ++it) {
      flags.insert((*it)[2]);
    }
  }
  EXPECT_GT(flags.size(), 5u) << program << " --help:\n" << r.out;
  return flags;
}

bool Documented(const std::string& flag) {
  return OperationsDoc().find("`" + flag) != std::string::npos;
}

TEST(DeployDocsTest, EveryFlagOfBothProgramsIsInOperationsMd) {
  for (const char* program : {"xvd", "xv-worker"}) {
    for (const std::string& flag : HelpFlags(program)) {
      if (flag == "--help") continue;
      EXPECT_TRUE(Documented(flag))
          << program << " " << flag << " is not documented in docs/operations.md (as `" << flag
          << " ...`)";
    }
  }
}

// Keys of a config file: each must be a flag of `program` (its --help) or, for flags another part
// of xv adds (the TLS flags), one docs/operations.md documents.
void ExpectKeysAreFlags(const YAML::Node& config, const std::string& program,
                        const std::string& where, const std::set<std::string>& other_keys = {}) {
  static std::map<std::string, std::set<std::string>> help;
  if (!help.count(program)) help[program] = HelpFlags(program);
  ASSERT_TRUE(config.IsMap()) << where;
  for (const auto& entry : config) {
    const std::string key = entry.first.Scalar();
    if (other_keys.count(key)) continue;
    const std::string flag = "--" + key;
    EXPECT_TRUE(help[program].count(flag) || Documented(flag))
        << where << ": key '" << key << "' is neither a flag of " << program
        << " --help nor documented in docs/operations.md";
  }
}

#ifdef XV_STATIC_XVCTL
// XV_STATIC_XVCTL (cmake/static_link_launcher.py): xvctl needs none of the gRPC, protobuf, abseil,
// SQLite or PCRE2 shared objects that xvd loads, and still runs.
TEST(DeployBuildTest, XvctlLinksItsLibrariesStatically) {
  CommandResult needed = RunCommand({"readelf", "--dynamic", BinaryPath("xvctl")}, 30);
  ASSERT_EQ(needed.exit_code, 0) << needed.err;
  ASSERT_NE(needed.out.find("(NEEDED)"), std::string::npos) << needed.out;
  for (const char* lib : {"libgrpc", "libprotobuf", "libabsl", "libsqlite3", "libpcre2"}) {
    EXPECT_EQ(needed.out.find(std::string("[") + lib), std::string::npos)
        << "xvctl loads " << lib << " at start:\n"
        << needed.out;
  }
  CommandResult xvd = RunCommand({"readelf", "--dynamic", BinaryPath("xvd")}, 30);
  ASSERT_EQ(xvd.exit_code, 0) << xvd.err;
  EXPECT_NE(xvd.out.find("[libgrpc"), std::string::npos) << "the check would not see a shared gRPC";
  CommandResult help = RunCommand({BinaryPath("xvctl"), "--help"}, 30);
  EXPECT_EQ(help.exit_code, 0) << help.err;
}
#endif

TEST(DeployDocsTest, ExampleConfigFilesHoldOnlyFlags) {
  ExpectKeysAreFlags(YAML::LoadFile(SourcePath("deploy/xvd.example.yaml")), "xvd",
                     "deploy/xvd.example.yaml");
  ExpectKeysAreFlags(YAML::LoadFile(SourcePath("deploy/worker-config.example.yaml")), "xv-worker",
                     "deploy/worker-config.example.yaml", {"trainers"});
}

// Every document of every deploy/k8s/*.yaml, by "Kind/name".
std::map<std::string, YAML::Node> LoadManifests() {
  std::map<std::string, YAML::Node> objects;
  for (const char* file :
       {"xvd.yaml", "xv-worker-config.yaml", "xv-worker-nvidia.yaml", "xv-worker-amd.yaml"}) {
    const std::string path = SourcePath(std::string("deploy/k8s/") + file);
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAllFromFile(path);
    } catch (const YAML::Exception& e) {
      ADD_FAILURE() << path << ": " << e.what();
    }
    for (const YAML::Node& d : docs) {
      if (!d || d.IsNull()) continue;
      EXPECT_TRUE(d["apiVersion"] && d["kind"] && d["metadata"]["name"]) << path;
      objects[d["kind"].as<std::string>() + "/" + d["metadata"]["name"].as<std::string>()] = d;
    }
  }
  return objects;
}

// The container named `name` of a workload's pod template.
YAML::Node Container(const YAML::Node& workload, const std::string& name) {
  for (const YAML::Node& c : workload["spec"]["template"]["spec"]["containers"]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  ADD_FAILURE() << "no container " << name;
  return YAML::Node();
}

int ContainerPort(const YAML::Node& container, const std::string& port_name) {
  for (const YAML::Node& p : container["ports"]) {
    if (p["name"].as<std::string>() == port_name) return p["containerPort"].as<int>();
  }
  ADD_FAILURE() << "no container port named " << port_name;
  return -1;
}

int PortOf(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

// The Secrets a pod mounts, by volume.
std::set<std::string> SecretNames(const YAML::Node& workload) {
  std::set<std::string> names;
  for (const YAML::Node& v : workload["spec"]["template"]["spec"]["volumes"]) {
    if (v["secret"]) names.insert(v["secret"]["secretName"].as<std::string>());
  }
  return names;
}

TEST(DeployK8sTest, XvdIsOneReplicaWithAVolumeProbesAndTheDocumentedPorts) {
  auto objects = LoadManifests();
  ASSERT_TRUE(objects.count("StatefulSet/xvd"));
  ASSERT_TRUE(objects.count("Service/xvd"));
  ASSERT_TRUE(objects.count("ConfigMap/xvd-config"));
  const YAML::Node sts = objects["StatefulSet/xvd"];
  EXPECT_EQ(sts["spec"]["replicas"].as<int>(), 1) << "xvd is the database's only writer";
  EXPECT_EQ(sts["spec"]["serviceName"].as<std::string>(), "xvd");
  const YAML::Node claim = sts["spec"]["volumeClaimTemplates"][0];
  ASSERT_TRUE(claim) << "a persistent volume for the state dir";
  const std::string claim_name = claim["metadata"]["name"].as<std::string>();

  const YAML::Node xvd = Container(sts, "xvd");
  EXPECT_NE(
      OperationsDoc().find(
          "`" + xvd["image"].as<std::string>().substr(0, xvd["image"].as<std::string>().find(':')) +
          "`"),
      std::string::npos)
      << "the image is named in docs/operations.md § Containers";
  bool state_mounted = false;
  for (const YAML::Node& m : xvd["volumeMounts"]) {
    state_mounted |= m["name"].as<std::string>() == claim_name &&
                     m["mountPath"].as<std::string>() == "/var/lib/xv";
  }
  EXPECT_TRUE(state_mounted);
  EXPECT_EQ(xvd["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(xvd["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(xvd["livenessProbe"]["httpGet"]["port"].as<std::string>(), "health");
  EXPECT_EQ(xvd["readinessProbe"]["httpGet"]["port"].as<std::string>(), "health");

  // The config the container reads names the same ports as the manifest and the docs.
  const YAML::Node args = xvd["args"];
  ASSERT_TRUE(args.IsSequence());
  EXPECT_EQ(args[0].as<std::string>(), "--config");
  const YAML::Node config =
      YAML::Load(objects["ConfigMap/xvd-config"]["data"]["xvd.yaml"].Scalar());
  ExpectKeysAreFlags(config, "xvd", "ConfigMap xvd-config");
  EXPECT_EQ(PortOf(config["listen"].as<std::string>()), ContainerPort(xvd, "grpc"));
  EXPECT_EQ(PortOf(config["health-listen"].as<std::string>()), ContainerPort(xvd, "health"));
  EXPECT_EQ(ContainerPort(xvd, "grpc"), 7470);
  EXPECT_EQ(ContainerPort(xvd, "health"), 8471);
  EXPECT_NE(OperationsDoc().find("port `health` 8471"), std::string::npos);
  EXPECT_NE(OperationsDoc().find("port `grpc` 7470"), std::string::npos);
  const YAML::Node svc = objects["Service/xvd"];
  EXPECT_EQ(svc["spec"]["ports"][0]["port"].as<int>(), 7470);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"].as<std::string>(), "grpc");
  EXPECT_EQ(
      svc["spec"]["selector"]["app.kubernetes.io/name"].as<std::string>(),
      sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());

  // TLS: the Secret is mounted where the config's files are.
  EXPECT_EQ(SecretNames(sts), std::set<std::string>{"xv-tls"});
  for (const char* key : {"tls-cert", "tls-key", "tls-client-ca"}) {
    ASSERT_TRUE(config[key]) << key;
    EXPECT_EQ(config[key].as<std::string>().rfind("/etc/xv/tls/", 0), 0u) << key;
  }
  EXPECT_NE(OperationsDoc().find("kubectl create secret generic xv-tls"), std::string::npos);
}

TEST(DeployK8sTest, WorkersRequestOneGpuOfTheirVendorAndMountTlsAndToken) {
  auto objects = LoadManifests();
  ASSERT_TRUE(objects.count("ConfigMap/xv-worker-config"));
  const YAML::Node config =
      YAML::Load(objects["ConfigMap/xv-worker-config"]["data"]["worker.yaml"].Scalar());
  ExpectKeysAreFlags(config, "xv-worker", "ConfigMap xv-worker-config", {"trainers"});
  EXPECT_EQ(config["daemon"].as<std::string>(), "xvd:7470") << "the Service xvd, port grpc";
  EXPECT_EQ(config["tls-ca"].as<std::string>(), "/etc/xv/tls/ca.crt");

  const std::map<std::string, std::pair<std::string, std::string>> vendors = {
      {"Deployment/xv-worker-nvidia", {"nvidia.com/gpu", "xv/xv-worker-cuda"}},
      {"Deployment/xv-worker-amd", {"amd.com/gpu", "xv/xv-worker-rocm"}},
  };
  for (const auto& [name, expected] : vendors) {
    ASSERT_TRUE(objects.count(name)) << name;
    const YAML::Node w = Container(objects[name], "xv-worker");
    EXPECT_EQ(w["resources"]["limits"][expected.first].as<int>(), 1) << name;
    const std::string image = w["image"].as<std::string>();
    EXPECT_EQ(image.substr(0, image.find(':')), expected.second) << name;
    EXPECT_NE(OperationsDoc().find("`" + expected.second + "`"), std::string::npos)
        << expected.second << " is documented";
    EXPECT_EQ(SecretNames(objects[name]), (std::set<std::string>{"xv-tls", "xv-worker-token"}))
        << name;
    bool token_env = false;
    for (const YAML::Node& e : w["env"]) {
      token_env |= e["name"].as<std::string>() == "XV_TOKEN_FILE" &&
                   e["value"].as<std::string>() == "/etc/xv/token/token";
    }
    EXPECT_TRUE(token_env) << name << ": XV_TOKEN_FILE names the mounted token";
    std::set<std::string> mounts;
    for (const YAML::Node& m : w["volumeMounts"]) mounts.insert(m["mountPath"].as<std::string>());
    EXPECT_TRUE(mounts.count("/etc/xv/tls") && mounts.count("/etc/xv/token") &&
                mounts.count("/etc/xv/worker.yaml") &&
                mounts.count(config["data"].as<std::string>()))
        << name;
  }
  EXPECT_NE(OperationsDoc().find("kubectl create secret generic xv-worker-token"),
            std::string::npos);
}

TEST(DeployContainersTest, EachImageHasItsFileAndTheWorkersUseThePyTorchLibTorch) {
  const std::string daemon = ReadText(SourcePath("deploy/containers/xvd.Dockerfile"));
  EXPECT_NE(daemon.find("FROM debian:12"), std::string::npos);
  EXPECT_NE(daemon.find("deploy/install-deps.sh"), std::string::npos) << "make deps' packages";
  const std::string worker = ReadText(SourcePath("deploy/containers/xv-worker.Dockerfile"));
  EXPECT_NE(worker.find("torch.utils.cmake_prefix_path"), std::string::npos);
  for (const char* base : {"nvcr.io/nvidia/pytorch:", "rocm/pytorch:"}) {
    EXPECT_NE(worker.find(base), std::string::npos) << base;
    EXPECT_NE(OperationsDoc().find(base), std::string::npos) << base;
  }
  EXPECT_NE(OperationsDoc().find("deploy/containers/xvd.Dockerfile"), std::string::npos);
  EXPECT_NE(OperationsDoc().find("deploy/containers/xv-worker.Dockerfile"), std::string::npos);
}

TEST(DeploySlurmTest, TheSbatchScriptIsBashWithTheDirectivesItReliesOn) {
  const std::string path = SourcePath("deploy/slurm/xv-workers.sbatch");
  CommandResult syntax = RunCommand({"bash", "-n", path}, 30);
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  const std::string script = ReadText(path);
  for (const char* needed :
       {"#SBATCH --gpus-per-task=1", "#SBATCH --signal=B:USR1@", "srun ", "trap drain_workers USR1",
        "trap 'stop_workers SIGTERM' TERM", "--tls-ca \"$XV_TLS_CA\"", "XV_TOKEN_FILE",
        "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    EXPECT_NE(script.find(needed), std::string::npos) << needed;
  }
  EXPECT_EQ(script.find("--token "), std::string::npos) << "no token on a command line";
  // The variables and the sbatch line of the docs are the script's.
  for (const char* var : {"XV_DAEMON", "XV_DATA", "XV_TLS_CA", "XV_TOKEN_FILE", "XV_DEVICE",
                          "XV_DRAIN_TOKEN_FILE", "XV_WORKER_CONFIG"}) {
    EXPECT_NE(OperationsDoc().find(var), std::string::npos) << var << " in docs/operations.md";
    EXPECT_NE(script.find(var), std::string::npos) << var << " in the script";
  }
  EXPECT_NE(OperationsDoc().find("sbatch --nodes=2 --ntasks-per-node=4 --gpus-per-task=1"),
            std::string::npos);
}

}  // namespace
}  // namespace xv::e2e
