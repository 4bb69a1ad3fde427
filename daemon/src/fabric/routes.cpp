#include "fabric/routes.hpp"

#include <limits>
#include <set>

namespace mcdma::daemon::fabric {
namespace {

constexpr double kHopCostUs = 100;
constexpr double kUnmeasuredRttUs = 1000;

struct Edge {
  std::string to;
  double cost_us = 0;
};

// The links a record lists up, with their round trips.
std::map<std::string, double> UpLinks(const v1::FabricHostRecord& r) {
  std::map<std::string, double> out;
  for (const auto& l : r.links()) {
    if (l.state() == "up") out[l.peer()] = l.rtt_us();
  }
  return out;
}

struct Label {
  double cost = std::numeric_limits<double>::infinity();
  std::vector<std::string> path;  // hosts after the source
};

bool Better(const Label& a, const Label& b) {
  if (a.cost != b.cost) return a.cost < b.cost;
  if (a.path.size() != b.path.size()) return a.path.size() < b.path.size();
  return a.path < b.path;
}

}  // namespace

std::map<std::string, RouteEntry> ComputeRoutes(
    const v1::FabricHostRecord& self, const std::map<std::string, v1::FabricHostRecord>& records) {
  std::map<std::string, std::map<std::string, double>> up;
  up[self.host()] = UpLinks(self);
  for (const auto& [host, r] : records) up[host] = UpLinks(r);
  // An edge where both ends list the link up.
  std::map<std::string, std::vector<Edge>> graph;
  for (const auto& [a, links] : up) {
    for (const auto& [b, rtt_a] : links) {
      auto other = up.find(b);
      if (other == up.end() || a == b) continue;
      auto back = other->second.find(a);
      if (back == other->second.end()) continue;
      double rtt = 0;
      int n = 0;
      for (double v : {rtt_a, back->second}) {
        if (v > 0) {
          rtt += v;
          ++n;
        }
      }
      rtt = n == 0 ? kUnmeasuredRttUs : rtt / n;
      graph[a].push_back({b, rtt + kHopCostUs});
    }
  }
  // Dijkstra with the tie rules above (a few hundred hosts at most).
  std::map<std::string, Label> best;
  std::set<std::string> done;
  best[self.host()] = Label{0, {}};
  for (;;) {
    const std::string* pick = nullptr;
    for (const auto& [host, label] : best) {
      if (done.count(host) != 0) continue;
      if (pick == nullptr || Better(label, best[*pick])) pick = &host;
    }
    if (pick == nullptr) break;
    const std::string u = *pick;
    done.insert(u);
    const Label at = best[u];
    if (at.path.size() >= kMaxRouteHops) continue;
    for (const Edge& e : graph[u]) {
      if (done.count(e.to) != 0) continue;
      Label cand{at.cost + e.cost_us, at.path};
      cand.path.push_back(e.to);
      auto it = best.find(e.to);
      if (it == best.end() || Better(cand, it->second)) best[e.to] = std::move(cand);
    }
  }
  std::map<std::string, RouteEntry> out;
  for (const auto& [host, label] : best) {
    if (host == self.host() || label.path.empty()) continue;
    RouteEntry r;
    r.next_hop = label.path.front();
    r.hops = label.path;
    r.cost_us = label.cost;
    if (auto it = records.find(host); it != records.end()) r.instance = it->second.instance();
    out.emplace(host, std::move(r));
  }
  return out;
}

}  // namespace mcdma::daemon::fabric
