// Fuzz target: xvctl's override flags (client/requests/candidate_spec.h,
// client/requests/sweep_expansion.h, client/requests/comma_list.h), then the daemon's application
// of what they accept (common/recipe.h).
#include <string>
#include <utility>
#include <vector>

#include "client/requests/candidate_spec.h"
#include "client/requests/comma_list.h"
#include "client/requests/sweep_expansion.h"
#include "common/recipe.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {

namespace {

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A refusal names its flag and quotes the text: 'as typed', or "an excerpt…" (N bytes) when the
// text is long or unprintable (client/requests/quoted_flag_text.h).
bool NamesFlag(const std::string& message, const std::string& flag) {
  return StartsWith(message, flag + " '") || StartsWith(message, flag + " \"");
}

void ApplyToDefaultRecipe(const std::vector<v1::Override>& overrides) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& o : overrides) pairs.emplace_back(o.key(), o.value());
  Recipe r;
  static const std::string before = CanonicalHash(Recipe());
  const Status st = ApplyOverrides(pairs, &r);
  if (st.ok()) {
    XV_FUZZ_CHECK(ValidateRecipe(r).ok(), "ApplyOverrides accepted an invalid recipe");
  } else {
    XV_FUZZ_CHECK(CanonicalHash(r) == before, "refused overrides changed the recipe");
    XV_FUZZ_CHECK(!st.message().empty(), "a refusal without a message");
  }
}

}  // namespace

int FuzzOverrideLists(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size() && lines.size() < 8) {
    const size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }

  for (const std::string& line : lines) {
    std::vector<std::string> items;
    const Status split = client::SplitCommaList(line, &items);
    if (split.ok()) {
      XV_FUZZ_CHECK(!items.empty(), "SplitCommaList accepted a list with no item");
      for (const auto& item : items) {
        XV_FUZZ_CHECK(item == client::TrimBlanks(item), "an item keeps its blanks: '" + item + "'");
      }
    } else {
      XV_FUZZ_CHECK(items.empty(), "a refused split changed its output");
    }

    v1::Override o;
    const Status set = client::ParseOverride(line, "--set", &o);
    if (set.ok()) {
      XV_FUZZ_CHECK(!o.key().empty() && !o.value().empty(), "--set accepted an empty key or value");
      ApplyToDefaultRecipe({o});
    } else {
      XV_FUZZ_CHECK(NamesFlag(set.message(), "--set"), "--set refusal: " + set.message());
      XV_FUZZ_CHECK(set.message().size() <= 600, "a --set refusal that echoes its input whole");
    }

    std::vector<v1::Override> candidate;
    const Status cand = client::ParseCandidate(line, &candidate);
    if (cand.ok()) {
      XV_FUZZ_CHECK(!candidate.empty(), "--candidate accepted no overrides");
      ApplyToDefaultRecipe(candidate);
    } else {
      XV_FUZZ_CHECK(NamesFlag(cand.message(), "--candidate"),
                    "--candidate refusal: " + cand.message());
    }
  }

  std::vector<std::vector<v1::Override>> product;
  const Status swept = client::ExpandSweeps(lines, &product);
  if (swept.ok()) {
    size_t expected = 1;
    for (const auto& line : lines) {
      client::SweepAxis axis;
      XV_FUZZ_CHECK(client::ParseSweep(line, &axis).ok(), "ExpandSweeps accepted a bad --sweep");
      expected *= axis.values.size();
    }
    XV_FUZZ_CHECK(product.size() == expected, "the sweep product has the wrong size");
    for (const auto& c : product) {
      XV_FUZZ_CHECK(c.size() == lines.size(), "a swept candidate lacks an axis");
    }
    if (!product.empty()) ApplyToDefaultRecipe(product.back());
  } else {
    XV_FUZZ_CHECK(product.empty(), "a refused sweep changed its output");
    XV_FUZZ_CHECK(StartsWith(swept.message(), "--sweep"), "--sweep refusal: " + swept.message());
  }
  return 0;
}

}  // namespace xv::fuzz
