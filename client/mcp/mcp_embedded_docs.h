// The documents `xvctl mcp` serves as resources, embedded at build time from the source tree by
// client/mcp/embed_docs.cmake (the generated mcp_embedded_docs.cc lives in the build directory), so
// an installed xvctl has them. Thread-safety: the list is built once and read-only.
#pragma once

#include <string>
#include <vector>

namespace xv::client {

struct EmbeddedDoc {
  const char* path;  // relative to the source root, e.g. "docs/agent.md"
  const char* text;
};

// docs/agent.md and docs/plans.md, in that order.
const std::vector<EmbeddedDoc>& McpEmbeddedDocs();

}  // namespace xv::client
