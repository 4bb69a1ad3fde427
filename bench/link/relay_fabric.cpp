#include "relay_fabric.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "harness/pair_runner.hpp"

namespace mcdma::bench {

namespace {

using harness::Clock;
using harness::Millis;

constexpr Millis kCommandLimit(30000);
constexpr Millis kSocketWait(20000);  // a daemon starts slowly under TCG
constexpr Millis kDaemonStopGrace(5000);
constexpr Millis kRoutePoll(200);

const std::string& BashPath() {
  static const std::string kPath = [] {
    for (const char* p : {"/bin/bash", "/usr/bin/bash"}) {
      if (access(p, X_OK) == 0) return std::string(p);
    }
    std::string found = harness::FindInPath("bash");
    return found.empty() ? std::string("bash") : found;
  }();
  return kPath;
}

const std::string& IpPath() {
  static const std::string kPath = [] {
    for (const char* p : {"/sbin/ip", "/usr/sbin/ip", "/bin/ip", "/usr/bin/ip"}) {
      if (access(p, X_OK) == 0) return std::string(p);
    }
    std::string found = harness::FindInPath("ip");
    return found.empty() ? std::string("ip") : found;
  }();
  return kPath;
}

std::string Letter(size_t i) { return std::string(1, static_cast<char>('a' + i)); }

const v1::FabricHostView* HostIn(const v1::FabricReply& f, const std::string& host) {
  for (const v1::FabricHostView& h : f.hosts()) {
    if (h.host() == host) return &h;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<RelayFabric>> RelayFabric::Make(const RelayFabricConfig& config,
                                                       const harness::TempDir& dir) {
  std::unique_ptr<RelayFabric> f(new RelayFabric());
  f->config_ = config;
  f->dir_ = dir.path();
  const std::string prefix = "mcry" + std::to_string(getpid());
  MCDMA_ASSIGN_OR_RETURN(f->hosts_,
                         harness::Hosts::MakeNamespaces(config.hosts_script, prefix, kHosts));
  f->hosts_->RemoveOnSignals();
  for (size_t x = 0; x + 1 < kHosts; ++x) {
    std::vector<std::string> argv = {BashPath(), config.hosts_script, "cable",
                                     prefix,     Letter(x),           Letter(x + 1)};
    if (!config.rate.empty()) argv.push_back(config.rate);
    harness::CommandResult r = harness::RunCommand(argv, kCommandLimit);
    RelayCable cable;
    std::istringstream in(r.out);
    if (r.exit_code() != 0 || !(in >> cable.address[0] >> cable.address[1])) {
      return Status(Code::kInternal, "hosts.sh cable " + Letter(x) + " " + Letter(x + 1) + ": " +
                                         r.Describe() + ": " + harness::LastLine(r.err + r.out));
    }
    cable.interface[0] = "c-" + Letter(x + 1);
    cable.interface[1] = "c-" + Letter(x);
    cable.label = Letter(x) + "-" + Letter(x + 1);
    f->cables_.push_back(cable);
  }
  return f;
}

RelayFabric::~RelayFabric() {
  // a first: the host whose apps the run drives.
  for (harness::DaemonHost& h : daemons_) {
    if (h.daemon) harness::StopChild("mcdma_bench_link relay", *h.daemon, kDaemonStopGrace);
  }
  daemons_.clear();
  hosts_.reset();
}

Status RelayFabric::StartDaemons() {
  if (access(config_.daemon_path.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, "no executable mcdma-rpcd at " + config_.daemon_path +
                                       " (build it or pass --daemon)");
  }
  const std::string key = dir_ + "/fabric.key";
  MCDMA_RETURN_IF_ERROR(harness::WriteFabricKey(key));
  // Every host's Peer service on each of its cables' addresses; the
  // cables themselves, so only they decide who links to whom.
  std::vector<std::vector<std::string>> addresses(kHosts);
  for (size_t x = 0; x < cables_.size(); ++x) {
    for (size_t end = 0; end < 2; ++end) {
      addresses[x + end].push_back(cables_[x].address[end] + ":" +
                                   std::to_string(harness::kPeerPort));
    }
  }
  std::string text;
  for (size_t i = 0; i < kHosts; ++i) {
    text += "[[host]]\nid = \"" + (*hosts_)[i].id + "\"\naddresses = [";
    for (size_t k = 0; k < addresses[i].size(); ++k)
      text += (k ? ", \"" : "\"") + addresses[i][k] + "\"";
    text += "]\n";
  }
  for (size_t x = 0; x < cables_.size(); ++x) {
    text += "[[cable]]\nhosts = [\"" + (*hosts_)[x].id + "\", \"" + (*hosts_)[x + 1].id + "\"]\n";
  }
  fabric_file_ = dir_ + "/fabric.toml";
  MCDMA_RETURN_IF_ERROR(harness::WriteFile(fabric_file_, text));

  const std::string log_dir = config_.log_dir.empty() ? dir_ : config_.log_dir;
  daemons_.resize(kHosts);
  for (size_t i = 0; i < kHosts; ++i) {
    harness::DaemonHost& h = daemons_[i];
    static_cast<harness::Host&>(h) = (*hosts_)[i];
    h.address = "0.0.0.0";  // every cable's address; the file says which to dial
    h.peer_port = harness::kPeerPort;
    h.data_port = harness::kDataPort;
    h.socket = dir_ + "/rpcd-" + Letter(i) + ".sock";
    h.key = key;
    h.log_level = config_.log_level;
    h.log = log_dir + "/rpcd-" + Letter(i) + ".log";
    h.truncate_log = true;
    h.extra = {"--fabric-file", fabric_file_,         "--fabric-interfaces",
               "c-*",           "--fabric-transport", "tcp"};
    h.extra.insert(h.extra.end(), config_.daemon_args.begin(), config_.daemon_args.end());
  }
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}, size_t{0}}) {
    MCDMA_RETURN_IF_ERROR(harness::StartDaemon(config_.daemon_path, daemons_[i], kSocketWait));
  }
  return Status::Ok();
}

Result<v1::FabricReply> RelayFabric::Fabric(size_t i) const {
  return harness::ReadFabric(config_.mcdmactl_path, daemons_[i]);
}

RelayCounters RelayFabric::Relayed(size_t i) const {
  RelayCounters c;
  auto f = Fabric(i);
  if (!f.ok()) return c;
  const v1::FabricRelay& r = f->relay();
  c.read = true;
  c.forwarded = r.forwarded();
  c.forwarded_bytes = r.forwarded_bytes();
  c.dropped = r.dropped_hop_limit() + r.dropped_no_route() + r.dropped_full() + r.dropped_stale() +
              r.dropped_refused() + r.dropped_looped();
  return c;
}

std::string RelayFabric::DescribeRoutes(const v1::FabricReply& f) const {
  std::string out;
  for (size_t j = 1; j < kHosts; ++j) {
    const std::string& id = (*hosts_)[j].id;
    const v1::FabricHostView* h = HostIn(f, id);
    std::string how;
    if (h == nullptr) {
      how = "not listed";
    } else if (h->route_size() == 0) {
      how = "no route (reach " + h->reach() + (h->link_state().empty() ? "" : ", link ") +
            h->link_state() + ")";
    } else if (h->route_size() == 1) {
      how = "direct, link " + (h->link_state().empty() ? std::string("?") : h->link_state());
    } else {
      how = "via ";
      for (int k = 0; k + 1 < h->route_size(); ++k) how += (k ? ", " : "") + h->route(k);
    }
    char cost[48] = "";
    if (h != nullptr && h->route_size() > 0)
      snprintf(cost, sizeof(cost), " (cost %.0f us)", h->route_cost_us());
    if (!out.empty()) out += "; ";
    out += id;
    out += " ";
    out += how;
    out += cost;
  }
  return out;
}

Result<double> RelayFabric::WaitForRoutes(Millis limit) {
  const auto start = Clock::now();
  std::vector<std::string> state(kHosts, "(not read)");
  while (Clock::now() < start + limit) {
    if (std::string gone = Exited(); !gone.empty()) return Status(Code::kUnavailable, gone);
    size_t ready = 0;
    for (size_t i = 0; i < kHosts; ++i) {
      auto f = Fabric(i);
      if (!f.ok()) {
        state[i] = harness::LastLine(f.status().message());
        continue;
      }
      bool all = true;
      std::string missing;
      for (size_t j = 0; j < kHosts; ++j) {
        if (j == i) continue;
        const std::string& id = (*hosts_)[j].id;
        const v1::FabricHostView* h = HostIn(*f, id);
        const size_t hops = i > j ? i - j : j - i;
        bool ok = h != nullptr && static_cast<size_t>(h->route_size()) == hops;
        if (ok && hops == 1) ok = h->link_state() == "up" || h->link_state().empty();
        if (!ok) {
          all = false;
          missing += (missing.empty() ? "" : ", ") + id + " (" +
                     (h == nullptr ? std::string("not listed")
                                   : std::to_string(h->route_size()) + " hops, link " +
                                         (h->link_state().empty() ? "-" : h->link_state())) +
                     ")";
        }
      }
      state[i] = all ? "ready" : "waiting for " + missing;
      if (i == 0) routes_note_ = DescribeRoutes(*f);
      ready += all;
    }
    if (ready == kHosts) return std::chrono::duration<double>(Clock::now() - start).count();
    std::this_thread::sleep_for(kRoutePoll);
  }
  std::string why;
  for (size_t i = 0; i < kHosts; ++i) why += "; " + (*hosts_)[i].id + ": " + state[i];
  return Status(Code::kTimeout,
                "routes not all there within " + std::to_string(limit.count() / 1000) + " s" + why);
}

std::vector<uint64_t> RelayFabric::CableTx() const {
  std::vector<uint64_t> out;
  for (size_t x = 0; x < cables_.size(); ++x) {
    for (size_t end = 0; end < 2; ++end) {
      const harness::Host& h = (*hosts_)[x + end];
      harness::CommandResult r = harness::RunCommand(
          {IpPath(), "netns", "exec", h.netns, "cat",
           "/sys/class/net/" + cables_[x].interface[end] + "/statistics/tx_bytes"},
          kCommandLimit);
      char* tail = nullptr;
      uint64_t v = strtoull(r.out.c_str(), &tail, 10);
      if (r.exit_code() != 0 || tail == r.out.c_str()) return {};
      out.push_back(v);
    }
  }
  return out;
}

std::string RelayFabric::Exited() {
  for (harness::DaemonHost& h : daemons_) {
    std::string gone = harness::DaemonEnded(h);
    if (!gone.empty()) return h.id + "'s " + gone;
  }
  return "";
}

std::string RelayFabric::LogTails(int lines) const {
  std::string out;
  for (const harness::DaemonHost& h : daemons_) {
    std::string tail = harness::LastLines(harness::ReadFile(h.log), lines);
    for (size_t start = 0; start < tail.size();) {
      size_t nl = tail.find('\n', start);
      out += "  " + h.id + ": " + tail.substr(start, nl - start) + "\n";
      start = nl + 1;
    }
  }
  return out;
}

}  // namespace mcdma::bench
