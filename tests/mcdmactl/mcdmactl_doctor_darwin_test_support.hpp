// What the doctor tests share: a substring check (all of them), and for the
// Mac checks recorded outputs from tests/unit/data/darwin/, the interface
// lists parsed from them and commands that "ran".
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctor/darwin.hpp"

namespace mcdma::tools::doctor::darwin_test {

inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The recorded file tests/unit/data/darwin/NAME.
inline std::string Data(const std::string& name) {
  std::ifstream file(std::string(MCDMA_TEST_DATA_DIR) + "/darwin/" + name);
  EXPECT_TRUE(file.good()) << "cannot open darwin/" << name;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A command that ran to its end and printed `out` (and `err`).
inline CommandOutput Ran(const std::string& command, const std::string& out, int exit_code = 0,
                         const std::string& err = "") {
  CommandOutput c;
  c.command = command;
  c.status = Status::Ok();
  c.exit_code = exit_code;
  c.out = out;
  c.err = err;
  return c;
}

// The interface list parsed from the recorded file NAME.
inline std::vector<InterfaceAddress> Interfaces(const std::string& name) {
  auto parsed = ParseInterfaceList(Data(name));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed.value() : std::vector<InterfaceAddress>{};
}

}  // namespace mcdma::tools::doctor::darwin_test
