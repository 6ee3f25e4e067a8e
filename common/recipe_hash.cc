// CanonicalHash: the identity of a run. Hashes the resolved config (knobs + derived sizes), so two
// recipes that differ only in how a number was written ("0.030" vs "0.03") hash equally.
#include "common/recipe.h"
#include "common/sha256.h"

namespace xv {

std::string CanonicalHash(const Recipe& r) {
  ResolvedSizes sizes;
  if (!ResolveSizes(r, &sizes).ok()) return Sha256Hex(CanonicalJson(RecipeToJson(r)));
  return Sha256Hex(CanonicalJson(ResolvedConfigJson(r, sizes)));
}

}  // namespace xv
