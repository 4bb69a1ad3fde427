#include "fabric_hosts.hpp"

#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

namespace mcdma::ftest {
namespace {

std::atomic<int> g_prefix_counter{0};

const std::vector<std::string> kLinkFlags = {
    "--heartbeat-ms", "200", "--link-timeout-ms", "1500", "--reconnect-max-ms", "1000"};

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

}  // namespace

void FabricHosts::SetUp() {
  Status check = harness::Hosts::Check(MCDMA_HOSTS_SH);
  if (check.code() == Code::kUnavailable)
    GTEST_SKIP() << "fabric tests need network namespaces: " << check.message()
                 << " (run as root, as CI does)";
  ASSERT_TRUE(check.ok()) << "hosts.sh check: " << check.message();
  char tmpl[] = "/tmp/mcdma-fabric-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
  key_ = dir_ + "/fabric.key";
  ASSERT_TRUE(harness::WriteFabricKey(key_).ok());
}

harness::Child* FabricHosts::App(size_t i, const std::string& role, std::vector<std::string> args) {
  return Tool(i, MCDMA_TESTAPP_PATH, role, std::move(args));
}

harness::Child* FabricHosts::Tool(size_t i, const std::string& path, const std::string& role,
                                  std::vector<std::string> args) {
  std::vector<std::string> argv = {path, role, "--socket", hosts_[i].socket};
  for (auto& a : args) argv.push_back(std::move(a));
  harness::SpawnOptions o;
  o.name = role + " (" + hosts_[i].id + ")";
  o.pipe_stdin = true;
  o.stderr_path =
      dir_ + "/app-" + std::to_string(apps_.size()) + "-" + hosts_[i].id + "-" + role + ".log";
  auto child = harness::Child::Spawn(argv, o);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) return nullptr;
  apps_.push_back(std::move(child).value());
  return apps_.back().get();
}

bool FabricHosts::WaitRoute(size_t i, const std::string& host, size_t hops, Millis timeout) {
  return WaitFor(
      [&] {
        auto f = Fabric(i);
        if (!f.ok()) return false;
        const auto* h = HostIn(f.value(), host);
        return h != nullptr && static_cast<size_t>(h->route_size()) == hops;
      },
      timeout);
}

void FabricHosts::TearDown() {
  for (auto& app : apps_) app->Kill();
  std::vector<harness::DaemonHost*> stopping;
  for (auto& h : hosts_) {
    if (!h.daemon) continue;
    if (h.daemon->Alive()) {
      h.daemon->Signal(SIGTERM);
      stopping.push_back(&h);
    } else {
      ADD_FAILURE() << h.id << "'s mcdma-rpcd died during the test: "
                    << harness::DescribeStatus(h.daemon->exit_status().value_or(0));
    }
  }
  for (auto* h : stopping) {
    auto st = h->daemon->WaitExit(Millis(15000));
    if (!st) {
      ADD_FAILURE() << h->id << "'s mcdma-rpcd did not exit within 15 s of SIGTERM";
      h->daemon->Kill();
    } else if (!WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      ADD_FAILURE() << h->id << "'s mcdma-rpcd ended with " << harness::DescribeStatus(*st)
                    << " after SIGTERM";
    }
  }
  if (HasFailure()) {
    for (auto& h : hosts_) std::cerr << "==== " << h.id << " ====\n" << Tail(h.log, 60);
    if (store_) std::cerr << "==== etcd ====\n" << store_->LogTail(20);
  }
  if (HasFailure()) {
    for (auto& app : apps_) {
      std::cerr << "==== " << app->name() << " ====\n";
      for (const auto& l : app->lines()) std::cerr << l << "\n";
      std::cerr << Tail(app->stderr_path(), 20);
    }
  }
  apps_.clear();
  for (auto& h : hosts_) h.daemon.reset();
  store_.reset();
  if (netns_) {
    harness::CommandResult down = netns_->Down();
    EXPECT_EQ(down.exit_code(), 0) << "hosts.sh down: " << down.Describe();
    netns_.reset();
  }
  if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
}

void FabricHosts::MakeFabric(size_t count, const std::vector<std::string>& cables) {
  std::string prefix =
      "mcft" + std::to_string(getpid() % 100000) + "n" + std::to_string(++g_prefix_counter);
  auto made = harness::Hosts::MakeNamespaces(MCDMA_HOSTS_SH, prefix, count);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  netns_ = std::move(made).value();
  for (const auto& c : cables) {
    ASSERT_EQ(c.size(), 2u);
    if (cable_rate_.empty()) {
      Cable("cable", c[0], c[1]);
    } else {
      harness::CommandResult r =
          harness::RunCommand({"/bin/bash", MCDMA_HOSTS_SH, "cable", netns_->prefix(),
                               std::string(1, c[0]), std::string(1, c[1]), cable_rate_},
                              Millis(10000));
      ASSERT_EQ(r.exit_code(), 0) << "hosts.sh cable: " << r.Describe();
    }
    cables_.emplace_back(c[0], c[1]);
  }
  harness::CommandResult store =
      harness::RunCommand({"/bin/bash", MCDMA_HOSTS_SH, "store", prefix}, Millis(10000));
  ASSERT_EQ(store.exit_code(), 0) << store.Describe();
  std::string address = store.out.substr(0, store.out.find('\n'));
  harness::EtcdServer::Options so;
  so.netns = prefix + "-br";
  so.address = address;
  so.dir = dir_ + "/etcd";
  auto started = harness::EtcdServer::Start(so);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  store_ = std::move(started).value();
  store_url_ = store_->url();
  for (size_t i = 0; i < count; ++i) {
    harness::DaemonHost h;
    static_cast<harness::Host&>(h) = (*netns_)[i];
    h.address = "0.0.0.0";
    h.peer_port = harness::kPeerPort;
    h.data_port = harness::kDataPort;
    h.socket = dir_ + "/" + h.id + ".sock";
    h.key = key_;
    h.log = dir_ + "/daemon-" + h.id + ".log";
    hosts_.push_back(std::move(h));
  }
}

void FabricHosts::Cable(const std::string& command, char x, char y) {
  harness::CommandResult r =
      harness::RunCommand({"/bin/bash", MCDMA_HOSTS_SH, command, netns_->prefix(),
                           std::string(1, x), std::string(1, y)},
                          Millis(10000));
  ASSERT_EQ(r.exit_code(), 0) << "hosts.sh " << command << ": " << r.Describe();
}

void FabricHosts::StartDaemon(size_t i, std::vector<std::string> extra) {
  harness::DaemonHost& h = hosts_[i];
  h.extra = kLinkFlags;
  std::vector<std::string> fabric = {"--fabric-interfaces",   "c-*",
                                     "--fabric-lease-ttl-ms", std::to_string(lease_ttl_ms_),
                                     "--fabric-transport",    "tcp"};
  if (fabric_file_.empty()) {
    fabric.insert(fabric.end(), {"--fabric-store", store_url_});
  } else {
    fabric.insert(fabric.end(), {"--fabric-file", fabric_file_});
  }
  for (const auto& f : fabric) h.extra.push_back(f);
  for (auto& f : extra) h.extra.push_back(std::move(f));
  Status st = harness::StartDaemon(MCDMA_RPCD_PATH, h, Millis(15000));
  ASSERT_TRUE(st.ok()) << h.id << ": " << st.ToString();
}

void FabricHosts::StartAll() {
  for (size_t i = 0; i < hosts_.size(); ++i) ASSERT_NO_FATAL_FAILURE(StartDaemon(i));
}

void FabricHosts::KillDaemon(size_t i) {
  if (hosts_[i].daemon) hosts_[i].daemon->Kill();
  hosts_[i].daemon.reset();
}

std::string FabricHosts::WriteFabricFile(bool cables) {
  std::map<char, std::vector<std::string>> addresses;
  for (const auto& [x, y] : cables_) {
    const int i = x - 'a' + 1, j = y - 'a' + 1;
    const std::string net = "10." + std::to_string(100 + i) + "." + std::to_string(4 * j) + ".";
    addresses[x].push_back(net + "1:" + std::to_string(harness::kPeerPort));
    addresses[y].push_back(net + "2:" + std::to_string(harness::kPeerPort));
  }
  std::string text;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    text += "[[host]]\nid = \"" + hosts_[i].id + "\"\naddresses = [";
    const auto& mine = addresses[static_cast<char>('a' + i)];
    for (size_t k = 0; k < mine.size(); ++k) text += (k ? ", \"" : "\"") + mine[k] + "\"";
    text += "]\n";
  }
  if (cables) {
    for (const auto& [x, y] : cables_)
      text += "[[cable]]\nhosts = [\"host-" + std::string(1, x) + "\", \"host-" +
              std::string(1, y) + "\"]\n";
  }
  std::string path = dir_ + "/fabric.toml";
  std::ofstream(path) << text;
  return path;
}

Result<v1::FabricReply> FabricHosts::Fabric(size_t i, std::string* raw) {
  return harness::ReadFabric(MCDMA_CTL_PATH, hosts_[i], raw);
}

Result<v1::LinksReply> FabricHosts::Links(size_t i) {
  return harness::ReadLinks(MCDMA_CTL_PATH, hosts_[i]);
}

bool FabricHosts::WaitFor(const std::function<bool()>& pred, Millis timeout) {
  auto until = harness::Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (harness::Clock::now() >= until) return false;
    std::this_thread::sleep_for(Millis(50));
  }
}

bool FabricHosts::LinkUp(size_t i, const std::string& peer) {
  auto links = Links(i);
  if (!links.ok()) return false;
  const v1::LinkInfo* l = harness::FindLink(links.value(), peer);
  return l != nullptr && l->state() == "up";
}

size_t FabricHosts::index_of(const std::string& id) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].id == id) return i;
  }
  return hosts_.size();
}

bool FabricHosts::LinksAreTheCables(std::string* why) {
  why->clear();
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (!hosts_[i].daemon) continue;
    auto links = Links(i);
    if (!links.ok()) {
      *why = hosts_[i].id + ": " + links.status().ToString();
      return false;
    }
    char me = static_cast<char>('a' + i);
    for (const auto& [x, y] : cables_) {
      if (x != me && y != me) continue;
      size_t other = static_cast<size_t>((x == me ? y : x) - 'a');
      if (!hosts_[other].daemon) continue;
      const v1::LinkInfo* l = harness::FindLink(links.value(), hosts_[other].id);
      if (l == nullptr || l->state() != "up") {
        *why += hosts_[i].id + " > " + hosts_[other].id + ": " +
                (l == nullptr ? std::string("no link") : l->state() + " " + l->last_error()) + "\n";
      }
    }
    for (const auto& l : links.value().links()) {
      size_t other = index_of(l.peer());
      char o = static_cast<char>('a' + other);
      bool cabled = false;
      for (const auto& [x, y] : cables_)
        cabled = cabled || (x == me && y == o) || (x == o && y == me);
      if (!cabled) *why += hosts_[i].id + " has a link to uncabled " + l.peer() + "\n";
    }
  }
  return why->empty();
}

const v1::FabricHostView* FabricHosts::HostIn(const v1::FabricReply& f, const std::string& host) {
  for (const auto& h : f.hosts()) {
    if (h.host() == host) return &h;
  }
  return nullptr;
}

}  // namespace mcdma::ftest
