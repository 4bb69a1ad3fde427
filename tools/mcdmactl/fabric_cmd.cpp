#include "fabric_cmd.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "table.hpp"

namespace mcdma::tools {
namespace fabric_text {

// A daemon-supplied string made safe for one table cell or DOT id.
std::string Clean(const std::string& text, size_t width) {
  std::string cell = text;
  for (char& c : cell) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (cell.size() <= width) return cell;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(cell[cut]) & 0xc0) == 0x80) --cut;
  return cell.substr(0, cut) + "...";
}

// A DOT double-quoted string.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : Clean(text, 128)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string LinksCell(const v1::FabricHostView& h) {
  std::string out;
  for (const auto& l : h.links()) {
    if (l.state() != "up") continue;
    out += (out.empty() ? "" : ",") + l.peer();
  }
  return out.empty() ? "-" : out;
}

// "-" (this host, or no route), "direct", or "via b > c > d".
std::string RouteCell(const v1::FabricHostView& h) {
  if (h.route().empty()) return "-";
  if (h.route_size() == 1) return "direct";
  std::string out = "via";
  for (int i = 0; i + 1 < h.route_size(); ++i) out += (i == 0 ? " " : " > ") + h.route(i);
  return out;
}

std::string ReachCell(const v1::FabricHostView& h) {
  if (h.state() == "self") return "-";
  if (h.reach() == "direct") return "direct " + h.reach_detail();
  return "none";
}

// The pairs of hosts whose records both list their link up, each pair
// sorted, with what the lower end's record says of it.
std::map<std::pair<std::string, std::string>, v1::FabricAdjacency> Edges(
    const v1::FabricReply& reply) {
  std::map<std::pair<std::string, std::string>, v1::FabricAdjacency> half, both;
  for (const auto& h : reply.hosts()) {
    if (h.state() == "evicted") continue;
    for (const auto& l : h.links()) {
      if (l.state() != "up") continue;
      auto key = std::minmax(h.host(), l.peer());
      std::pair<std::string, std::string> k{key.first, key.second};
      if (half.count(k) != 0)
        both.emplace(k, h.host() == k.first ? l : half[k]);
      else
        half.emplace(k, l);
    }
  }
  return both;
}

}  // namespace fabric_text

Status RenderFabric(const v1::FabricReply& reply, OutputFormat format, std::ostream& out) {
  using namespace fabric_text;
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  if (reply.source().empty()) {
    out << "host " << Clean(reply.host_id(), 64)
        << ": no fabric (set fabric.store = \"etcd://HOST:PORT\" or fabric.file in the "
           "daemon's config); links come from [[peer]] tables and `mcdmactl link add`\n";
    return Status::Ok();
  }
  out << "host " << Clean(reply.host_id(), 64) << ", fabric " << Clean(reply.fabric_name(), 64)
      << ": " << reply.source() << " " << Clean(reply.store(), 200);
  if (reply.source() == "etcd") {
    out << " (" << Clean(reply.store_state(), 32);
    char lease[32];
    std::snprintf(lease, sizeof lease, "%llx", static_cast<unsigned long long>(reply.lease_id()));
    out << ", lease " << lease << " ttl " << reply.lease_ttl_ms() << " ms, revision "
        << reply.revision() << ", listed " << reply.relists() << "x)";
    if (!reply.store_error().empty()) out << "\n  store: " << Clean(reply.store_error(), 300);
  }
  out << "\n  addresses: " << (reply.addresses().empty() ? "none" : Join(reply.addresses()))
      << "\n";
  Table table({{"HOST"},
               {"STATE"},
               {"BOOT"},
               {"REACH"},
               {"LINK"},
               {"ADDRESSES"},
               {"LINKS UP"},
               {"ROUTE"},
               {"AGE(ms)", true}});
  for (const auto& h : reply.hosts()) {
    table.AddRow({Clean(h.host(), 64), Clean(h.state(), 16),
                  h.boot_generation() == 0 ? "-" : Num(h.boot_generation()),
                  Clean(ReachCell(h), 40), h.link_state().empty() ? "-" : Clean(h.link_state(), 16),
                  Clean(Join(h.addresses()), 80), Clean(LinksCell(h), 120),
                  Clean(RouteCell(h), 120), h.state() == "self" ? "-" : Num(h.age_ms())});
  }
  table.Print(out);
  for (const auto& h : reply.hosts()) {
    if (h.state() != "self" && h.reach() != "direct" && h.state() != "evicted" && h.route().empty())
      out << "  " << Clean(h.host(), 64)
          << ": no direct path and no route: " << Clean(h.reach_detail(), 200) << "\n";
  }
  const v1::FabricRelay& r = reply.relay();
  const uint64_t dropped = r.dropped_hop_limit() + r.dropped_no_route() + r.dropped_full() +
                           r.dropped_stale() + r.dropped_refused() + r.dropped_looped();
  if (r.forwarded() != 0 || dropped != 0 || !r.routed().empty()) {
    out << "relayed for others: " << Num(r.forwarded()) << " messages ("
        << FormatBytes(r.forwarded_bytes()) << "), dropped " << Num(dropped) << " (hop limit "
        << Num(r.dropped_hop_limit()) << ", no route " << Num(r.dropped_no_route()) << ", budget "
        << Num(r.dropped_full()) << ", stale " << Num(r.dropped_stale()) << ", refused "
        << Num(r.dropped_refused()) << ", loop " << Num(r.dropped_looped()) << ")\n";
    for (const auto& l : r.routed()) {
      out << "  routed link to " << Clean(l.peer(), 64) << ": next hop "
          << (l.next_hop().empty() ? std::string("none") : Clean(l.next_hop(), 64)) << ", calls "
          << Num(l.calls_out()) << "/" << Num(l.calls_in()) << ", unacked " << Num(l.unacked())
          << ", sent again " << Num(l.resent()) << ", route changes " << Num(l.route_changes())
          << "\n";
    }
  }
  return Status::Ok();
}

Status RenderFabricGraph(const v1::FabricReply& reply, std::ostream& out) {
  using namespace fabric_text;
  out << "graph fabric {\n  node [shape=box];\n";
  for (const auto& h : reply.hosts()) {
    out << "  " << Quoted(h.host());
    if (h.state() == "self") out << " [style=bold]";
    if (h.state() == "evicted") out << " [style=dashed]";
    out << ";\n";
  }
  for (const auto& [pair, adj] : Edges(reply)) {
    char label[96];
    std::snprintf(label, sizeof label, "%s, %u rails, %.0f us", Clean(adj.transport(), 16).c_str(),
                  adj.rails_up(), adj.rtt_us());
    out << "  " << Quoted(pair.first) << " -- " << Quoted(pair.second)
        << " [label=" << Quoted(label) << "];\n";
  }
  out << "}\n";
  return Status::Ok();
}

void AddFabricCommands(CLI::App& app, bool& json, Action& chosen) {
  CLI::App* fabric = app.add_subcommand(
      "fabric", "The fabric: membership, hosts, how each is reached, their links");
  fabric->add_flag("--json", json,
                   "Print the reply as one JSON object (snake_case keys, all fields present)");
  fabric->callback([&chosen] {
    if (chosen) return;  // a subcommand chose
    chosen = [](AdminClient& c, OutputFormat f, Streams io) {
      return Report("fabric", c, c.Fabric(), &RenderFabric, f, io);
    };
  });
  CLI::App* graph = fabric->add_subcommand(
      "graph", "The fabric as Graphviz DOT (hosts; an edge per link both ends list up)");
  graph->callback([&chosen] {
    chosen = [](AdminClient& c, OutputFormat, Streams io) {
      return Report(
          "fabric graph", c, c.Fabric(),
          [](const v1::FabricReply& r, OutputFormat, std::ostream& out) {
            return RenderFabricGraph(r, out);
          },
          OutputFormat::kText, io);
    };
  });
}

}  // namespace mcdma::tools
