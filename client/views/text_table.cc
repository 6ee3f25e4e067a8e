#include "client/views/text_table.h"

#include <algorithm>
#include <numeric>

#include "common/untrusted_text.h"

namespace xv::client {
namespace {

constexpr size_t kSeparatorWidth = 2;
constexpr size_t kMinShrunkWidth = 8;
// While columns are being left out, a shrinkable column counts at most this wide: a long name
// should be cut before whole columns go.
constexpr size_t kSoftShrinkableWidth = 16;

size_t TotalWidth(const std::vector<size_t>& visible, const std::vector<size_t>& width) {
  size_t total = 0;
  for (size_t c : visible) total += width[c];
  return visible.empty() ? 0 : total + kSeparatorWidth * (visible.size() - 1);
}

}  // namespace

size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string CutToWidth(const std::string& s, size_t width) {
  if (DisplayWidth(s) <= width) return s;
  if (width == 0) return "";
  size_t kept = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (kept == width - 1) break;
      ++kept;
    }
  }
  return s.substr(0, i) + "\u2026";
}

std::string WrapToWidth(const std::string& s, size_t width, const std::string& indent) {
  if (width == 0 || DisplayWidth(s) <= width) return s + "\n";
  std::string out, line;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(' ', start);
    if (end == std::string::npos) end = s.size();
    const std::string word = s.substr(start, end - start);
    if (!line.empty() && line != indent && DisplayWidth(line) + 1 + DisplayWidth(word) > width) {
      out += line + "\n";
      line = indent;
    }
    if (!line.empty() && line != indent) line += " ";
    line += word;
    start = end + 1;
  }
  return out + line + "\n";
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = EscapeForTerminal(cell);
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const { return RenderFitting(0); }

std::string TextTable::RenderFitting(size_t max_width) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = DisplayWidth(columns_[c].header);
    for (const auto& row : rows_) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  std::vector<size_t> visible(columns_.size());
  std::iota(visible.begin(), visible.end(), 0);
  if (max_width == 0) return RenderColumns(visible, width);
  // Step 1: leave out columns, the highest priority number (rightmost of equals) first, counting
  // shrinkable columns at their soft width.
  std::vector<size_t> soft = width;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const size_t floor = std::max(DisplayWidth(columns_[c].header), kMinShrunkWidth);
    if (columns_[c].shrinkable) soft[c] = std::min(width[c], std::max(floor, kSoftShrinkableWidth));
  }
  while (TotalWidth(visible, soft) > max_width) {
    auto drop = visible.end();
    for (auto it = visible.begin(); it != visible.end(); ++it) {
      if (columns_[*it].priority > 0 &&
          (drop == visible.end() || columns_[*it].priority >= columns_[*drop].priority)) {
        drop = it;
      }
    }
    if (drop == visible.end()) break;
    visible.erase(drop);
  }
  // Step 2: narrow the widest shrinkable column, one code point at a time, until the rest fits.
  while (TotalWidth(visible, width) > max_width) {
    size_t widest = columns_.size();
    for (size_t c : visible) {
      const size_t floor = std::max(DisplayWidth(columns_[c].header), kMinShrunkWidth);
      if (columns_[c].shrinkable && width[c] > floor &&
          (widest == columns_.size() || width[c] > width[widest])) {
        widest = c;
      }
    }
    if (widest == columns_.size()) break;
    --width[widest];
  }
  return RenderColumns(visible, width);
}

std::string TextTable::RenderColumns(const std::vector<size_t>& visible,
                                     const std::vector<size_t>& width) const {
  auto render_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < visible.size(); ++i) {
      const size_t c = visible[i];
      const std::string cell = CutToWidth(cells[c], width[c]);
      const size_t pad = width[c] - DisplayWidth(cell);
      if (i > 0) line.append(kSeparatorWidth, ' ');
      if (columns_[c].align == Align::kRight) {
        line.append(pad, ' ');
        line += cell;
      } else {
        line += cell;
        line.append(pad, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& col : columns_) headers.push_back(col.header);
  std::string out = render_row(headers);
  std::string rule;
  for (size_t i = 0; i < visible.size(); ++i) {
    if (i > 0) rule.append(kSeparatorWidth, ' ');
    rule.append(width[visible[i]], '-');
  }
  out += rule + "\n";
  for (const auto& row : rows_) out += render_row(row);
  return out;
}

}  // namespace xv::client
