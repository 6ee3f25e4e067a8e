// Unit tests of common/flat_json_object.h: every text it accepts has the value nlohmann::json
// parses from it (the full parser it stands in for), member by member; what it refuses is named
// case by case, and a seeded generator of near-JSON texts checks the agreement at scale.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/flat_json_object.h"

namespace xv {
namespace {

using nlohmann::json;

// Fails the test unless `flat` holds exactly the members of `full` with the same values.
void ExpectSameObject(const FlatJsonObject& flat, const json& full, const std::string& text) {
  ASSERT_TRUE(full.is_object()) << text;
  ASSERT_EQ(flat.members().size(), full.size()) << text;
  for (const FlatJsonObject::Member& m : flat.members()) {
    const std::string key(m.key);
    ASSERT_TRUE(full.contains(key)) << text << ": " << key;
    const json& v = full[key];
    switch (m.kind) {
      case FlatJsonObject::Kind::kNull:
        EXPECT_TRUE(v.is_null()) << text << ": " << key;
        break;
      case FlatJsonObject::Kind::kBool:
        ASSERT_TRUE(v.is_boolean()) << text << ": " << key;
        EXPECT_EQ(m.boolean, v.get<bool>()) << text;
        break;
      case FlatJsonObject::Kind::kInteger:
        ASSERT_TRUE(v.is_number_integer()) << text << ": " << key;
        EXPECT_EQ(m.integer, v.get<int64_t>()) << text;
        EXPECT_EQ(m.number, v.get<double>()) << text;
        break;
      case FlatJsonObject::Kind::kFloat:
        ASSERT_TRUE(v.is_number_float()) << text << ": " << key;
        EXPECT_EQ(m.number, v.get<double>()) << text;  // bit-for-bit: both round correctly
        break;
      case FlatJsonObject::Kind::kString:
        ASSERT_TRUE(v.is_string()) << text << ": " << key;
        EXPECT_EQ(std::string(m.string), v.get<std::string>()) << text;
        break;
    }
  }
}

TEST(FlatJsonObject, ReadsATrainerStepEventAsTheFullParserDoes) {
  const std::string text =
      R"({"type":"step","t":3.25,"step":12,"loss":3.4567,"lrm":1.0,"dt_ms":101.5,)"
      R"("tok_per_sec":20480,"mfu_percent":null,"progress":0.125,"remaining_s":10.0,"epoch":0})";
  FlatJsonObject flat;
  ASSERT_TRUE(FlatJsonObject::Parse(text, &flat));
  ExpectSameObject(flat, json::parse(text), text);
  ASSERT_NE(flat.Find("step"), nullptr);
  EXPECT_EQ(flat.Find("step")->kind, FlatJsonObject::Kind::kInteger);
  EXPECT_EQ(flat.Find("step")->integer, 12);
  EXPECT_EQ(flat.Find("type")->string, "step");
  EXPECT_EQ(flat.Find("mfu_percent")->kind, FlatJsonObject::Kind::kNull);
  EXPECT_EQ(flat.Find("absent"), nullptr);
}

TEST(FlatJsonObject, AcceptsJsonWhitespaceNumbersAndLiteralsAsTheFullParserDoes) {
  for (const std::string text : {
           std::string("{}"),
           std::string(" \t\r\n{ } \n"),
           std::string(R"({ "a" : -0 , "b":0.5e-3,"c":1E+2 ,"d":true,"e":false,"f":""})"),
           std::string(R"({"big":9223372036854775807,"small":-9223372036854775808})"),
           std::string(R"({"x":1.7976931348623157e308,"y":4.9e-324,"z":0.1})"),
           std::string(R"({"":1,"k":"with spaces and {brackets}, [commas] and : colons"})"),
       }) {
    FlatJsonObject flat;
    ASSERT_TRUE(FlatJsonObject::Parse(text, &flat)) << text;
    ExpectSameObject(flat, json::parse(text), text);
  }
}

TEST(FlatJsonObject, RefusesWhatItLeavesToTheFullParser) {
  for (const std::string text : {
           std::string(""),
           std::string("[]"),
           std::string("1"),
           std::string(R"({"a":{"b":1}})"),              // nested object
           std::string(R"({"a":[1,2]})"),                // array
           std::string(R"({"a":"x\"y"})"),               // an escape
           std::string("{\"a\":\"\xC3\xA9\"}"),          // non-ASCII
           std::string("{\"a\":\"tab\there\"}"),         // a control byte (not JSON either)
           std::string(R"({"a":1,"a":2})"),              // duplicate key
           std::string(R"({"a":9223372036854775808})"),  // beyond int64: nlohmann keeps uint64
           std::string(R"({"a":1e400})"),                // out of double's range
           std::string(R"({"a":1,})"),                   // trailing comma (not JSON)
           std::string(R"({"a":01})"),                   // leading zero (not JSON)
           std::string(R"({"a":+1})"),                   // plus sign (not JSON)
           std::string(R"({"a":.5})"),                   // no integer part (not JSON)
           std::string(R"({"a":1.})"),                   // no fraction digits (not JSON)
           std::string(R"({"a":1e})"),                   // no exponent digits (not JSON)
           std::string(R"({"a":NaN})"),                  // not JSON
           std::string(R"({"a":nul})"),                  // truncated literal
           std::string(R"({"a":1} x)"),                  // trailing text
           std::string(R"({"a":1)"),                     // unterminated
           std::string(R"({a:1})"),                      // unquoted key
       }) {
    FlatJsonObject flat;
    EXPECT_FALSE(FlatJsonObject::Parse(text, &flat)) << text;
  }
  std::string many = "{";
  for (size_t i = 0; i <= FlatJsonObject::kMaxMembers; ++i) {
    many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  }
  many += "}";
  FlatJsonObject flat;
  EXPECT_FALSE(FlatJsonObject::Parse(many, &flat)) << "more than kMaxMembers members";
}

// Texts made from JSON fragments and near-misses; whenever FlatJsonObject accepts one, the full
// parser must accept it too and agree on every member.
TEST(FlatJsonObject, AgreesWithTheFullParserOnGeneratedTexts) {
  const std::vector<std::string> values = {"0",
                                           "-0",
                                           "12",
                                           "-7",
                                           "3.25",
                                           "1e3",
                                           "-2.5E-2",
                                           "0.1",
                                           "01",
                                           "1.",
                                           ".5",
                                           "+1",
                                           "true",
                                           "false",
                                           "null",
                                           "nul",
                                           "\"s\"",
                                           "\"\"",
                                           "\"a\\n\"",
                                           "[1]",
                                           "{}",
                                           "1e400",
                                           "123456789012345678901234567890",
                                           "9223372036854775807",
                                           "-9223372036854775809"};
  const std::vector<std::string> keys = {"\"step\"", "\"loss\"", "\"type\"", "\"\"", "\"k\"", "k"};
  const std::vector<std::string> seps = {"", " ", "\n", "\t"};
  std::mt19937 rng(20261202);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = pick(seps) + "{";
    const int n = static_cast<int>(rng() % 5);
    for (int m = 0; m < n; ++m) {
      if (m > 0) text += pick(seps) + (rng() % 50 == 0 ? "" : ",");
      text += pick(seps) + pick(keys) + pick(seps) + (rng() % 50 == 0 ? "" : ":") + pick(seps) +
              pick(values);
    }
    text += pick(seps) + (rng() % 50 == 0 ? "" : "}") + pick(seps);
    FlatJsonObject flat;
    if (!FlatJsonObject::Parse(text, &flat)) continue;
    ++accepted;
    const json full = json::parse(text, nullptr, false);
    ASSERT_FALSE(full.is_discarded()) << "accepted, but not JSON: " << text;
    ExpectSameObject(flat, full, text);
  }
  EXPECT_GT(accepted, 1000) << "the generator should make many acceptable texts";
}

}  // namespace
}  // namespace xv
