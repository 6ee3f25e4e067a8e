// results.tsv byte for byte against a hand-checked file (testdata/results_golden.tsv), crash rows,
// replicates, controls, reused and unfinished rows included; the CSV and JSON forms of the rows.
#include "client/views/results_export.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace xv::client {
namespace {

v1::Experiment MakeRun(int64_t id, const std::string& name, const std::string& state,
                       const std::string& config_hash) {
  v1::Experiment e;
  e.set_id(id);
  e.set_name(name);
  e.set_state(state);
  e.set_config_hash(config_hash);
  e.set_recipe_hash("ffffffffffff" + std::to_string(id));
  e.set_role("candidate");
  e.set_decision("pending");
  e.set_seed(42);
  return e;
}

v1::Experiment Measured(v1::Experiment e, double val_bpb, double peak_vram_mb) {
  e.mutable_result()->set_val_bpb(val_bpb);
  e.mutable_result()->set_peak_vram_mb(peak_vram_mb);
  return e;
}

v1::Experiment Decided(v1::Experiment e, const std::string& decision) {
  e.set_decision(decision);
  return e;
}

v1::Experiment Failed(v1::Experiment e, const std::string& kind) {
  e.set_failure_kind(kind);
  return e;
}

v1::Experiment Control(v1::Experiment e, int64_t seed) {
  e.set_role("control");
  e.set_decision("control");
  e.set_seed(seed);
  return e;
}

// A campaign's history as the daemon lists it, in id order.
std::vector<v1::Experiment> Campaign() {
  v1::Experiment reused =
      Measured(MakeRun(10, "matrix_lr=0.04", "succeeded", "b2c3d4e5f6"), 0.9932, 45260.8);
  reused.set_reused_from_id(2);
  v1::Experiment no_hash = Measured(MakeRun(16, "orphan", "succeeded", ""), 1.1, 100);
  no_hash.clear_recipe_hash();
  v1::Experiment unfinished_result = MakeRun(15, "softcap=30", "succeeded", "e5f6a7b8c9");
  unfinished_result.mutable_result()->set_val_bpb(std::nan(""));
  return {
      Decided(Measured(MakeRun(1, "head", "succeeded", "a1b2c3d4e5f6a7b8"), 0.9979, 45056), "keep"),
      Decided(
          Measured(MakeRun(2, "matrix_lr=0.04", "succeeded", "b2c3d4e5f6"), 0.99320049, 45260.8),
          "keep"),
      Decided(Measured(MakeRun(3, "mlp=gelu", "succeeded", "c3d4e5f6a7"), 1.005, 45056), "discard"),
      Failed(MakeRun(4, "n_embd=1536", "failed", "d4e5f6a7b8"), "oom"),
      Failed(Measured(MakeRun(5, "matrix_lr=0.2", "diverged", "f6a7b8c9d0"), 7.5, 44000),
             "diverged"),
      Control(Measured(MakeRun(6, "head", "succeeded", "b2c3d4e5f6"), 0.99401, 45270), 43),
      Control(Measured(MakeRun(7, "head", "succeeded", "b2c3d4e5f6"), 0.99287, 45250), 44),
      MakeRun(8, "warmdown_ratio=0.5", "running", "a7b8c9d0e1"),
      MakeRun(9, "embedding_lr=0.8", "cancelled", "b8c9d0e1f2"),
      reused,
      Measured(MakeRun(11, "x0_lambda=0.2", "succeeded", "c9d0e1f2a3"), 0.99111149, 44954.7),
      Decided(Measured(MakeRun(12, "name\twith tab", "succeeded", "d0e1f2a3b4"), 1.25, 0),
              "discard"),
      Failed(MakeRun(13, "depth=12", "timed_out", "e1f2a3b4c5"), "timed_out"),
      MakeRun(14, "depth=10", "lost", "f2a3b4c5d6"),
      unfinished_result,
      no_hash,
      MakeRun(17, "queued one", "queued", "0102030405"),
  };
}

std::string ReadGolden(const std::string& name) {
  const char* src = std::getenv("XV_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "run through ctest (XV_SOURCE_DIR)";
  if (src == nullptr) return "";
  std::ifstream in(std::string(src) + "/tests/unit/client/views/testdata/" + name,
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ResultsExport, TsvIsByteExactAgainstTheHandCheckedFile) {
  const std::vector<v1::Experiment> campaign = Campaign();
  EXPECT_EQ(RenderResultsTsv(BuildResultsExport(campaign)), ReadGolden("results_golden.tsv"));
}

TEST(ResultsExport, EmptyListingIsTheHeaderAlone) {
  EXPECT_EQ(RenderResultsTsv(BuildResultsExport({})),
            "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n");
}

TEST(ResultsExport, CsvQuotesFieldsAndAddsIdStateDecision) {
  std::vector<v1::Experiment> rows = {
      Decided(Measured(MakeRun(3, "adam_betas=[0.8, 0.95]", "succeeded", "c3d4e5f6a7"), 1.0, 2048),
              "discard"),
      Failed(MakeRun(4, "say \"hi\"", "failed", "d4e5f6a7b8"), "crashed")};
  EXPECT_EQ(RenderResultsCsv(BuildResultsExport(rows)),
            "commit,val_bpb,memory_gb,status,description,id,state,decision\n"
            "c3d4e5f,1.000000,2.0,discard,\"adam_betas=[0.8, 0.95]\",3,succeeded,discard\n"
            "d4e5f6a,0.000000,0.0,crash,\"say \"\"hi\"\" (crashed)\",4,failed,pending\n");
}

TEST(ResultsExport, JsonCarriesTheSameRowsAsNumbers) {
  const std::vector<v1::Experiment> campaign = Campaign();
  nlohmann::json j = ResultsExportJson(BuildResultsExport(campaign));
  ASSERT_EQ(j["results"].size(), 13u) << j.dump();
  EXPECT_EQ(j["results"][0]["commit"], "a1b2c3d");
  EXPECT_DOUBLE_EQ(j["results"][0]["val_bpb"].get<double>(), 0.9979);
  EXPECT_DOUBLE_EQ(j["results"][0]["memory_gb"].get<double>(), 44.0);
  EXPECT_EQ(j["results"][3]["status"], "crash");
  EXPECT_EQ(j["results"][3]["id"], 4);
  EXPECT_DOUBLE_EQ(j["results"][3]["val_bpb"].get<double>(), 0.0);
}

}  // namespace
}  // namespace xv::client
