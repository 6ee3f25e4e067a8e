// ApplyUnifiedDiff (common/unified_diff.h): patches as `diff -u` and `git diff` write them apply
// exactly; anything else is refused with the hunk named.
#include "common/unified_diff.h"

#include <string>

#include <gtest/gtest.h>

namespace xv {
namespace {

constexpr size_t kMax = 1 << 20;

const char* kSource =
    "import torch\n"
    "DEPTH = 8\n"
    "MATRIX_LR = 0.04\n"
    "\n"
    "def main():\n"
    "    print(DEPTH)\n"
    "    print(MATRIX_LR)\n"
    "\n"
    "main()\n";

Status Apply(const std::string& diff, std::string* out, const std::string& original = kSource) {
  return ApplyUnifiedDiff(original, diff, "train.py", kMax, out);
}

TEST(UnifiedDiff, AppliesAChangedLineWithContext) {
  const std::string diff =
      "--- a/train.py\n"
      "+++ b/train.py\n"
      "@@ -1,4 +1,4 @@\n"
      " import torch\n"
      " DEPTH = 8\n"
      "-MATRIX_LR = 0.04\n"
      "+MATRIX_LR = 0.02\n"
      " \n";
  std::string out;
  ASSERT_TRUE(Apply(diff, &out).ok());
  std::string want = kSource;
  want.replace(want.find("0.04"), 4, "0.02");
  EXPECT_EQ(out, want);
}

TEST(UnifiedDiff, AddsAndDeletesLinesInSeveralHunksWithGitPrelude) {
  const std::string diff =
      "diff --git a/train.py b/train.py\n"
      "index 1111111..2222222 100644\n"
      "--- a/train.py\t2026-01-01 00:00:00\n"
      "+++ b/train.py\t2026-01-01 00:00:01\n"
      "@@ -1,2 +1,3 @@\n"
      " import torch\n"
      "+import math\n"
      " DEPTH = 8\n"
      "@@ -6,2 +7,1 @@\n"
      "     print(DEPTH)\n"
      "-    print(MATRIX_LR)\n";
  std::string out;
  Status s = Apply(diff, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out,
            "import torch\nimport math\nDEPTH = 8\nMATRIX_LR = 0.04\n\ndef main():\n"
            "    print(DEPTH)\n\nmain()\n");
}

TEST(UnifiedDiff, PlacesAHunkAtAnOffsetWhenItsContextMatchesExactly) {
  // The hunk says line 1, its lines are at line 5: applied there (as `patch` does, no fuzz).
  const std::string diff =
      "--- train.py\n+++ train.py\n"
      "@@ -1,2 +1,2 @@\n"
      " def main():\n"
      "-    print(DEPTH)\n"
      "+    print(DEPTH * 2)\n";
  std::string out;
  ASSERT_TRUE(Apply(diff, &out).ok());
  EXPECT_NE(out.find("    print(DEPTH * 2)\n    print(MATRIX_LR)\n"), std::string::npos);
}

TEST(UnifiedDiff, RefusesAContextMismatchNamingTheHunkAndTheLine) {
  const std::string diff =
      "--- a/train.py\n+++ b/train.py\n"
      "@@ -2,2 +2,2 @@\n"
      " DEPTH = 8\n"
      "-MATRIX_LR = 0.05\n"
      "+MATRIX_LR = 0.02\n";
  std::string out = "untouched";
  Status s = Apply(diff, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("hunk 1 (@@ -2,2 +2,2 @@)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("line 3 of train.py"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("MATRIX_LR = 0.05"), std::string::npos) << s.message();
  EXPECT_EQ(out, "untouched");
}

TEST(UnifiedDiff, NoFuzzWhitespaceDifferencesAreMismatches) {
  const std::string diff =
      "--- a/train.py\n+++ b/train.py\n"
      "@@ -2,1 +2,1 @@\n"
      "-DEPTH = 8 \n"
      "+DEPTH = 9\n";
  std::string out;
  EXPECT_FALSE(Apply(diff, &out).ok());
}

TEST(UnifiedDiff, FinalLineWithoutNewline) {
  const std::string original = "a\nb";
  const std::string diff =
      "--- a/f\n+++ b/f\n"
      "@@ -1,2 +1,2 @@\n"
      " a\n"
      "-b\n"
      "\\ No newline at end of file\n"
      "+c\n";
  std::string out;
  Status s = Apply(diff, &out, original);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, "a\nc\n");
  // Without the marker the old line "b\n" is not the file's "b".
  const std::string unmarked = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
  EXPECT_FALSE(Apply(unmarked, &out, original).ok());
}

TEST(UnifiedDiff, PureInsertionAndEmptyContextLines) {
  // -U0 insertion after line 1, and an editor-stripped empty context line (no space).
  std::string out;
  ASSERT_TRUE(Apply("--- a\n+++ b\n@@ -1,0 +2,1 @@\n+X = 1\n", &out).ok());
  EXPECT_EQ(out.substr(0, 19), "import torch\nX = 1\n");
  const std::string diff =
      "--- a\n+++ b\n@@ -3,3 +3,3 @@\n MATRIX_LR = 0.04\n\n-def main():\n+def main(): # x\n";
  Status s = Apply(diff, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.find("def main(): # x\n"), std::string::npos);
}

TEST(UnifiedDiff, CrlfFilesMatchCrlfPatches) {
  const std::string original = "a\r\nb\r\n";
  std::string out;
  ASSERT_TRUE(
      Apply("--- a\r\n+++ b\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n", &out, original).ok());
  EXPECT_EQ(out, "a\r\nc\r\n");
}

TEST(UnifiedDiff, RefusesMalformedPatches) {
  std::string out;
  struct Case {
    const char* diff;
    const char* says;
  } cases[] = {
      {"", "no file header"},
      {"@@ -1 +1 @@\n-a\n+b\n", "no file header"},
      {"--- a\n+++ b\n", "no hunk"},
      {"--- a\n+++ b\n@@ -1,x +1 @@\n", "is not `@@"},
      {"--- a\n+++ b\n@@ -1 +1\n-a\n+b\n", "is not `@@"},
      {"--- a\n+++ b\n@@ --1 +1 @@\n", "is not `@@"},
      {"--- /dev/null\n+++ b/train.py\n@@ -0,0 +1 @@\n+a\n", "/dev/null"},
      {"--- a/train.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-import torch\n", "/dev/null"},
      {"--- a\n+++ b\n@@ -1,2 +1,2 @@\n import torch\n", "missing"},
      {"--- a\n+++ b\n@@ -1 +1 @@\n*import torch\n", "does not fit the header's counts"},
      {"--- a\n+++ b\n@@ -1 +1 @@\n-import torch\n+import numpy\n--- c\n+++ d\n@@ -1 +1 "
       "@@\n-x\n+y\n",
       "second file"},
      {"--- a\n+++ b\n@@ -1 +1 @@\n-import torch\n+import numpy\ngarbage\n", "not a hunk header"},
      {"--- a\n+++ b\n@@ -3 +3 @@\n-MATRIX_LR = 0.04\n+MATRIX_LR = 1\n@@ -2 +2 @@\n-DEPTH = "
       "8\n+DEPTH = "
       "2\n",
       "file order"},
  };
  for (const Case& c : cases) {
    Status s = Apply(c.diff, &out);
    ASSERT_FALSE(s.ok()) << c.diff;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.diff;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.diff << " -> " << s.message();
    EXPECT_EQ(s.message().rfind("patch: ", 0), 0u) << s.message();
  }
}

TEST(UnifiedDiff, HostileCountsPathsAndSizesAreRefusedQuickly) {
  std::string out;
  // A count far beyond what the patch holds, and beyond the number limit.
  Status s = Apply("--- a\n+++ b\n@@ -1,99999999 +1,99999999 @@\n-import torch\n", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.message();
  s = Apply("--- a\n+++ b\n@@ -1,99999999999999999999 +1 @@\n-import torch\n", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not `@@"), std::string::npos) << s.message();
  // A path of traversal and control bytes is never opened, only quoted; the patch still applies.
  const std::string path(5000, '.');
  s = Apply("--- ../../" + path + "/etc/passwd\n+++ /\x01\n@@ -2 +2 @@\n-DEPTH = 8\n+DEPTH = 4\n",
            &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(out.find("DEPTH = 4"), std::string::npos);
  // A result over the limit.
  std::string big = "--- a\n+++ b\n@@ -1 +1,3 @@\n-import torch\n+" + std::string(600, 'x') +
                    "\n+" + std::string(600, 'y') + "\n+z\n";
  s = ApplyUnifiedDiff(kSource, big, "train.py", 1000, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("more than 1000 bytes"), std::string::npos) << s.message();
  // Many hunks at wrong line numbers over a large file: bounded work, refused.
  std::string file;
  for (int i = 0; i < 20000; ++i) file += "x = " + std::to_string(i % 7) + "\n";
  std::string many = "--- a\n+++ b\n";
  for (int i = 0; i < 3000; ++i) {
    many += "@@ -" + std::to_string(i + 1) + ",3 +" + std::to_string(i + 1) +
            ",3 @@\n x = 1\n x = 2\n-nowhere\n+y\n";
  }
  s = Apply(many, &out, file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hunk 1 ("), std::string::npos) << s.message();
  // Error text stays bounded even for a huge mismatching line.
  const std::string long_line(100000, 'q');
  s = Apply("--- a\n+++ b\n@@ -1 +1 @@\n-" + long_line + "\n+b\n", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_LT(s.message().size(), 2000u);
}

}  // namespace
}  // namespace xv
