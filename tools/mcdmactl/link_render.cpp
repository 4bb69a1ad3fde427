#include "link_render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "render.hpp"
#include "table.hpp"

namespace mcdma::tools {
namespace {

// Longest LAST ERROR cell; the full text is in --json.
constexpr size_t kLastErrorWidth = 48;

std::string Micros(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", us);
  return text;
}

// A daemon-supplied string made safe for one table cell: control characters
// (a newline would break the row) become spaces, and text beyond `width`
// bytes is cut at a UTF-8 character boundary and marked with "...".
std::string Cell(const std::string& text, size_t width) {
  std::string cell = text;
  for (char& c : cell) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (cell.size() <= width) return cell;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(cell[cut]) & 0xc0) == 0x80) --cut;
  return cell.substr(0, cut) + "...";
}

// The shortest decimal that reads back as `value` (a finite number), as
// protobuf prints doubles: "10", "20.25".
std::string JsonNumber(double value) {
  char text[32];
  if (std::abs(value) < 0x1p53 && value == std::trunc(value)) {
    std::snprintf(text, sizeof(text), "%.0f", value);
    return text;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// "up", or "reconnecting, retry in 2.0s" while a retry is pending.
std::string StateCell(const v1::LinkInfo& link) {
  std::string state = Cell(link.state(), 16);
  if (link.retry_in_ms() > 0 && (link.state() == "reconnecting" || link.state() == "refused")) {
    state += ", retry in " + FormatDuration(static_cast<double>(link.retry_in_ms()) / 1e3);
  }
  return state;
}

// The transport in use; until one is chosen, the requested one in brackets.
std::string TransportCell(const v1::LinkInfo& link) {
  if (!link.transport().empty()) return Cell(link.transport(), 16);
  return "(" + Cell(link.transport_requested().empty() ? "auto" : link.transport_requested(), 16) +
         ")";
}

// The smoothed heartbeat round trip, else the latest; "-" until measured.
std::string RttCell(const v1::LinkInfo& link) {
  const double rtt = link.rtt_avg_us() > 0 ? link.rtt_avg_us() : link.rtt_us();
  return std::isfinite(rtt) && rtt > 0 ? Micros(rtt) : "-";
}

// "320 MB/s" (one decimal under 10), "-" until measured.
std::string ThroughputCell(double mbps) {
  if (!std::isfinite(mbps) || mbps <= 0) return "-";
  char text[48];
  std::snprintf(text, sizeof(text), mbps < 10 ? "%.1f MB/s" : "%.0f MB/s", std::min(mbps, 1e12));
  return text;
}

// "0.51": the rail's share of recent striped bytes, clamped to [0, 1].
std::string ShareCell(double share) {
  if (!std::isfinite(share) || share < 0) share = 0;
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f", std::min(share, 1.0));
  return text;
}

// The link's own connection: its transport and "(link)"; another rail: its
// name ("tcp:10.1.1.1>10.1.1.2"), else "LOCAL>REMOTE".
std::string RailNameCell(const v1::RailInfo& rail) {
  if (rail.local().empty() && rail.index() == 0) {
    return Cell(rail.transport().empty() ? "?" : rail.transport(), 16) + " (link)";
  }
  // An RDMA rail says its profile: one host may mix them (apple-tb5
  // devices and a ConnectX).
  std::string profile = rail.transport() == "verbs" && !rail.profile().empty()
                            ? " (" + Cell(rail.profile(), 16) + ")"
                            : "";
  if (!rail.name().empty()) return Cell(rail.name(), 64) + profile;
  return Cell(rail.local(), 31) + ">" + Cell(rail.remote(), 31) + profile;
}

// "down, retry in 1.0s" while a held-down rail waits for its next probe.
std::string RailStateCell(const v1::RailInfo& rail) {
  std::string state = Cell(rail.state().empty() ? "-" : rail.state(), 16);
  if (rail.retry_in_ms() > 0 && rail.state() == "down") {
    state += ", retry in " + FormatDuration(static_cast<double>(rail.retry_in_ms()) / 1e3);
  }
  return state;
}

// "msgs" on the rail that carries messages, "last resort" on rail 0 while
// other rails exist.
std::string RailRoleCell(const v1::RailInfo& rail) {
  std::string role = rail.messages() ? "msgs" : "";
  if (rail.last_resort()) role += role.empty() ? "last resort" : ", last resort";
  return role;
}

// The rails of a link worth a line each: none when the link's own
// connection is its only rail.
bool HasRails(const v1::LinkInfo& link) {
  return link.rails_size() > 1 || (link.rails_size() == 1 && !link.rails(0).local().empty());
}

// Each rail of each link as one aligned line (columns shared by all links),
// indented under its link's row; `rail_lines[i]` holds link i's.
std::vector<std::vector<std::string>> RailLines(const v1::LinksReply& reply) {
  std::vector<std::vector<std::string>> rail_lines(static_cast<size_t>(reply.links_size()));
  // Headerless: each cell names what it shows.
  Table table({{""}, {""}, {""}, {""}, {"", true}, {""}, {""}, {""}, {""}, {""}, {""}});
  std::vector<size_t> owner;
  for (int i = 0; i < reply.links_size(); ++i) {
    const v1::LinkInfo& link = reply.links(i);
    if (!HasRails(link)) continue;
    for (const v1::RailInfo& rail : link.rails()) {
      table.AddRow(
          {"rail " + Num(rail.index()), RailNameCell(rail), RailStateCell(rail), RailRoleCell(rail),
           ThroughputCell(rail.throughput_mbps()), "share " + ShareCell(rail.share()),
           "tx/rx " + FormatBytes(rail.bytes_sent()) + "/" + FormatBytes(rail.bytes_received()),
           "inflight " + FormatBytes(rail.inflight_bytes()),
           "reissued " + Num(rail.slices_reissued()), "downs " + Num(rail.downs()),
           Cell(rail.last_error(), kLastErrorWidth)});
      owner.push_back(static_cast<size_t>(i));
    }
  }
  if (owner.empty()) return rail_lines;
  std::ostringstream text;
  table.Print(text, "  ");
  std::istringstream lines(text.str());
  std::string line;
  std::getline(lines, line);  // the (empty) header
  for (size_t row = 0; row < owner.size() && std::getline(lines, line); ++row) {
    rail_lines[owner[row]].push_back(line);
  }
  return rail_lines;
}

void PrintPeeringLine(const v1::LinksReply& reply, std::ostream& out) {
  out << "host " << (reply.host_id().empty() ? "-" : reply.host_id()) << ", peering "
      << (reply.peering() ? "on" : "off");
  if (!reply.listen().empty()) out << " (listen " << reply.listen() << ")";
  if (!reply.fabric_key_fingerprint().empty())
    out << ", fabric key " << reply.fabric_key_fingerprint();
  out << '\n';
  if (!reply.peering()) {
    out << "no fabric_key configured: create one with `mcdmactl fabric-key new PATH` and start "
           "mcdma-rpcd with --fabric-key PATH\n";
  }
}

// One line per RDMA device port (each a verbs rail of every link): its
// state, GID, profile and budgets in use.
void PrintRdmaPorts(const v1::LinksReply& reply, std::ostream& out) {
  if (!reply.peering()) return;
  if (reply.devices().empty()) {
    if (!reply.verbs().reason().empty())
      out << "rdma: none (" << Cell(reply.verbs().reason(), 200) << ")\n";
    return;
  }
  auto budget = [](uint32_t used, uint32_t most) {
    return Num(used) + "/" + (most == 0 ? std::string("-") : Num(most));
  };
  for (const v1::LocalVerbs& v : reply.devices()) {
    out << "rdma " << Cell(v.rail(), 80) << ": " << Cell(v.state(), 16) << ", GID "
        << Cell(v.gid(), 64) << ", profile " << Cell(v.profile(), 16) << " (device is "
        << Cell(v.detected_profile(), 16) << "), MTU " << Num(v.active_mtu()) << ", QPs "
        << budget(v.queue_pairs(), v.max_queue_pairs()) << ", MRs "
        << budget(v.registrations(), v.max_registrations());
    if (!v.port_failure().empty()) out << ", " << Cell(v.port_failure(), kLastErrorWidth);
    out << '\n';
  }
}

}  // namespace

RttStats ComputeRttStats(std::vector<double> rtt_us) {
  if (rtt_us.empty()) return {};
  for (double& rtt : rtt_us) {
    if (!std::isfinite(rtt) || rtt < 0) rtt = 0;
  }
  std::sort(rtt_us.begin(), rtt_us.end());
  return {rtt_us.front(), rtt_us[(rtt_us.size() - 1) / 2], rtt_us.back()};
}

Status RenderLinks(const v1::LinksReply& reply, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  PrintPeeringLine(reply, out);
  PrintRdmaPorts(reply, out);
  if (reply.links().empty()) {
    out << "no links\n";
    return Status::Ok();
  }
  Table table({{"PEER"},
               {"STATE"},
               {"TRANSPORT"},
               {"GEN", true},
               {"RTT(us)", true},
               {"IN-FLIGHT", true},
               {"TX/RX", true},
               {"CALLS OUT/IN", true},
               {"LAST ERROR"}});
  for (const auto& link : reply.links()) {
    const auto& c = link.counters();
    table.AddRow({Cell(link.peer(), 64), StateCell(link), TransportCell(link),
                  Num(link.generation()), RttCell(link), Num(link.inflight()),
                  FormatBytes(c.bytes_sent()) + "/" + FormatBytes(c.bytes_received()),
                  Num(c.calls_out()) + "/" + Num(c.calls_in()),
                  Cell(link.last_error(), kLastErrorWidth)});
  }
  // The table's lines (a header, then one per link, each cell one line),
  // each link's rails under its row.
  const std::vector<std::vector<std::string>> rail_lines = RailLines(reply);
  std::ostringstream text;
  table.Print(text);
  std::istringstream lines(text.str());
  std::string line;
  std::getline(lines, line);
  out << line << '\n';
  for (size_t i = 0; std::getline(lines, line); ++i) {
    out << line << '\n';
    if (i < rail_lines.size()) {
      for (const std::string& rail : rail_lines[i]) out << rail << '\n';
    }
  }
  return Status::Ok();
}

Status RenderLinkTest(const v1::LinkTestRequest& request, const v1::LinkTestReply& reply,
                      OutputFormat format, std::ostream& out) {
  const RttStats stats =
      ComputeRttStats(std::vector<double>(reply.rtt_us().begin(), reply.rtt_us().end()));
  if (format == OutputFormat::kJson) {
    auto request_json = ToJson(request);
    if (!request_json.ok()) return request_json.status();
    auto reply_json = ToJson(reply);
    if (!reply_json.ok()) return reply_json.status();
    // Both are non-empty objects (every field is printed): splice them.
    std::string json = request_json->substr(0, request_json->size() - 1) + "," +
                       reply_json->substr(1, reply_json->size() - 2);
    json += ",\"min_us\":" + JsonNumber(stats.min_us) + ",\"p50_us\":" + JsonNumber(stats.p50_us) +
            ",\"max_us\":" + JsonNumber(stats.max_us) + "}";
    out << json << '\n';
    return Status::Ok();
  }
  const std::string peer = Cell(request.peer(), 64);
  for (int i = 0; i < reply.rtt_us_size(); ++i) {
    out << "round trip " << i + 1 << ": " << request.bytes() << " bytes to " << peer
        << " and back, " << Micros(reply.rtt_us(i)) << " us\n";
  }
  out << peer << " via " << Cell(reply.transport(), 16) << " gen " << reply.generation() << ": "
      << reply.rtt_us_size() << " round trips of " << request.bytes()
      << " bytes verified; min/p50/max " << Micros(stats.min_us) << "/" << Micros(stats.p50_us)
      << "/" << Micros(stats.max_us) << " us\n";
  return Status::Ok();
}

}  // namespace mcdma::tools
