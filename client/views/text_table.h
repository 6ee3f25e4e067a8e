// TextTable: a plain-text table with aligned columns (numbers right-aligned, text left-aligned),
// widths measured in UTF-8 code points. Thread-safety: none; one owner.
#pragma once

#include <string>
#include <vector>

namespace xv::client {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
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

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of a UTF-8 string (code points; no East Asian width handling).
size_t DisplayWidth(const std::string& s);

}  // namespace xv::client
