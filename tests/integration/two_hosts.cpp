#include "two_hosts.hpp"

#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>

#include "platform/socket.hpp"

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

std::string IpPath() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// `n` distinct free TCP ports on 127.0.0.1 (all bound at once, then closed).
std::vector<int> FreePorts(int n) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    auto opened = platform::OpenSocket(AF_INET, SOCK_STREAM, 0, platform::Blocking::kBlocking);
    int fd = opened.ok() ? std::move(opened).value().Release() : -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) close(fd);
      break;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

// The last `lines` lines of a file.
std::string Tail(const std::string& path, int lines) {
  std::string log = ReadFile(path);
  size_t pos = log.size();
  for (int n = 0; n < lines && pos > 0; ++n) {
    pos = log.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return log.substr(pos);
}

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
  ASSERT_TRUE(dir_.ok()) << "mkdtemp failed: " << std::strerror(errno);
  if (verbs() && std::getenv("MCDMA_VERBS_HOSTS") == nullptr) {
    GTEST_SKIP() << "verbs variant: no Soft-RoCE devices here (MCDMA_VERBS_HOSTS is unset); it "
                    "runs inside the Soft-RoCE VM (tests/verbs/run-vm-tests.sh, ctest "
                    "Verbs.SoftRoce)";
  }
  if (netns()) {
    if (IpPath().empty()) GTEST_SKIP() << "netns variant: no ip(8) (iproute2) on this machine";
    CommandResult check = RunCommand({"/bin/bash", kHostsScript, "check"}, Millis(10000));
    if (check.exit_code() == 77) {
      GTEST_SKIP() << "netns variant: " << kHostsScript << " check exited 77: " << check.err
                   << "(run as root, as CI does, to test two hosts in network namespaces)";
    }
    ASSERT_EQ(check.exit_code(), 0) << "hosts.sh check: " << check.Describe();
  }
  a_.id = "host-a";
  b_.id = "host-b";
  for (Host* h : {&a_, &b_}) {
    std::string tag = h->id.substr(5);  // "a" / "b"
    h->socket = dir() + "/" + tag + ".sock";
    h->log = dir() + "/daemon-" + h->id + ".log";
  }
  std::string key = NewFabricKey("fabric.key");
  ASSERT_FALSE(key.empty());
  a_.key = b_.key = key;
  if (netns()) {
    ASSERT_NO_FATAL_FAILURE(PrepareNetns());
  } else if (verbs()) {
    ASSERT_NO_FATAL_FAILURE(PrepareVerbs());
  } else {
    ASSERT_NO_FATAL_FAILURE(PrepareLoopback());
  }
  a_.peers = {"host-b=" + b_.listen() + "," + transport()};
  if (LinkAtSetUp()) {
    ASSERT_NO_FATAL_FAILURE(StartDaemons());
  }
}

void TwoHostsBase::PrepareLoopback() {
  std::vector<int> ports = FreePorts(4);
  ASSERT_EQ(ports.size(), 4u) << "cannot find free ports on 127.0.0.1: " << std::strerror(errno);
  a_.ip = b_.ip = "127.0.0.1";
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
  std::istringstream hosts(spec);
  std::string one;
  for (Host* h : {&a_, &b_}) {
    ASSERT_TRUE(std::getline(hosts, one, ',')) << "MCDMA_VERBS_HOSTS: two entries, got " << spec;
    std::istringstream parts(one);
    std::string dev, netdev, ip;
    ASSERT_TRUE(std::getline(parts, dev, ':') && std::getline(parts, netdev, ':') &&
                std::getline(parts, ip))
        << "MCDMA_VERBS_HOSTS entry is not DEV:IF:IP: " << one;
    h->ip = ip;
    h->peer_port = 7471;
    h->data_port = 7472;
    h->extra = {"--verbs-device", dev, "--verbs-interface", netdev, "--verbs-profile", profile_};
  }
}

void TwoHostsBase::PrepareNetns() {
  // Short and unique per test process and test: namespace and veth names
  // derive from it (hosts.sh).
  prefix_ = "mcit" + std::to_string(getpid() % 100000) + "n" + std::to_string(++g_prefix_counter);
  (void)HostsSh("down");  // a leftover of a crashed run with the same pid
  CommandResult up = HostsSh("up");
  ASSERT_EQ(up.exit_code(), 0) << "hosts.sh up " << prefix_ << ": " << up.Describe();
  netns_up_ = true;
  std::istringstream lines(up.out);
  std::string ns, ip;
  while (lines >> ns >> ip) {
    Host* h = ns == prefix_ + "-a" ? &a_ : ns == prefix_ + "-b" ? &b_ : nullptr;
    ASSERT_NE(h, nullptr) << "unexpected line from hosts.sh up: " << ns << " " << ip;
    h->ns = ns;
    h->ip = ip;
  }
  ASSERT_FALSE(a_.ip.empty() || b_.ip.empty()) << "hosts.sh up printed:\n" << up.out;
  for (Host* h : {&a_, &b_}) {
    h->peer_port = 7471;
    h->data_port = 7472;
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
  if (netns_up_) {
    CommandResult down = HostsSh("down");
    EXPECT_EQ(down.exit_code(), 0) << "hosts.sh down " << prefix_ << ": " << down.Describe();
    netns_up_ = false;
  }
  if (HasFailure()) std::cerr << Describe();
  apps_.clear();
  app_labels_.clear();
  a_.daemon.reset();
  b_.daemon.reset();
}

std::string TwoHostsBase::NewFabricKey(const std::string& name) {
  std::string path = dir() + "/" + name;
  CommandResult r = RunCommand({kCtlPath, "fabric-key", "new", path}, Millis(10000));
  if (r.exit_code() != 0) {
    ADD_FAILURE() << "mcdmactl fabric-key new " << path << ": " << r.Describe();
    return "";
  }
  return path;
}

std::vector<std::string> TwoHostsBase::InHost(const Host& h, std::vector<std::string> argv) const {
  if (h.ns.empty()) return argv;
  std::vector<std::string> wrapped = {IpPath(), "netns", "exec", h.ns};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

std::vector<std::string> TwoHostsBase::DaemonArgv(const Host& h) const {
  std::vector<std::string> argv = {kDaemonPath,    "--socket",    h.socket,   "--host-id",
                                   h.id,           "--log-level", "info",     "--fabric-key",
                                   h.key,          "--listen",    h.listen(), "--data-listen",
                                   h.data_listen()};
  const std::vector<std::string>& timing = verbs() ? kVmLinkFlags : kLinkFlags;
  argv.insert(argv.end(), timing.begin(), timing.end());
  for (const auto& p : h.peers) {
    argv.push_back("--peer");
    argv.push_back(p);
  }
  argv.insert(argv.end(), h.extra.begin(), h.extra.end());
  return InHost(h, argv);
}

bool TwoHostsBase::StartDaemon(Host& h) {
  if (h.daemon) h.daemon->Kill();
  SpawnOptions o;
  o.stderr_path = h.log;
  o.pipe_stdout = false;
  o.pipe_stdin = false;
  std::string error;
  // `ip netns exec` execs the daemon in place: the child's pid is the
  // daemon's, so signals reach it directly.
  h.daemon = Child::Spawn(DaemonArgv(h), o, &error);
  if (!h.daemon) {
    ADD_FAILURE() << "cannot start " << h.id << "'s mcdma-rpcd: " << error;
    return false;
  }
  bool up = PollUntil([&] { return !h.daemon->Alive() || SocketAccepts(h.socket); }, Millis(20000),
                      Millis(20));
  if (!up || !h.daemon->Alive()) {
    ADD_FAILURE() << h.id << "'s mcdma-rpcd did not start listening on " << h.socket
                  << " within 20 s ("
                  << (h.daemon->exit_status() ? DescribeStatus(*h.daemon->exit_status())
                                              : std::string("still running"))
                  << ")";
    return false;
  }
  return true;
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
  CommandResult r = Ctl(h, {"links", "--json"}, Millis(10000));
  if (r.exit_code() != 0) {
    if (error) *error = "mcdmactl links --json: " + r.Describe();
    return std::nullopt;
  }
  if (raw) *raw = r.out;
  google::protobuf::util::JsonParseOptions po;
  po.ignore_unknown_fields = true;
  v1::LinksReply reply;
  auto st = google::protobuf::util::JsonStringToMessage(r.out, &reply, po);
  if (!st.ok()) {
    if (error)
      *error = "mcdmactl links --json printed no LinksReply: " + st.ToString() + "\n" + r.out;
    return std::nullopt;
  }
  return reply;
}

std::optional<v1::LinkInfo> TwoHostsBase::LinkTo(Host& h, const std::string& peer) {
  auto links = Links(h);
  if (!links) return std::nullopt;
  for (const auto& l : links->links()) {
    if (l.peer() == peer) return l;
  }
  return std::nullopt;
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
          const v1::LinkInfo* found = nullptr;
          for (const auto& l : links->links()) {
            if (l.peer() == peer) found = &l;
          }
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
  std::string error;
  auto child = Child::Spawn(InHost(h, argv), o, &error);
  if (!child) {
    ADD_FAILURE() << "cannot start mcdma_testapp " << role << " on " << h.id << ": " << error;
    return nullptr;
  }
  apps_.push_back(std::move(child));
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
  return RunCommand({"/bin/bash", kHostsScript, cmd, prefix_}, Millis(30000));
}

std::string TwoHostsBase::Describe() const {
  std::string out;
  for (const Host* h : {&a_, &b_}) {
    out += "==== " + h->id + " mcdma-rpcd log (" + h->log + ", tail) ====\n";
    out += Tail(h->log, 80) + "\n";
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
