// TextTable: a plain-text table with aligned columns (numbers right-aligned, text left-aligned),
// widths measured in UTF-8 code points. A table can be fitted to a terminal width: columns carry a
// priority (the highest numbers are left out first) and text columns may be shortened with "…".
// Thread-safety: none; one owner.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace xv::client {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
    // 0: always shown. Otherwise, when the table is wider than the width it must fit, the columns
    // with the highest priority number are left out first (the rightmost of equals first).
    int priority = 0;
    // Cells of this column may be cut (ending in "…") when leaving columns out is not enough;
    // never below the header's width or 8 code points.
    bool shrinkable = false;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // Rows shorter than the header are padded with empty cells; longer ones are cut. Cells are
  // escaped for the terminal (EscapeForTerminal): a control character (ESC, BEL, CR, LF, C1) in a
  // name from the daemon is shown as \x1b, \n, ..., so a cell can neither move the cursor nor
  // break the row.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  // Header, a rule of '-', then the rows; two spaces between columns; no trailing spaces.
  std::string Render() const;
  // As Render, within `max_width` display columns where it can: columns are left out by priority
  // until the table fits with shrinkable columns counted at most 16 wide, then the widest
  // shrinkable column is narrowed (its cells cut) until the table fits. 0 = no limit (as Render). A
  // table whose priority-0 columns cannot be shrunk enough comes out wider than `max_width`.
  std::string RenderFitting(size_t max_width) const;

 private:
  std::string RenderColumns(const std::vector<size_t>& visible,
                            const std::vector<size_t>& width) const;

  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of a UTF-8 string (code points; no East Asian width handling).
size_t DisplayWidth(const std::string& s);

// `s` cut to at most `width` code points, the last one "…" when anything was cut.
std::string CutToWidth(const std::string& s, size_t width);

// `s` broken at spaces into lines of at most `width` code points (a word longer than that stands
// alone on its line, uncut), every line after the first starting with `indent`; each line ends in
// "\n". width 0: `s` on one line.
std::string WrapToWidth(const std::string& s, size_t width, const std::string& indent);

}  // namespace xv::client
