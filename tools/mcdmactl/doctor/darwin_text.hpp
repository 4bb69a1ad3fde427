// Small text helpers of the doctor's checks: the macOS parsers and checks
// (doctor_darwin.cpp, doctor_darwin_checks.cpp) and the device checks;
// internal to mcdmactl.
//
// Threads: plain functions on values.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace mcdma::tools::doctor::text {

inline std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

inline std::string Join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

// Command output for a message: trimmed, in quotes, line breaks shown as
// " | ", at most 160 characters; "(no output)" when there is none. Messages
// stay one readable line however much a command printed.
inline std::string Quoted(std::string_view s) {
  constexpr size_t kMax = 160;
  s = Trim(s);
  if (s.empty()) return "(no output)";
  std::string out;
  for (char c : s) {
    if (out.size() >= kMax) {
      out += "...";
      break;
    }
    if (c == '\r') continue;
    out += c == '\n' ? std::string(" | ") : std::string(1, c == '\t' ? ' ' : c);
  }
  return "\"" + out + "\"";
}

}  // namespace mcdma::tools::doctor::text
