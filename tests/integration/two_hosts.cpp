#include "two_hosts.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>
#include <sstream>

namespace mcdma::itest {
namespace {

// Link timing for every test: fast enough that a dead peer or a cut wire is
// noticed within ~1.5 s and a restored one is back within ~1 s.
const std::vector<std::string> kLinkFlags = {
    "--heartbeat-ms", "200", "--link-timeout-ms", "1500", "--reconnect-max-ms", "1000"};
// The verbs variant's VM emulates its CPUs: under load a Peer service call
// (bounded by the link timeout) takes longer than 1.5 s there.
const std::vector<std::string> kVmLinkFlags = {
    "--heartbeat-ms", "1000", "--link-timeout-ms", "8000", "--reconnect-max-ms", "6000"};

std::atomic<int> g_prefix_counter{0};

}  // namespace

std::string HostVariantName(const ::testing::TestParamInfo<HostVariant>& info) {
  switch (info.param) {
    case HostVariant::kNetns:
      return "netns";
    case HostVariant::kVerbs:
      return "verbs";
    case HostVariant::kLoopback:
      break;
  }
  return "loopback";
}

void PrintTo(HostVariant v, std::ostream* os) {
  *os << HostVariantName(::testing::TestParamInfo<HostVariant>(v, 0));
}

void TwoHostsBase::SetUp() {
  REQUIRE_MCDMACTL();
  ASSERT_TRUE(dir_.ok()) << dir_.error();
  if (verbs() && std::getenv("MCDMA_VERBS_HOSTS") == nullptr) {
    GTEST_SKIP() << "verbs variant: no Soft-RoCE devices here (MCDMA_VERBS_HOSTS is unset); it "
                    "runs inside the Soft-RoCE VM (tests/verbs/run-vm-tests.sh, ctest "
                    "Verbs.SoftRoce)";
  }
  if (netns()) {
    Status check = harness::Hosts::Check(kHostsScript);
    if (check.code() == Code::kUnavailable) {
      GTEST_SKIP() << "netns variant: " << kHostsScript << " check: " << check.message()
                   << "(run as root, as CI does, to test two hosts in network namespaces)";
    }
    ASSERT_TRUE(check.ok()) << "hosts.sh check: " << check.message();
  }
  if (netns()) {
    ASSERT_NO_FATAL_FAILURE(PrepareNetns());
  } else if (verbs()) {
    ASSERT_NO_FATAL_FAILURE(PrepareVerbs());
  } else {
    ASSERT_NO_FATAL_FAILURE(PrepareLoopback());
  }
  std::string key = NewFabricKey("fabric.key");
  ASSERT_FALSE(key.empty());
  const std::vector<std::string>& timing = verbs() ? kVmLinkFlags : kLinkFlags;
  for (Host* h : {&a_, &b_}) {
    std::string tag = h->id.substr(5);  // "a" / "b"
    h->socket = dir() + "/" + tag + ".sock";
    h->log = dir() + "/daemon-" + h->id + ".log";
    h->key = key;
    h->extra.insert(h->extra.begin(), timing.begin(), timing.end());
  }
  a_.peers = {"host-b=" + b_.listen() + "," + transport()};
  if (LinkAtSetUp()) {
    ASSERT_NO_FATAL_FAILURE(StartDaemons());
  }
}

void TwoHostsBase::AdoptHosts(std::unique_ptr<harness::Hosts> hosts) {
  hosts_ = std::move(hosts);
  static_cast<harness::Host&>(a_) = (*hosts_)[0];
  static_cast<harness::Host&>(b_) = (*hosts_)[1];
}

void TwoHostsBase::PrepareLoopback() {
  std::vector<uint16_t> ports = harness::FreePorts(4);
  ASSERT_EQ(ports.size(), 4u) << "cannot find free ports on 127.0.0.1: " << std::strerror(errno);
  AdoptHosts(harness::Hosts::Loopback(2));
  a_.peer_port = ports[0];
  a_.data_port = ports[1];
  b_.peer_port = ports[2];
  b_.data_port = ports[3];
}

// MCDMA_VERBS_HOSTS="DEV:IF:IP,DEV:IF:IP": host-a's device, interface and
// address, then host-b's.
void TwoHostsBase::PrepareVerbs() {
  std::string spec = std::getenv("MCDMA_VERBS_HOSTS");
  const char* profile = std::getenv("MCDMA_VERBS_PROFILE");
  profile_ = profile != nullptr && *profile != '\0' ? profile : "linux-rc";
  std::istringstream list(spec);
  std::vector<harness::Host> hosts;
  std::string one;
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(std::getline(list, one, ',')) << "MCDMA_VERBS_HOSTS: two entries, got " << spec;
    std::istringstream parts(one);
    std::string dev, netdev, ip;
    ASSERT_TRUE(std::getline(parts, dev, ':') && std::getline(parts, netdev, ':') &&
                std::getline(parts, ip))
        << "MCDMA_VERBS_HOSTS entry is not DEV:IF:IP: " << one;
    hosts.push_back(harness::Host{harness::HostId(i), "", ip, dev, netdev});
  }
  AdoptHosts(harness::Hosts::Shared(std::move(hosts)));
  for (Host* h : {&a_, &b_}) {
    h->peer_port = harness::kPeerPort;
    h->data_port = harness::kDataPort;
    h->extra = {"--verbs-device",   h->verbs_device,   "--verbs-interface",
                h->verbs_interface, "--verbs-profile", profile_};
  }
}

void TwoHostsBase::PrepareNetns() {
  // Short and unique per test process and test: namespace and veth names
  // derive from it (hosts.sh).
  std::string prefix =
      "mcit" + std::to_string(getpid() % 100000) + "n" + std::to_string(++g_prefix_counter);
  auto made = harness::Hosts::MakeNamespaces(kHostsScript, prefix, 2);
  ASSERT_TRUE(made.ok()) << made.status().message();
  AdoptHosts(std::move(made).value());
  for (Host* h : {&a_, &b_}) {
    h->peer_port = harness::kPeerPort;
    h->data_port = harness::kDataPort;
  }
}

void TwoHostsBase::TearDown() {
  for (auto& app : apps_) app->Kill();
  // KillDaemon drops the Child, so a daemon still held here that is not
  // running died on its own.
  std::vector<Host*> stopping;
  for (Host* h : {&a_, &b_}) {
    if (!h->daemon) continue;
    if (h->daemon->Alive()) {
      h->daemon->Signal(SIGTERM);
      stopping.push_back(h);
    } else {
      ADD_FAILURE() << h->id << "'s mcdma-rpcd died during the test: "
                    << DescribeStatus(h->daemon->exit_status().value_or(0));
    }
  }
  for (Host* h : stopping) {
    auto st = h->daemon->WaitExit(Millis(15000));
    if (!st) {
      ADD_FAILURE() << h->id << "'s mcdma-rpcd did not exit within 15 s of SIGTERM";
      h->daemon->Kill();
    } else if (!ExitedWith(st, 0)) {
      ADD_FAILURE() << h->id << "'s mcdma-rpcd ended with " << DescribeStatus(*st)
                    << " after SIGTERM";
    }
  }
  if (hosts_ && hosts_->netns()) {
    CommandResult down = hosts_->Down();
    EXPECT_EQ(down.exit_code(), 0)
        << "hosts.sh down " << hosts_->prefix() << ": " << down.Describe();
  }
  if (HasFailure()) std::cerr << Describe();
  apps_.clear();
  app_labels_.clear();
  a_.daemon.reset();
  b_.daemon.reset();
  hosts_.reset();
}

std::string TwoHostsBase::NewFabricKey(const std::string& name) {
  std::string path = dir() + "/" + name;
  Status st = harness::WriteFabricKey(path);
  if (!st.ok()) {
    ADD_FAILURE() << "fabric key " << path << ": " << st.message();
    return "";
  }
  return path;
}

std::vector<std::string> TwoHostsBase::DaemonArgv(const Host& h) const {
  return harness::DaemonArgv(kDaemonPath, h);
}

bool TwoHostsBase::StartDaemon(Host& h) {
  Status st = harness::StartDaemon(kDaemonPath, h, kDaemonListenWait);
  if (!st.ok()) ADD_FAILURE() << st.message();
  return st.ok();
}

void TwoHostsBase::KillDaemon(Host& h) {
  if (h.daemon) h.daemon->Kill();
  h.daemon.reset();
}

void TwoHostsBase::StartDaemons() {
  ASSERT_TRUE(StartDaemon(b_));
  ASSERT_TRUE(StartDaemon(a_));
  std::string why;
  ASSERT_TRUE(WaitLinked(Millis(20000), &why))
      << "the link between host-a and host-b did not come up within 20 s: " << why;
}

std::optional<v1::LinksReply> TwoHostsBase::Links(Host& h, std::string* error, std::string* raw) {
  auto links = harness::ReadLinks(kCtlPath, h, raw);
  if (!links.ok()) {
    if (error) *error = links.status().message();
    return std::nullopt;
  }
  return std::move(links).value();
}

std::optional<v1::LinkInfo> TwoHostsBase::LinkTo(Host& h, const std::string& peer) {
  auto links = Links(h);
  if (!links) return std::nullopt;
  const v1::LinkInfo* link = harness::FindLink(*links, peer);
  if (link == nullptr) return std::nullopt;
  return *link;
}

bool TwoHostsBase::WaitLink(Host& h, const std::string& peer,
                            const std::function<bool(const v1::LinkInfo&)>& pred, Millis timeout,
                            v1::LinkInfo* last) {
  return PollUntil(
      [&] {
        auto l = LinkTo(h, peer);
        if (!l) return false;
        if (last) *last = *l;
        return pred(*l);
      },
      timeout, Millis(100));
}

bool TwoHostsBase::WaitLinked(Millis timeout, std::string* why) {
  std::string seen;
  bool hopeless = false;  // a daemon without the Links request: no use waiting
  bool up = PollUntil(
      [&] {
        seen.clear();
        bool both = true;
        for (auto [h, peer] : {std::pair{&a_, b_.id}, std::pair{&b_, a_.id}}) {
          std::string error;
          auto links = Links(*h, &error);
          if (!links) {
            seen += h->id + ": " + error + "; ";
            hopeless = hopeless || error.find("not supported") != std::string::npos ||
                       error.find("UNIMPLEMENTED") != std::string::npos;
            both = false;
            continue;
          }
          const v1::LinkInfo* found = harness::FindLink(*links, peer);
          seen += h->id + " -> " + peer + ": " +
                  (found ? found->state() + " (last_error '" + found->last_error() + "')"
                         : std::string("no link listed")) +
                  "; ";
          both = both && found != nullptr && found->state() == "up";
        }
        return both || hopeless;
      },
      timeout, Millis(100));
  if (why) *why = seen;
  return up && !hopeless;
}

Child* TwoHostsBase::StartApp(Host& h, const std::string& role,
                              const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kTestAppPath, role, "--socket", h.socket};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions o;
  int n = ++app_counter_;
  o.stderr_path = dir() + "/app-" + std::to_string(n) + "-" + h.id + "-" + role + ".log";
  auto child = Child::Spawn(harness::InNamespace(h.netns, argv), o);
  if (!child.ok()) {
    ADD_FAILURE() << "cannot start mcdma_testapp " << role << " on " << h.id << ": "
                  << child.status().message();
    return nullptr;
  }
  apps_.push_back(std::move(child).value());
  app_labels_.push_back("app " + std::to_string(n) + " on " + h.id + ": " + role);
  return apps_.back().get();
}

Child* TwoHostsBase::StartReady(Host& h, const std::string& role,
                                const std::vector<std::string>& args) {
  Child* c = StartApp(h, role, args);
  if (c == nullptr) return nullptr;
  if (!c->WaitForPrefix("READY", Millis(20000))) {
    c->WaitExit(Millis(100));
    ADD_FAILURE() << "mcdma_testapp " << role << " on " << h.id
                  << " did not print READY within 20 s\n"
                  << c->Describe();
    return nullptr;
  }
  return c;
}

std::unique_ptr<Client> TwoHostsBase::Connect(Host& h, const std::string& name) {
  ClientOptions o;
  o.socket = h.socket;
  o.app_name = name;
  auto c = Client::Connect(o);
  if (!c.ok()) {
    ADD_FAILURE() << "cannot connect to " << h.id << "'s daemon: " << c.status().ToString();
    return nullptr;
  }
  return std::move(c).value();
}

CommandResult TwoHostsBase::Ctl(Host& h, const std::vector<std::string>& args, Millis timeout) {
  std::vector<std::string> argv = {kCtlPath, "--socket", h.socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

CommandResult TwoHostsBase::HostsSh(const std::string& cmd) {
  if (!hosts_) return CommandResult{std::nullopt, "", "no hosts"};
  return hosts_->Script(cmd);
}

std::string TwoHostsBase::netns_prefix() const {
  return hosts_ && hosts_->netns() ? hosts_->prefix() : "";
}

std::string TwoHostsBase::Describe() const {
  std::string out;
  for (const Host* h : {&a_, &b_}) {
    out += "==== " + h->id + " mcdma-rpcd log (" + h->log + ", tail) ====\n";
    out += harness::LastLines(ReadFile(h->log), 80) + "\n";
  }
  for (size_t i = 0; i < apps_.size(); ++i) {
    out += "==== " + app_labels_[i] + " ====\n" + apps_[i]->Describe();
  }
  return out;
}

std::map<std::string, uint64_t> CodeCounts(const std::string& line, const std::string& key) {
  std::map<std::string, uint64_t> out;
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":\\{([^}]*)\\}"))) return out;
  std::string members = m[1].str();
  std::regex pair_re("\"([A-Z_]+)\":([0-9]+)");
  for (std::sregex_iterator it(members.begin(), members.end(), pair_re), end; it != end; ++it) {
    out[(*it)[1].str()] += std::stoull((*it)[2].str());
  }
  return out;
}

std::string LinkSummary(const v1::LinkInfo& l) {
  const v1::LinkCounters& c = l.counters();
  std::ostringstream os;
  os << l.peer() << " " << l.state() << " gen " << l.generation() << " via '" << l.transport()
     << "' origin " << l.origin() << " rtt " << l.rtt_us() << " us, down_reason '"
     << l.down_reason() << "', last_error '" << l.last_error() << "'; msgs " << c.messages_sent()
     << "/" << c.messages_received() << " bytes " << c.bytes_sent() << "/" << c.bytes_received()
     << " calls out/in " << c.calls_out() << "/" << c.calls_in() << " reads " << c.reads() << " ("
     << c.read_bytes() << " B) writes " << c.writes() << " (" << c.write_bytes() << " B) failed "
     << c.ops_failed() << " hb " << c.heartbeats_sent() << "/" << c.heartbeats_ok() << "/"
     << c.heartbeats_missed() << " downs " << c.downs() << " reconnects " << c.reconnects();
  return os.str();
}

std::optional<int64_t> IntField(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return std::nullopt;
  return std::stoll(m[1].str());
}

}  // namespace mcdma::itest
