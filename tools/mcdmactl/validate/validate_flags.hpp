// `mcdmactl validate`'s options and its two roles (validate_cmd.hpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mcdma::tools::validate {

struct Flags {
  std::string peer;
  bool serve = false;
  int serve_seconds = 0;
  std::vector<std::string> allow;
  std::vector<std::string> sizes{"1K", "4K"};
  uint32_t samples = 1000;
  uint32_t warmup = 100;
  std::string bw_total = "256M";  // per bandwidth row
  std::string bw_op = "1M";
  uint32_t bw_depth = 8;
  std::string buffer = "64M";  // --serve: the exported buffer (at least bw_op x bw_depth)
  bool skip_doctor = false;
  std::string config;  // the daemon's config for doctor (as `mcdmactl doctor --config`)
  bool skip_perftest = false;
  int perftest_limit_s = 120;
  std::string out;  // directory for report.txt, report.json, samples.csv
  bool json = false;
};

int Serve(const Flags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
          std::ostream& err);
int Run(const Flags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
        std::ostream& err);

}  // namespace mcdma::tools::validate
