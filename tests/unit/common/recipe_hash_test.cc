// Canonical JSON and the canonical hash: same run, same hash; any knob changed, another hash.
#include <gtest/gtest.h>

#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "common/sha256.h"
#include "common/shortest_double.h"
#include "knob_value_mutation.h"

namespace xv {
namespace {

Recipe FromYaml(const std::string& yaml) {
  Recipe r;
  const Status s = ParseRecipeYaml(yaml, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

TEST(Sha256, KnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ShortestDouble, ShortestTextThatReadsBack) {
  EXPECT_EQ(ShortestDoubleText(0.1), "0.1");
  EXPECT_EQ(ShortestDoubleText(0.03), "0.03");
  EXPECT_EQ(ShortestDoubleText(15.0), "15.0");
  EXPECT_EQ(ShortestDoubleText(300.0), "300.0");
  EXPECT_EQ(ShortestDoubleText(-0.5), "-0.5");
  EXPECT_EQ(ShortestDoubleText(0.004), "0.004");
  EXPECT_EQ(ShortestDoubleText(1e-10), "1e-10");
  EXPECT_EQ(ShortestDoubleText(1.5e20), "1.5e20");
  EXPECT_EQ(ShortestDoubleText(2.0 / 3.0), "0.6666666666666666");
  EXPECT_EQ(ShortestDoubleText(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(ShortestDoubleText(5e-324), "5e-324");
  EXPECT_EQ(ShortestDoubleText(1.7976931348623157e308), "1.7976931348623157e308");
}

TEST(CanonicalJson, SortedKeysCompactShortestNumbers) {
  const nlohmann::json j =
      nlohmann::json::parse(R"({"b": 0.10, "a": [1, 2.50, {"z": true, "y": null}],
                                                     "c": "x\"y", "d": 300.0})");
  EXPECT_EQ(CanonicalJson(j), R"({"a":[1,2.5,{"y":null,"z":true}],"b":0.1,"c":"x\"y","d":300.0})");
  EXPECT_EQ(CanonicalJson(nlohmann::json(std::nan(""))), "null");
}

TEST(CanonicalHash, IsTheSha256OfTheCanonicalResolvedConfig) {
  Recipe r;
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  EXPECT_EQ(CanonicalHash(r), Sha256Hex(CanonicalJson(ResolvedConfigJson(r, s))));
  EXPECT_EQ(CanonicalHash(r).size(), 64u);
}

TEST(CanonicalHash, LeavesTrainSequenceLenOutAtItsNeutralValue) {
  // Configs stored before train_sequence_len existed keep their identity: the knob is absent from
  // the resolved config at 0, and a set value changes the hash.
  Recipe r;
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  EXPECT_FALSE(ResolvedConfigJson(r, s).contains("train_sequence_len"));
  const std::string neutral = CanonicalHash(r);
  r.train_sequence_len = r.sequence_len / 2;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  EXPECT_EQ(ResolvedConfigJson(r, s).at("train_sequence_len"), r.sequence_len / 2);
  EXPECT_NE(CanonicalHash(r), neutral);
}

TEST(CanonicalHash, StableAcrossKeyOrderAndNumberSpelling) {
  const Recipe a = FromYaml("depth: 4\nmatrix_lr: 0.03\nadam_betas: [0.8, 0.9]\n");
  const Recipe b = FromYaml("adam_betas: [0.80, 0.90]\nmatrix_lr: 0.030\ndepth: 4\n");
  const Recipe c = FromYaml("matrix_lr: 3e-2\ndepth: 4\nadam_betas: [8e-1, 0.9]\n");
  EXPECT_EQ(CanonicalHash(a), CanonicalHash(b));
  EXPECT_EQ(CanonicalHash(a), CanonicalHash(c));
  // Writing a default explicitly is the same run as leaving it out.
  EXPECT_EQ(CanonicalHash(FromYaml("{}")), CanonicalHash(FromYaml("matrix_lr: 0.04\nseed: 42\n")));
  // Through JSON and back.
  Recipe d;
  ASSERT_TRUE(ParseRecipeJson(nlohmann::json::parse(RecipeToJson(a).dump()), &d).ok());
  EXPECT_EQ(CanonicalHash(a), CanonicalHash(d));
  // An override to the same value is the same run.
  Recipe e = a;
  ASSERT_TRUE(ApplyOverride("matrix_lr", "0.0300", &e).ok());
  EXPECT_EQ(CanonicalHash(a), CanonicalHash(e));
}

TEST(CanonicalHash, ChangesWhenAnyKnobChanges) {
  const Recipe base;
  const std::string base_hash = CanonicalHash(base);
  const nlohmann::json values = RecipeToJson(base);
  for (const RecipeKnob& k : RecipeKnobTable()) {
    SCOPED_TRACE(k.name);
    Recipe r = base;
    ASSERT_TRUE(SetRecipeKnobFromJson(k, testing::OtherKnobValue(k, values.at(k.name)), &r).ok());
    EXPECT_NE(CanonicalHash(r), base_hash);
  }
  Recipe tiny_change = base;
  tiny_change.matrix_lr = std::nextafter(base.matrix_lr, 1.0);
  EXPECT_NE(CanonicalHash(tiny_change), base_hash);
}

}  // namespace
}  // namespace xv
