// What `xvctl mcp` offers to read (client/mcp/mcp_resources.h): the knob table generated from the
// registry in common/recipe_knobs.h (every knob, its default and range as the registry says), the
// embedded guides, the knobs tool, and refusals pointed at the tool instead of docs/recipe.md.
#include "client/mcp/mcp_resources.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/recipe.h"
#include "common/recipe_knobs.h"

namespace xv::client {
namespace {

using nlohmann::json;

TEST(McpResourcesTest, KnobTableIsTheRegistry) {
  const json table = KnobTableJson();
  const auto& registry = RecipeKnobTable();
  ASSERT_EQ(table["knobs"].size(), registry.size());
  const Recipe defaults;
  for (size_t i = 0; i < registry.size(); ++i) {
    const json& k = table["knobs"][i];
    EXPECT_EQ(k["name"], registry[i].name);
    EXPECT_EQ(k["type"], RecipeKnobTypeName(registry[i]));
    EXPECT_EQ(k["default"], RecipeKnobToJson(registry[i], defaults)) << k.dump();
    EXPECT_EQ(k["section"], registry[i].section);
    EXPECT_EQ(k.value("range", ""), RecipeKnobRangeText(registry[i]));
    EXPECT_EQ(k.value("unit", ""), registry[i].unit);
  }
  const json lr = KnobTableJson("_lr");
  ASSERT_FALSE(lr["knobs"].empty());
  for (const auto& k : lr["knobs"]) {
    EXPECT_NE(k["name"].get<std::string>().find("_lr"), std::string::npos);
  }
}

TEST(McpResourcesTest, ResourcesAreTheKnobTableAndTheEmbeddedGuides) {
  const std::vector<McpResource> resources = XvMcpResources();
  ASSERT_EQ(resources.size(), 3u);
  EXPECT_EQ(resources[0].uri, "xv://knobs");
  EXPECT_EQ(json::parse(resources[0].read()), KnobTableJson());
  EXPECT_EQ(resources[1].uri, "xv://docs/agent.md");
  EXPECT_EQ(resources[1].mime_type, "text/markdown");
  EXPECT_EQ(resources[2].uri, "xv://docs/plans.md");
  // The embedded text is the source tree's file at build time.
  const char* src = std::getenv("XV_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  std::ifstream f(std::string(src) + "/docs/agent.md");
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(resources[1].read(), text.str());
}

TEST(McpResourcesTest, KnobsToolFiltersAndServesTheGuides) {
  const McpTool tool = KnobsTool();
  EXPECT_TRUE(tool.hints.read_only);
  McpCallContext ctx(nullptr, nullptr, nullptr);
  const McpToolResult all = tool.handler(json::object(), &ctx);
  EXPECT_FALSE(all.is_error);
  EXPECT_EQ(all.structured, KnobTableJson());
  const McpToolResult plans = tool.handler({{"doc", "plans.md"}}, &ctx);
  EXPECT_EQ(plans.structured["doc"], "docs/plans.md");
  EXPECT_NE(plans.structured["text"].get<std::string>().find("phases"), std::string::npos);
  const McpToolResult none = tool.handler({{"name", "no_such_knob"}}, &ctx);
  EXPECT_TRUE(none.is_error);
  EXPECT_EQ(none.structured["error"].get<std::string>().rfind("arguments.name: ", 0), 0u);
}

TEST(McpResourcesTest, RefusalsPointAtTheKnobsToolNotAtASourceFile) {
  const McpToolResult r = PointDocsAtMcp(McpToolResult::Error(Status::InvalidArgument(
      "candidate 1 (matrx_lr=0.05): matrx_lr: unknown knob (did you mean 'matrix_lr'?); see "
      "docs/recipe.md for the list")));
  EXPECT_EQ(r.structured["error"],
            "candidate 1 (matrx_lr=0.05): matrx_lr: unknown knob (did you mean 'matrix_lr'?); the "
            "knobs tool (or the resource xv://knobs) lists every knob with its type, default and "
            "range");
  EXPECT_EQ(r.structured["code"], "INVALID_ARGUMENT");
  const McpToolResult ok =
      PointDocsAtMcp(McpToolResult::Json({{"note", "see docs/recipe.md for the list"}}));
  EXPECT_EQ(ok.structured["note"], "see docs/recipe.md for the list");
}

}  // namespace
}  // namespace xv::client
