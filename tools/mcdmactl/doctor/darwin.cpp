// The parsers of doctor_darwin.hpp: macOS command output as text in, values
// out. The checks on what they return are in doctor_darwin_checks.cpp.
#include "doctor/darwin.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

#include "doctor/darwin_text.hpp"

namespace mcdma::tools::doctor {
namespace {

using text::Lower;
using text::Trim;

std::vector<std::string_view> Lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

// Whitespace-separated tokens.
std::vector<std::string_view> Tokens(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
    const size_t start = i;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) == 0) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

bool IsHex(std::string_view s) {
  return s.size() > 2 && (s.substr(0, 2) == "0x" || s.substr(0, 2) == "0X");
}

Status Unparsed(const char* what, std::string_view text, const char* expected) {
  return Status(Code::kInvalid, std::string("could not parse `") + what + "` output " +
                                    text::Quoted(text) + ": " + expected);
}

// The address bytes of an IP literal of `family` (AF_INET or AF_INET6),
// without any IPv6 "%zone"; false when it is not one.
bool AddressBytes(int family, std::string ip, unsigned char (&bytes)[16]) {
  const size_t zone = ip.find('%');
  if (zone != std::string::npos) ip.resize(zone);
  std::memset(bytes, 0, sizeof(bytes));
  return inet_pton(family, ip.c_str(), bytes) == 1;
}

}  // namespace

Result<bool> ParseRdmaCtlStatus(std::string_view text) {
  // Words of letters only, lower-cased, so "RDMA: Enabled." and "enabled"
  // read alike.
  const std::string lower = Lower(text);
  std::vector<std::string> words;
  std::string word;
  for (char c : lower + " ") {
    if (std::isalpha(static_cast<unsigned char>(c)) != 0) {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  bool enabled = false;
  bool disabled = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const bool negated = i > 0 && words[i - 1] == "not";
    if (words[i] == "disabled" || (words[i] == "enabled" && negated)) disabled = true;
    if (words[i] == "enabled" && !negated) enabled = true;
  }
  if (enabled == disabled) {
    return Unparsed(
        "rdma_ctl status", text,
        enabled ? "it says both enabled and disabled" : "expected it to say enabled or disabled");
  }
  return enabled;
}

Result<std::vector<LoadedKext>> ParseKmutilShowloaded(std::string_view text) {
  std::vector<LoadedKext> kexts;
  bool header = false;
  for (std::string_view line : Lines(text)) {
    const auto tokens = Tokens(line);
    if (tokens.empty()) continue;
    if (Lower(tokens[0]) == "index") {
      header = true;
      continue;
    }
    // A row starts with the load index; the name is the first token after
    // it that is neither a count nor an address, its version the next.
    if (!AllDigits(tokens[0])) continue;
    size_t i = 1;
    while (i < tokens.size() && (AllDigits(tokens[i]) || IsHex(tokens[i]))) ++i;
    if (i == 1 || i >= tokens.size()) continue;
    LoadedKext kext;
    kext.bundle_id = std::string(tokens[i]);
    if (i + 1 < tokens.size() && tokens[i + 1].size() > 2 && tokens[i + 1].front() == '(' &&
        tokens[i + 1].back() == ')') {
      kext.version = std::string(tokens[i + 1].substr(1, tokens[i + 1].size() - 2));
    }
    kexts.push_back(std::move(kext));
  }
  if (!header && kexts.empty()) {
    return Unparsed("kmutil showloaded", text,
                    "expected rows of \"Index Refs Address Size Wired Name (Version) UUID "
                    "<Linked Against>\"");
  }
  return kexts;
}

Result<std::vector<NetworkService>> ParseNetworkServices(std::string_view text) {
  std::vector<NetworkService> services;
  bool header = false;
  for (std::string_view line : Lines(text)) {
    const std::string_view t = Trim(line);
    if (t.empty()) continue;
    if (!header) {
      // "An asterisk (*) denotes that a network service is disabled."
      header = Lower(t).find("asterisk") != std::string::npos;
      continue;
    }
    NetworkService service;
    service.enabled = t.front() != '*';
    service.name = std::string(Trim(service.enabled ? t : t.substr(1)));
    if (!service.name.empty()) services.push_back(std::move(service));
  }
  if (!header) {
    return Unparsed("networksetup -listallnetworkservices", text,
                    "expected \"An asterisk (*) denotes that a network service is disabled.\" "
                    "and then one service per line");
  }
  return services;
}

Result<LimitPair> ParseLaunchctlLimit(std::string_view text, std::string_view resource) {
  const std::string want = Lower(resource);
  // One value: "unlimited" or bytes; RLIM_INFINITY is 2^63 - 1 on macOS.
  auto value = [](std::string_view token, bool& unlimited, uint64_t& bytes) {
    if (Lower(token) == "unlimited") {
      unlimited = true;
      return true;
    }
    if (!AllDigits(token)) return false;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), bytes);
    if (ec == std::errc::result_out_of_range) {
      bytes = std::numeric_limits<uint64_t>::max();
    } else if (ec != std::errc() || end != token.data() + token.size()) {
      return false;
    }
    unlimited = bytes >= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (unlimited) bytes = 0;
    return true;
  };
  for (std::string_view line : Lines(text)) {
    const auto tokens = Tokens(line);
    if (tokens.size() < 3 || Lower(tokens[0]) != want) continue;
    LimitPair limit;
    if (value(tokens[1], limit.soft_unlimited, limit.soft) &&
        value(tokens[2], limit.hard_unlimited, limit.hard)) {
      return limit;
    }
  }
  const std::string what = "launchctl limit " + std::string(resource);
  const std::string expected =
      "expected \"" + std::string(resource) + " SOFT HARD\", each unlimited or a number of bytes";
  return Unparsed(what.c_str(), text, expected.c_str());
}

Result<std::vector<InterfaceAddress>> ParseInterfaceList(std::string_view text) {
  std::vector<InterfaceAddress> out;
  size_t number = 0;
  for (std::string_view line : Lines(text)) {
    ++number;
    const size_t hash = line.find('#');
    const auto tokens = Tokens(hash == std::string_view::npos ? line : line.substr(0, hash));
    if (tokens.empty()) continue;
    InterfaceAddress a;
    if (tokens.size() >= 3 && tokens.size() <= 4) {
      a.name = std::string(tokens[0]);
      a.family = std::string(tokens[1]);
      a.address = std::string(tokens[2]);
      if (tokens.size() == 4) a.netmask = std::string(tokens[3]);
    }
    const int family = a.family == "inet" ? AF_INET : a.family == "inet6" ? AF_INET6 : -1;
    unsigned char bytes[16];
    if (family < 0 || !AddressBytes(family, a.address, bytes) ||
        (!a.netmask.empty() && !AddressBytes(family, a.netmask, bytes))) {
      return Status(Code::kInvalid, "interface list line " + std::to_string(number) + " " +
                                        text::Quoted(line) +
                                        ": expected NAME inet|inet6 ADDRESS [NETMASK]");
    }
    out.push_back(std::move(a));
  }
  return out;
}

bool OnSubnet(const std::string& ip, const InterfaceAddress& iface) {
  const int family = iface.family == "inet" ? AF_INET : iface.family == "inet6" ? AF_INET6 : -1;
  if (family < 0) return false;
  unsigned char peer[16];
  unsigned char local[16];
  unsigned char mask[16];
  if (!AddressBytes(family, ip, peer) || !AddressBytes(family, iface.address, local)) return false;
  if (iface.netmask.empty()) {
    std::memset(mask, 0xff, sizeof(mask));
  } else if (!AddressBytes(family, iface.netmask, mask)) {
    return false;
  }
  const size_t len = family == AF_INET ? 4 : 16;
  for (size_t i = 0; i < len; ++i) {
    if ((peer[i] & mask[i]) != (local[i] & mask[i])) return false;
  }
  return true;
}

std::string MacDeviceInterface(const std::string& device) {
  if (text::StartsWith(device, kCx5DevicePrefix)) return device;
  if (text::StartsWith(device, kThunderboltDevicePrefix)) return device.substr(5);  // "rdma_"
  return "";
}

}  // namespace mcdma::tools::doctor
