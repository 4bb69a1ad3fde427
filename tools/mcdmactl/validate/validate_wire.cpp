#include "validate/validate_wire.hpp"

#include <cstdlib>
#include <sstream>

namespace mcdma::tools::validate {

bool AllowedTool(const std::string& tool) {
  return tool == "ib_write_lat" || tool == "ib_send_lat" || tool == "ib_read_lat" ||
         BandwidthTool(tool);
}

bool BandwidthTool(const std::string& tool) {
  return tool == "ib_write_bw" || tool == "ib_read_bw";
}

std::string CheckPerftestArgs(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-U" || a == "--report_gbits") continue;
    if (a == "-s" || a == "-n" || a == "-t" || a == "-o") {
      if (i + 1 >= args.size()) return "'" + a + "' needs a number";
      const std::string& v = args[++i];
      char* end = nullptr;
      unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      const unsigned long long most = a == "-s" ? (64ull << 20) : a == "-n" ? 1000000ull : 1024ull;
      if (v.empty() || *end != '\0' || n == 0 || n > most) {
        std::string why = "'";
        why.append(a).append(" ").append(v).append("' is not a number in 1..");
        return why.append(std::to_string(most));
      }
      continue;
    }
    return "perftest argument '" + a + "' is not one a responder passes on";
  }
  return "";
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace mcdma::tools::validate
