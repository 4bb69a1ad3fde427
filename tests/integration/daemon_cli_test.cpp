// mcdma-rpcd's command line and configuration: stable exit codes (0 ok,
// 1 failure, 2 usage/config) and errors that name what was wrong.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "daemon_fixture.hpp"
#include "mcdma/client.hpp"

namespace mcdma::itest {
namespace {

const Millis kExitWait(15000);

class DaemonCli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }
  void TearDown() override {
    for (auto& d : daemons_) {
      if (d->Alive()) {
        d->Signal(SIGTERM);
        if (!d->WaitExit(kExitWait)) d->Kill();
      }
      if (HasFailure()) std::cerr << d->Describe();
    }
    daemons_.clear();
  }

  std::string Socket() const { return dir_.path() + "/rpcd.sock"; }

  std::string WriteConfig(const std::string& text) {
    std::string path = dir_.path() + "/rpcd-" + std::to_string(++configs_) + ".toml";
    std::ofstream(path) << text;
    return path;
  }

  // Runs the daemon to its exit (it must exit by itself within 15 s).
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), kDaemonPath);
    return RunCommand(args, kExitWait);
  }

  // Runs it with only a config file (and our socket).
  CommandResult RunWithConfig(const std::string& toml) {
    return Run({"--socket", Socket(), "--config", WriteConfig(toml)});
  }

  // Starts a daemon that keeps running; waits until its socket accepts.
  Child* StartDaemon(std::vector<std::string> args) {
    args.insert(args.begin(), kDaemonPath);
    const std::string log = dir_.path() + "/daemon-" + std::to_string(daemons_.size() + 1) + ".log";
    auto d = SpawnDaemon(args, Socket(), log, false, kDaemonListenWait);
    if (!d.ok()) {
      ADD_FAILURE() << "the daemon did not start listening on " << Socket() << ": "
                    << d.status().message();
      return nullptr;
    }
    daemons_.push_back(std::move(d).value());
    return daemons_.back().get();
  }

  TempDir dir_;
  int configs_ = 0;
  std::vector<std::unique_ptr<Child>> daemons_;
};

TEST_F(DaemonCli, HelpExitsZeroAndListsTheFlags) {
  CommandResult r = Run({"--help"});
  EXPECT_EQ(r.exit_code(), 0) << r.Describe();
  for (const char* flag : {"--socket", "--log-level", "--config", "--default-timeout-ms"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << " missing from --help:\n" << r.out;
  }
}

TEST_F(DaemonCli, UnknownFlagExitsTwo) {
  CommandResult r = Run({"--socket", Socket(), "--no-such-flag"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE((r.out + r.err).find("no-such-flag"), std::string::npos) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket()));
}

TEST_F(DaemonCli, BadFlagValuesExitTwoNamingTheField) {
  CommandResult r = Run({"--socket", Socket(), "--log-level", "loud"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("log_level"), std::string::npos) << r.Describe();
  r = Run({"--socket", Socket(), "--default-timeout-ms", "0"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("default_timeout_ms"), std::string::npos) << r.Describe();
  r = Run({"--socket", Socket(), "--default-timeout-ms", "soon"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket()));
}

// macOS's sun_path holds 103 bytes of path; the same limit on every OS.
TEST_F(DaemonCli, SocketPathLongerThanMacOsAllowsExitsTwo) {
  std::string long_path = dir_.path() + "/" + std::string(120, 's') + ".sock";
  CommandResult r = Run({"--socket", long_path});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("macOS allows at most 103"), std::string::npos) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(long_path));
}

TEST_F(DaemonCli, ClientRefusesASocketPathLongerThanMacOsAllows) {
  ClientOptions o;
  o.socket = dir_.path() + "/" + std::string(120, 's') + ".sock";
  auto c = Client::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalid);
  EXPECT_NE(c.status().message().find("macOS allows at most 103"), std::string::npos)
      << c.status().ToString();
}

TEST_F(DaemonCli, UnknownSocketGroupExitsTwoNamingIt) {
  CommandResult r = Run({"--socket", Socket(), "--socket-group", "no-such-group-mcdma"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("socket_group: no group 'no-such-group-mcdma'"), std::string::npos)
      << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket()));
}

// What a Mac's LaunchDaemon needs: the socket's directory given to a group
// so that its members' apps may connect.
TEST_F(DaemonCli, SocketGroupGivesTheSocketDirectoryToThatGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory to another group needs root";
  const struct group* gr = getgrnam("nogroup");
  if (gr == nullptr) GTEST_SKIP() << "no group 'nogroup' on this host";
  gid_t gid = gr->gr_gid;
  ASSERT_NE(StartDaemon({"--socket", Socket(), "--socket-group", "nogroup"}), nullptr);
  struct stat dir_st {};
  ASSERT_EQ(stat(dir_.path().c_str(), &dir_st), 0);
  EXPECT_EQ(dir_st.st_gid, gid);
  EXPECT_EQ(dir_st.st_mode & 0777, 0750u);
  struct stat sock_st {};
  ASSERT_EQ(stat(Socket().c_str(), &sock_st), 0);
  EXPECT_EQ(sock_st.st_mode & 0777, 0660u);
}

TEST_F(DaemonCli, ConfigUnknownKeyExitsTwoNamingTheKey) {
  CommandResult r = RunWithConfig("[mailbox]\nsubmision_entries = 64\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("mailbox.submision_entries"), std::string::npos) << r.Describe();
  r = RunWithConfig("no_such_top_level_key = 1\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("no_such_top_level_key"), std::string::npos) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket()));
}

TEST_F(DaemonCli, ConfigWrongTypeExitsTwoNamingTheKey) {
  CommandResult r = RunWithConfig("[limits]\ndefault_timeout_ms = \"soon\"\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("limits.default_timeout_ms"), std::string::npos) << r.Describe();
  r = RunWithConfig("log_level = 3\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("log_level"), std::string::npos) << r.Describe();
  r = RunWithConfig("[mailbox]\narena_bytes = -1\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("mailbox.arena_bytes"), std::string::npos) << r.Describe();
}

TEST_F(DaemonCli, NonPowerOfTwoRingExitsTwoNamingTheField) {
  CommandResult r = RunWithConfig("[mailbox]\nsubmission_entries = 100\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("mailbox.submission_entries"), std::string::npos) << r.Describe();
  r = RunWithConfig("[mailbox]\ncompletion_entries = 3\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("mailbox.completion_entries"), std::string::npos) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket()));
}

TEST_F(DaemonCli, UnreadableOrMalformedConfigExitsTwo) {
  CommandResult r = Run({"--socket", Socket(), "--config", dir_.path() + "/missing.toml"});
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find("missing.toml"), std::string::npos) << r.Describe();
  r = RunWithConfig("[mailbox\nsubmission_entries = 64\n");
  EXPECT_EQ(r.exit_code(), 2) << r.Describe();
  EXPECT_NE(r.err.find(".toml:1"), std::string::npos) << "a syntax error should name file:line\n"
                                                      << r.Describe();
}

TEST_F(DaemonCli, FlagsOverrideTheConfigFile) {
  std::string config = WriteConfig("log_level = \"loud\"\n");
  CommandResult bad = Run({"--socket", Socket(), "--config", config});
  EXPECT_EQ(bad.exit_code(), 2) << bad.Describe();
  Child* d = StartDaemon({"--socket", Socket(), "--config", config, "--log-level", "warn"});
  ASSERT_NE(d, nullptr);
  d->Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(d->WaitExit(kExitWait), 0));
}

TEST_F(DaemonCli, SecondDaemonOnTheSameSocketExitsOneAndLeavesTheFirstAlone) {
  Child* first = StartDaemon({"--socket", Socket()});
  ASSERT_NE(first, nullptr);
  CommandResult second = Run({"--socket", Socket()});
  EXPECT_EQ(second.exit_code(), 1) << second.Describe();
  EXPECT_NE(second.err.find("already"), std::string::npos) << second.Describe();
  EXPECT_NE(second.err.find(Socket()), std::string::npos) << "the message should name the socket\n"
                                                          << second.Describe();
  // The first daemon still owns its socket and serves on it.
  EXPECT_TRUE(first->Alive());
  EXPECT_TRUE(SocketAccepts(Socket()));
  ClientOptions o;
  o.socket = Socket();
  auto c = Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST_F(DaemonCli, SigtermExitsZeroAndRemovesTheSocket) {
  Child* d = StartDaemon({"--socket", Socket()});
  ASSERT_NE(d, nullptr);
  // With a live session, too: the drain closes it.
  ClientOptions o;
  o.socket = Socket();
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  d->Signal(SIGTERM);
  auto st = d->WaitExit(kExitWait);
  ASSERT_TRUE(st.has_value()) << "no exit within 15 s of SIGTERM";
  EXPECT_TRUE(ExitedWith(st, 0)) << DescribeStatus(*st);
  EXPECT_FALSE(std::filesystem::exists(Socket()));
  // The client learns that its session is gone.
  auto r = (*c)->Alloc(4096);
  EXPECT_FALSE(r.ok());
}

TEST_F(DaemonCli, StaleSocketFileIsReplaced) {
  // A socket file nobody listens on (a daemon that crashed).
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, Socket().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  close(fd);
  ASSERT_TRUE(std::filesystem::exists(Socket()));
  Child* d = StartDaemon({"--socket", Socket()});
  ASSERT_NE(d, nullptr);
}

TEST_F(DaemonCli, CheckValidatesWithoutServing) {
  CommandResult ok = Run({"--socket", Socket(), "--check"});
  EXPECT_EQ(ok.exit_code(), 0) << ok.Describe();
  EXPECT_NE(ok.out.find(Socket()), std::string::npos) << ok.Describe();
  EXPECT_FALSE(std::filesystem::exists(Socket())) << "--check must not start serving";
  CommandResult bad = Run({"--socket", Socket(), "--check", "--config",
                           WriteConfig("[mailbox]\nsubmission_entries = 100\n")});
  EXPECT_EQ(bad.exit_code(), 2) << bad.Describe();
  EXPECT_NE(bad.err.find("mailbox.submission_entries"), std::string::npos) << bad.Describe();
}

}  // namespace
}  // namespace mcdma::itest
