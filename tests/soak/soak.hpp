// mcdma_soak: hours of mixed traffic between apps on two hosts while apps
// are killed and the wire is cut (scripts/soak.sh). One binary, two modes:
//   mcdma_soak run --minutes M [--seed N]   the driver (soak_driver.cpp):
//       two network namespaces, a daemon in each, 8 apps, the chaos, the
//       checks and the summary; exit 0 pass, 1 fail, 77 cannot run here
//   mcdma_soak app --socket S --index I --hosts H0,H1,...   one app
//       (soak_app.cpp), started by the driver inside its host's namespace
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mcdma::soak {

// "--key value" pairs; a flag without a value is "1".
class Args {
 public:
  static bool Parse(int argc, char** argv, Args& out, std::string& error);
  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  std::string Str(const std::string& key, const std::string& def = "") const;
  uint64_t U64(const std::string& key, uint64_t def = 0) const;
  double Double(const std::string& key, double def) const;
  // A required key; exits with status 2 when missing.
  std::string Need(const std::string& key) const;

 private:
  std::map<std::string, std::string> values_;
};

std::vector<std::string> SplitList(const std::string& list);

int RunApp(const Args& args);
int RunDriver(const Args& args);

}  // namespace mcdma::soak
