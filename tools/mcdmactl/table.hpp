// Table: the aligned plain-text tables of mcdmactl's human output.
//
// Human output is for people and may change between versions; scripts use
// --json. Columns are left-aligned except those marked numeric, which are
// right-aligned so magnitudes line up. Single-threaded value type.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mcdma::tools {

class Table {
 public:
  struct Column {
    std::string header;
    bool numeric = false;
  };

  explicit Table(std::vector<Column> columns);

  // A row with fewer cells than columns is padded with empty cells; extra
  // cells are dropped (a programming error, not worth failing the command).
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Writes the header and rows, columns separated by two spaces, no trailing
  // whitespace. `indent` is prepended to every line.
  void Print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace mcdma::tools
