// Small helpers shared by the integration tests: reading the testapp's
// result lines, sizes, elapsed time, lower case; and the names the tests
// use from the harness (harness/: child processes, files).
#pragma once

#include <cctype>
#include <chrono>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>

#include "harness/child.hpp"
#include "harness/daemons.hpp"
#include "harness/files.hpp"

namespace mcdma::itest {

using harness::Child;
using harness::CommandResult;
using harness::DescribeStatus;
using harness::ExitedWith;
using harness::Millis;
using harness::ReadFile;
using harness::RunCommand;
using harness::SocketAccepts;
using harness::SpawnDaemon;
using harness::SpawnOptions;
using harness::TempDir;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Milliseconds since t on the steady clock.
inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The unsigned integer value of "key":N (or key=N) in a line; nullopt if absent.
inline std::optional<uint64_t> Field(const std::string& line, const std::string& key) {
  std::smatch m;
  std::regex re("\"?" + key + "\"?[:=]\"?([0-9]+)");
  if (!std::regex_search(line, m, re)) return std::nullopt;
  return std::stoull(m[1].str());
}

// The string value of "key":"V" in a line; empty if absent.
inline std::string StrField(const std::string& line, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":\"([^\"]*)\"");
  if (!std::regex_search(line, m, re)) return "";
  return m[1].str();
}

// The number after "WORD " in a progress line ("CALLS 17" -> 17).
inline std::optional<uint64_t> ProgressCount(const std::string& line, const std::string& word) {
  if (line.rfind(word + " ", 0) != 0) return std::nullopt;
  return std::stoull(line.substr(word.size() + 1));
}

}  // namespace mcdma::itest
