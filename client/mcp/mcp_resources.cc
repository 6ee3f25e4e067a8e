#include "client/mcp/mcp_resources.h"

#include "client/mcp/mcp_embedded_docs.h"
#include "common/recipe.h"
#include "common/recipe_knobs.h"

namespace xv::client {
namespace {

using nlohmann::json;

constexpr char kRecipeDocsPointer[] = "see docs/recipe.md for the list";
constexpr char kMcpKnobsPointer[] =
    "the knobs tool (or the resource xv://knobs) lists every knob with its type, default and range";

std::string DocUri(const std::string& path) { return "xv://" + path; }

}  // namespace

nlohmann::json KnobTableJson(const std::string& only) {
  static const Recipe kDefaults;
  json knobs = json::array();
  for (const RecipeKnob& k : RecipeKnobTable()) {
    const std::string name = k.name;
    if (!only.empty() && name.find(only) == std::string::npos) continue;
    json knob = {{"name", name},
                 {"type", RecipeKnobTypeName(k)},
                 {"default", RecipeKnobToJson(k, kDefaults)},
                 {"section", k.section},
                 {"doc", k.doc}};
    if (k.unit[0] != '\0') knob["unit"] = k.unit;
    const std::string range = RecipeKnobRangeText(k);
    if (!range.empty()) knob["range"] = range;
    knobs.push_back(std::move(knob));
  }
  return {{"knobs", knobs}};
}

std::vector<McpResource> XvMcpResources() {
  std::vector<McpResource> resources;
  McpResource knobs;
  knobs.uri = kKnobsResourceUri;
  knobs.name = "knobs";
  knobs.title = "Recipe knobs";
  knobs.description =
      "Every recipe knob a candidate may override: name, type, default, unit, allowed range, "
      "section and what it does (JSON).";
  knobs.mime_type = "application/json";
  knobs.read = [] { return KnobTableJson().dump(); };
  resources.push_back(knobs);
  for (const EmbeddedDoc& doc : McpEmbeddedDocs()) {
    McpResource r;
    r.uri = DocUri(doc.path);
    r.name = doc.path;
    const std::string path = doc.path;
    r.title = path == "docs/agent.md" ? "Driving xv from an agent: the loop, tools and rules"
                                      : "Plans: phases xvd runs as rounds without an agent";
    r.description = "The guide " + path + " of this xvctl's version.";
    r.mime_type = "text/markdown";
    const char* text = doc.text;
    r.read = [text] { return std::string(text); };
    resources.push_back(r);
  }
  return resources;
}

McpTool KnobsTool() {
  McpTool t;
  t.name = "knobs";
  t.title = "Recipe knobs and the guides";
  t.description =
      "The recipe knobs a candidate may override, each with its type, default, unit, allowed "
      "range and what it does (the same table the daemon checks submissions against); `name` "
      "keeps the knobs whose name contains it. With `doc` (agent.md, plans.md) it returns that "
      "guide instead. The same texts are the resources xv://knobs, xv://docs/agent.md and "
      "xv://docs/plans.md, for hosts that read resources.";
  json docs = json::array();
  for (const EmbeddedDoc& doc : McpEmbeddedDocs()) {
    docs.push_back(std::string(doc.path).substr(std::string("docs/").size()));
  }
  t.input_schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"description", "only knobs whose name contains this"}}},
        {"doc",
         {{"type", "string"}, {"enum", docs}, {"description", "a guide instead of knobs"}}}}},
      {"additionalProperties", false}};
  t.output_schema = {{"type", "object"},
                     {"properties",
                      {{"knobs", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                       {"doc", {{"type", "string"}}},
                       {"text", {{"type", "string"}}}}}};
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [](const json& args, McpCallContext*) {
    if (args.contains("doc")) {
      const std::string path = "docs/" + args["doc"].get<std::string>();
      for (const EmbeddedDoc& doc : McpEmbeddedDocs()) {
        if (path == doc.path) return McpToolResult::Json({{"doc", path}, {"text", doc.text}});
      }
    }
    const std::string only = args.value("name", "");
    json table = KnobTableJson(only);
    if (table["knobs"].empty()) {
      return McpToolResult::Error(Status::NotFound("arguments.name: no knob name contains '" +
                                                   only + "' (leave name out for all)"));
    }
    return McpToolResult::Json(table);
  };
  return t;
}

McpToolResult PointDocsAtMcp(McpToolResult result) {
  if (!result.is_error || !result.structured.contains("error") ||
      !result.structured["error"].is_string()) {
    return result;
  }
  std::string message = result.structured["error"].get<std::string>();
  for (size_t at = message.find(kRecipeDocsPointer); at != std::string::npos;
       at = message.find(kRecipeDocsPointer, at)) {
    message.replace(at, sizeof(kRecipeDocsPointer) - 1, kMcpKnobsPointer);
    at += sizeof(kMcpKnobsPointer) - 1;
  }
  result.structured["error"] = message;
  return result;
}

}  // namespace xv::client
