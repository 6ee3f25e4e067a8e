// AcceptancePolicy parsing: defaults, YAML and JSON forms, and errors that name the field.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "daemon/sched/acceptance_policy.h"

namespace xv::sched {
namespace {

// Expects a parse failure whose message starts with `field` and contains `detail`.
void ExpectYamlError(const std::string& yaml, const std::string& field, const std::string& detail) {
  AcceptancePolicy policy;
  const Status status = ParseAcceptancePolicyYaml(yaml, &policy);
  ASSERT_FALSE(status.ok()) << yaml;
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(status.message().rfind(field, 0), 0u) << status.message();
  EXPECT_NE(status.message().find(detail), std::string::npos) << status.message();
}

TEST(AcceptancePolicyTest, DefaultsPerMode) {
  AcceptancePolicy policy;
  ASSERT_TRUE(ParseAcceptancePolicyYaml("", &policy).ok());
  EXPECT_EQ(policy.mode, AcceptanceMode::kWelch);
  EXPECT_EQ(policy.confidence, 0.95);
  EXPECT_EQ(policy.min_effect, 0.0005);
  EXPECT_EQ(policy.replicates, 4);
  EXPECT_EQ(policy.head_controls, 4);
  EXPECT_EQ(policy.max_keeps_per_round, 1);
  EXPECT_EQ(policy.correction, MultipleComparisonCorrection::kBonferroni);
  EXPECT_FALSE(policy.band_k.has_value());

  ASSERT_TRUE(ParseAcceptancePolicyYaml("mode: noise_band\n", &policy).ok());
  EXPECT_EQ(policy.mode, AcceptanceMode::kNoiseBand);
  EXPECT_EQ(policy.replicates, 1);
  EXPECT_EQ(policy.head_controls, 5);
  ASSERT_TRUE(ParseAcceptancePolicyJson(nullptr, &policy).ok());
  EXPECT_EQ(policy.mode, AcceptanceMode::kWelch);
}

TEST(AcceptancePolicyTest, YamlWithEveryField) {
  AcceptancePolicy policy;
  const Status status = ParseAcceptancePolicyYaml(
      "mode: noise_band\nconfidence: 0.99\nmin_effect: 1e-3\nreplicates: 2\nhead_controls: 8\n"
      "max_keeps_per_round: 1\ncorrection: none\nband_k: 2.5\n",
      &policy);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(policy.mode, AcceptanceMode::kNoiseBand);
  EXPECT_EQ(policy.confidence, 0.99);
  EXPECT_EQ(policy.min_effect, 0.001);
  EXPECT_EQ(policy.replicates, 2);
  EXPECT_EQ(policy.head_controls, 8);
  EXPECT_EQ(policy.correction, MultipleComparisonCorrection::kNone);
  ASSERT_TRUE(policy.band_k.has_value());
  EXPECT_EQ(*policy.band_k, 2.5);
}

TEST(AcceptancePolicyTest, JsonRoundTrip) {
  AcceptancePolicy policy;
  ASSERT_TRUE(
      ParseAcceptancePolicyJsonText(
          R"({"mode": "noise_band", "confidence": 0.9, "band_k": 3, "head_controls": 6})", &policy)
          .ok());
  const nlohmann::json json = AcceptancePolicyToJson(policy);
  EXPECT_EQ(json["mode"], "noise_band");
  EXPECT_EQ(json["band_k"], 3.0);
  EXPECT_EQ(json["head_controls"], 6);
  AcceptancePolicy again;
  ASSERT_TRUE(ParseAcceptancePolicyJson(json, &again).ok());
  EXPECT_EQ(AcceptancePolicyToJson(again), json);
  EXPECT_FALSE(AcceptancePolicyToJson(AcceptancePolicy()).contains("band_k"));
}

TEST(AcceptancePolicyTest, ErrorsNameTheField) {
  ExpectYamlError("mode: bayes\n", "mode:", "welch or noise_band");
  ExpectYamlError("confidence: 1.5\n", "confidence:", "(0.5, 1), got 1.5 (line 1, column 13)");
  ExpectYamlError("confidence: high\n", "confidence:", "must be a number");
  ExpectYamlError("mode: welch\nmin_effect: -0.1\n", "min_effect:", "line 2");
  ExpectYamlError("replicates: 1\n", "replicates:", "single runs need mode noise_band");
  ExpectYamlError("replicates: 2.5\n", "replicates:", "must be an integer");
  ExpectYamlError("head_controls: 1\n", "head_controls:", "[2, 64]");
  ExpectYamlError("max_keeps_per_round: 2\n", "max_keeps_per_round:", "only 1");
  ExpectYamlError("correction: holm\n", "correction:", "bonferroni or none");
  ExpectYamlError("band_k: 2\n", "band_k:", "noise_band");
  ExpectYamlError("mode: noise_band\nband_k: 0\n", "band_k:", "(0, 100]");
  ExpectYamlError("confidnce: 0.9\n", "confidnce:", "unknown acceptance policy field");
  ExpectYamlError("mode: [welch]\n", "mode:", "must be a scalar");
  ExpectYamlError("mode: 'welch'\nmode: welch\n", "mode:", "given twice");
  ExpectYamlError("- 1\n- 2\n", "acceptance policy:", "mapping");
  ExpectYamlError("mode: {\n", "acceptance policy:", "invalid YAML");
  ExpectYamlError("? [mode]\n: welch\n", "acceptance policy:", "field names must be plain words");
  // A quoted number stays a string.
  ExpectYamlError("confidence: '0.9'\n", "confidence:", "must be a number");

  AcceptancePolicy policy;
  policy.confidence = 0.8;
  Status status = ParseAcceptancePolicyJsonText(R"({"confidence": 0.9,})", &policy);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("invalid JSON at byte"), std::string::npos) << status.message();
  status = ParseAcceptancePolicyJsonText(R"({"confidence": 0.9, "replicates": "3"})", &policy);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind("replicates: must be an integer", 0), 0u) << status.message();
  EXPECT_EQ(policy.confidence, 0.8) << "a failed parse leaves the policy unchanged";
  EXPECT_FALSE(ParseAcceptancePolicyJsonText("[1]", &policy).ok());
}

// The policies shipped in recipes/policies/ parse and say what their comments promise.
TEST(AcceptancePolicyTest, DeepOrHugeValuesAreRefusedWithoutBeingEchoed) {
  AcceptancePolicy policy;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Status status = ParseAcceptancePolicyJsonText(R"({"confidence": )" + deep + "}", &policy);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "acceptance policy: nested deeper than 64 levels of arrays and objects");
  status = ParseAcceptancePolicyJsonText(R"({"confidence": [[[0.9]]]})", &policy);
  EXPECT_EQ(status.message(), "confidence: must be a number, got an array of 1");
  status = ParseAcceptancePolicyJsonText(R"({"replicates": {"a": 1, "b": 2}})", &policy);
  EXPECT_EQ(status.message(), "replicates: must be an integer, got an object of 2 keys");
  const std::string big(1 << 20, 'w');
  status = ParseAcceptancePolicyJsonText(R"({"mode": ")" + big + "\"}", &policy);
  EXPECT_EQ(status.message().rfind("mode: must be welch or noise_band, got \"www", 0), 0u)
      << status.message().substr(0, 300);
  EXPECT_LT(status.message().size(), 300u);
  status = ParseAcceptancePolicyJsonText("{\"" + big + "\": 1}", &policy);
  EXPECT_NE(status.message().find("(1048576 bytes): unknown acceptance policy field"),
            std::string::npos)
      << status.message().substr(0, 300);
  // A syntax error names the byte, not the text around it.
  status = ParseAcceptancePolicyJsonText(R"({"confidence": secret})", &policy);
  EXPECT_EQ(status.message().find("secret"), std::string::npos) << status.message();
}

TEST(AcceptancePolicyTest, ShippedPoliciesParse) {
  const char* source_dir = std::getenv("XV_SOURCE_DIR");
  ASSERT_NE(source_dir, nullptr) << "run through ctest (XV_SOURCE_DIR)";
  auto read = [&](const std::string& name) {
    std::ifstream in(std::string(source_dir) + "/recipes/policies/" + name);
    EXPECT_TRUE(in.good()) << name;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  AcceptancePolicy welch;
  ASSERT_TRUE(ParseAcceptancePolicyYaml(read("welch-95.yaml"), &welch).ok());
  EXPECT_EQ(welch.mode, AcceptanceMode::kWelch);
  EXPECT_EQ(welch.replicates, 4);
  EXPECT_EQ(welch.head_controls, 4);
  AcceptancePolicy band;
  const Status status = ParseAcceptancePolicyYaml(read("noise-band.yaml"), &band);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(band.mode, AcceptanceMode::kNoiseBand);
  EXPECT_EQ(band.replicates, 1);
  EXPECT_EQ(band.head_controls, 5);
}

}  // namespace
}  // namespace xv::sched
