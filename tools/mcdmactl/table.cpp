#include "table.hpp"

#include <algorithm>
#include <utility>

namespace mcdma::tools {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, const std::string& indent) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto print_line = [&](auto cell_at) {
    std::string line = indent;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_at(c);
      const size_t pad = widths[c] - cell.size();
      if (c > 0) line += "  ";
      if (columns_[c].numeric) line.append(pad, ' ');
      line += cell;
      if (!columns_[c].numeric) line.append(pad, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  };
  print_line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) {
    print_line([&](size_t c) -> const std::string& { return row[c]; });
  }
}

}  // namespace mcdma::tools
