#include "client/requests/sweep_expansion.h"

#include <set>

#include "client/requests/comma_list.h"
#include "client/requests/quoted_flag_text.h"
#include "common/message_field_name.h"

namespace xv::client {

Status ParseSweep(const std::string& text, SweepAxis* out) {
  const std::string what = "--sweep " + QuotedFlagText(text);
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Status::InvalidArgument(what + ": expected key=value1,value2,...");
  }
  SweepAxis axis;
  axis.key = TrimBlanks(text.substr(0, eq));
  if (axis.key.empty()) return Status::InvalidArgument(what + ": empty key");
  std::vector<std::string> parts;
  Status split = SplitCommaList(text.substr(eq + 1), &parts);
  if (!split.ok()) return split.WithContext(what + ": ");
  std::set<std::string> seen;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& v = parts[i];
    if (v.empty()) {
      return Status::InvalidArgument(what + ": value " + std::to_string(i + 1) + " of " +
                                     FieldNameForMessage(axis.key) + " is empty");
    }
    if (!seen.insert(v).second) {
      return Status::InvalidArgument(what + ": value " + FieldNameForMessage(v) + " of " +
                                     FieldNameForMessage(axis.key) + " repeats");
    }
    axis.values.push_back(v);
  }
  *out = std::move(axis);
  return Status::Ok();
}

Status ExpandSweeps(const std::vector<std::string>& sweeps,
                    std::vector<std::vector<v1::Override>>* out) {
  std::vector<SweepAxis> axes;
  std::set<std::string> keys;
  for (const auto& s : sweeps) {
    SweepAxis axis;
    XV_RETURN_IF_ERROR(ParseSweep(s, &axis));
    if (!keys.insert(axis.key).second) {
      return Status::InvalidArgument("--sweep " + QuotedFlagText(s) + ": " +
                                     FieldNameForMessage(axis.key) +
                                     " is already swept by another --sweep flag");
    }
    axes.push_back(std::move(axis));
  }
  // Each axis has at least one value, so the running product only grows: stop at the limit
  // (hostile or mistyped flags could otherwise ask for billions of candidates).
  size_t count = 1;
  for (const auto& axis : axes) {
    count *= axis.values.size();
    if (count > kMaxSweepCandidates) {
      std::string sizes;
      for (const auto& a : axes)
        sizes += (sizes.empty() ? "" : " x ") + std::to_string(a.values.size());
      return Status::InvalidArgument("--sweep: " + sizes + " values make more than " +
                                     std::to_string(kMaxSweepCandidates) +
                                     " candidates; sweep fewer values at once");
    }
  }
  std::vector<std::vector<v1::Override>> product;
  if (!axes.empty()) product.emplace_back();
  for (const auto& axis : axes) {
    std::vector<std::vector<v1::Override>> next;
    next.reserve(product.size() * axis.values.size());
    for (const auto& prefix : product) {
      for (const auto& v : axis.values) {
        std::vector<v1::Override> c = prefix;
        v1::Override o;
        o.set_key(axis.key);
        o.set_value(v);
        c.push_back(o);
        next.push_back(std::move(c));
      }
    }
    product = std::move(next);
  }
  *out = std::move(product);
  return Status::Ok();
}

}  // namespace xv::client
