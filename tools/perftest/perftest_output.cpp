#include "perftest_output.hpp"

#include <dirent.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

namespace mcdma::perftest {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadTrimmed(const std::string& path) {
  std::string text = ReadFile(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The numbers of one line of perftest's output, split on blanks and commas;
// nullopt when a field is not a number.
std::optional<std::vector<double>> Numbers(const std::string& line) {
  std::vector<double> out;
  const char* p = line.data();
  const char* end = p + line.size();
  while (p < end) {
    if (*p == ' ' || *p == '\t' || *p == ',') {
      ++p;
      continue;
    }
    double v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next < end && *next != ' ' && *next != '\t' && *next != ','))
      return std::nullopt;
    out.push_back(v);
    p = next;
  }
  return out;
}

}  // namespace

Result<int> RoceV2Ipv4GidIndex(const std::string& device, int port_number) {
  const std::string port =
      "/sys/class/infiniband/" + device + "/ports/" + std::to_string(port_number);
  DIR* dir = opendir((port + "/gids").c_str());
  if (dir == nullptr) {
    return Status(Code::kNotFound, "no RDMA device " + device + " (" + port + "/gids unreadable)");
  }
  int best = -1;
  std::string seen;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long index = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::string gid = ReadTrimmed(port + "/gids/" + entry->d_name);
    if (gid.empty() || gid == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    std::string type = ReadTrimmed(port + "/gid_attrs/types/" + entry->d_name);
    seen.append(" ").append(entry->d_name).append("=").append(gid);
    seen.append(" (").append(type).append(")");
    if (type == "RoCE v2" && gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0 &&
        (best < 0 || index < best)) {
      best = static_cast<int>(index);
    }
  }
  closedir(dir);
  if (best < 0) {
    return Status(Code::kNotFound, device + " has no RoCE v2 IPv4-mapped GID; port " +
                                       std::to_string(port_number) +
                                       " has:" + (seen.empty() ? std::string(" none") : seen));
  }
  return best;
}

Result<std::string> RoceV2Ipv4Address(const std::string& device, int gid_index, int port_number) {
  const std::string path = "/sys/class/infiniband/" + device + "/ports/" +
                           std::to_string(port_number) + "/gids/" + std::to_string(gid_index);
  const std::string gid = ReadTrimmed(path);
  // 0000:0000:0000:0000:0000:ffff:0a00:0102 -> 10.0.1.2
  const std::string prefix = "0000:0000:0000:0000:0000:ffff:";
  if (gid.size() != prefix.size() + 9 || gid.rfind(prefix, 0) != 0) {
    return Status(Code::kNotFound, device + " GID " + std::to_string(gid_index) +
                                       " is not IPv4-mapped ('" + gid + "' in " + path + ")");
  }
  const char* hex = gid.c_str() + prefix.size();  // "0a00:0102"
  char* end = nullptr;
  const unsigned long hi = std::strtoul(hex, &end, 16);
  const bool hi_ok = end == hex + 4 && *end == ':';
  const unsigned long lo = hi_ok ? std::strtoul(end + 1, &end, 16) : 0;
  if (!hi_ok || *end != '\0' || hi > 0xffff || lo > 0xffff) {
    return Status(Code::kNotFound, "cannot read GID '" + gid + "' in " + path);
  }
  return std::to_string(hi >> 8) + "." + std::to_string(hi & 0xff) + "." + std::to_string(lo >> 8) +
         "." + std::to_string(lo & 0xff);
}

bool Listening(uint16_t port) {
  char want[8];
  snprintf(want, sizeof(want), ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(ReadFile(table));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot;
      std::string local;
      std::string remote;
      std::string state;
      if (!(fields >> slot >> local >> remote >> state)) continue;
      if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, want) == 0)
        return true;
    }
  }
  return false;
}

std::string LineWith(const std::string& text, const std::string& what) {
  size_t at = text.find(what);
  if (at == std::string::npos) return "";
  size_t start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  size_t end = text.find('\n', at);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::string ClockSamplingFailure(const std::string& text, const std::string& errors) {
  return LineWith(errors + "\n" + text, "Correlation coefficient");
}

std::string CpuRateConflict(const std::string& text, const std::string& errors) {
  return LineWith(errors + "\n" + text, "Conflicting CPU frequency");
}

Result<std::vector<uint64_t>> ParseUnsortedLatency(const std::string& text, int rtt_factor) {
  size_t at = text.find("#, usec");
  if (at == std::string::npos) {
    return Status(Code::kInvalid, "no \"#, usec\" sample list in the output (was -U given?)");
  }
  std::istringstream lines(text.substr(at));
  std::string line;
  std::getline(lines, line);  // the header
  std::vector<uint64_t> nanos;
  while (std::getline(lines, line)) {
    auto fields = Numbers(line);
    if (!fields || fields->size() != 2) break;
    double number = (*fields)[0];
    double usec = (*fields)[1];
    if (number != static_cast<double>(nanos.size() + 1) || !std::isfinite(usec) || usec < 0) {
      return Status(Code::kInvalid, "unexpected sample line '" + line + "'");
    }
    nanos.push_back(static_cast<uint64_t>(std::llround(usec * 1000.0 * rtt_factor)));
  }
  if (nanos.empty()) return Status(Code::kInvalid, "an empty sample list");
  return nanos;
}

Result<double> ParseAverageBandwidth(const std::string& text, uint64_t msg_bytes) {
  // The table: " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
  // MsgRate[Mpps]", then one row per size.
  size_t header = text.find("BW average[Gb/sec]");
  if (header == std::string::npos) {
    return Status(Code::kInvalid,
                  "no \"BW average[Gb/sec]\" column in the output (was --report_gbits "
                  "given?)");
  }
  std::istringstream lines(text.substr(header));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    auto fields = Numbers(line);
    if (fields && fields->size() >= 4 && (*fields)[0] == static_cast<double>(msg_bytes)) {
      double average = (*fields)[3];
      if (!(average > 0)) {
        return Status(Code::kInvalid, "average bandwidth is not positive: " + line);
      }
      return average / 8.0;  // 10^9 bit/s -> 10^9 B/s
    }
  }
  return Status(Code::kInvalid,
                "no result row for " + std::to_string(msg_bytes) + " B under the header");
}

}  // namespace mcdma::perftest
