// Shared by the mcdmactl test files: run the CLI in-process and capture what
// it printed and returned.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace mcdma::tools::test_support {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

// `mcdmactl ARGS...` through RunCli.
inline Outcome Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), "mcdmactl");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  int code = RunCli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

}  // namespace mcdma::tools::test_support
