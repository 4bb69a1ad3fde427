// mcdmactl end to end, in-process: RunCli against a fake Admin service on a
// real Unix socket, asserting on exit codes and on exactly what is printed.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "mcdma/v1/admin.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdmactl_test_support.hpp"
#include "render.hpp"
#include "table.hpp"

namespace mcdma::tools {
namespace {

namespace v1 = mcdma::v1;
using test_support::Ctl;
using test_support::Outcome;

// Canned replies; `slow` makes Status outlast a short client deadline and
// `fail_exports` makes Exports fail the way a buggy daemon would.
class FakeAdmin final : public v1::Admin::Service {
 public:
  bool slow = false;
  bool fail_exports = false;

  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusReply* r) override {
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    r->set_version("9.9.9");
    r->set_host_id("spark-1");
    r->set_pid(4242);
    r->set_uptime_s(93784.5);
    r->set_state("serving");
    r->set_sessions(2);
    r->set_buffers(3);
    r->set_buffer_bytes(12ull << 20);
    r->set_ring_faults(1);
    r->set_sessions_reaped(5);
    auto* op = r->add_ops();
    op->set_op("call");
    op->set_submitted(100);
    op->set_ok(99);
    op->set_failed(1);
    auto* t = r->add_transports();
    t->set_name("loop");
    t->set_one_sided(true);
    t->set_max_outstanding(1024);
    return grpc::Status::OK;
  }
  grpc::Status Sessions(grpc::ServerContext*, const v1::SessionsRequest*,
                        v1::SessionsReply* r) override {
    auto* s = r->add_sessions();
    s->set_session_id(17);
    s->set_app_name("vllm");
    s->set_mailbox_segment("/mcdma-m-abc");
    s->set_mailbox_linked(true);
    return grpc::Status::OK;
  }
  grpc::Status Exports(grpc::ServerContext*, const v1::ExportsRequest*,
                       v1::ExportsReply* r) override {
    if (fail_exports) return grpc::Status(grpc::StatusCode::INTERNAL, "exports table corrupt");
    auto* e = r->add_exports();
    e->set_export_id(7);
    e->set_name("kv/layer0");
    e->set_allow_read(true);
    e->set_expires_in_ms(-1);
    return grpc::Status::OK;
  }
  grpc::Status Buffers(grpc::ServerContext*, const v1::BuffersRequest*,
                       v1::BuffersReply*) override {
    return grpc::Status::OK;
  }
};

class McdmactlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdmactl-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/rpcd.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot listen on " << socket_;
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    std::filesystem::remove_all(dir_);
  }

  FakeAdmin fake_;
  std::string dir_;
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
};

TEST(Mcdmactl, HelpShowsEveryDefaultAndExitsZero) {
  ::setenv("MCDMA_SOCKET", "/run/test/rpcd.sock", 1);
  Outcome r = Ctl({"--help"});
  ::unsetenv("MCDMA_SOCKET");
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("--socket PATH=/run/test/rpcd.sock"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--timeout MS=5000"), std::string::npos) << r.out;
  for (const char* sub :
       {"status", "sessions", "exports", "buffers", "links", "link", "fabric-key"}) {
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
  }
  EXPECT_EQ(r.err, "");
}

TEST(Mcdmactl, SubcommandHelpAndVersionExitZero) {
  Outcome help = Ctl({"status", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("--json"), std::string::npos) << help.out;
  Outcome version = Ctl({"--version"});
  EXPECT_EQ(version.code, kExitOk);
  EXPECT_EQ(version.out.rfind("mcdmactl ", 0), 0u) << version.out;
}

TEST(Mcdmactl, UsageErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{{},
                                                                {"frobnicate"},
                                                                {"status", "--frob"},
                                                                {"--timeout", "0", "status"},
                                                                {"--timeout", "soon", "status"},
                                                                {"--socket"}}) {
    Outcome r = Ctl(args);
    EXPECT_EQ(r.code, kExitUsage) << "args: " << ::testing::PrintToString(args);
    EXPECT_EQ(r.err.rfind("mcdmactl: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(Mcdmactl, UnreachableDaemonExitsOneNamingTheSocket) {
  Outcome r = Ctl({"--socket", "/nonexistent/mcdma/rpcd.sock", "status"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err.rfind("mcdmactl: cannot reach mcdma-rpcd at /nonexistent/mcdma/rpcd.sock: ", 0),
            0u)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(McdmactlTest, StatusTextShowsCountersAndTransports) {
  Outcome r = Ctl({"--socket", socket_, "status"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (const char* line :
       {"version              9.9.9\n", "host                 spark-1\n",
        "uptime               1d 02h 03m 04s\n", "buffers              3 (12.0 MiB)\n",
        "ring faults          1\n", "reaped sessions      5\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.out;
  }
  EXPECT_NE(r.out.find("  call        100  99       1    0 B\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  loop  yes"), std::string::npos) << r.out;
}

TEST_F(McdmactlTest, JsonIsOneLineWithProtoNamesAndZeroFields) {
  Outcome r = Ctl({"--socket", socket_, "status", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  for (const char* key : {"\"host_id\":\"spark-1\"", "\"invalid_descriptors\":\"0\"",
                          "\"inflight\":0", "\"socket\":\"\"", "\"sessions_reaped\":\"5\""}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
  Outcome empty = Ctl({"--socket", socket_, "buffers", "--json"});
  ASSERT_EQ(empty.code, kExitOk) << empty.err;
  EXPECT_EQ(empty.out, "{\"buffers\":[]}\n");
}

TEST_F(McdmactlTest, ListsRenderTables) {
  Outcome sessions = Ctl({"--socket", socket_, "sessions"});
  ASSERT_EQ(sessions.code, kExitOk) << sessions.err;
  EXPECT_NE(sessions.out.find("/mcdma-m-abc (linked)"), std::string::npos) << sessions.out;
  Outcome exports = Ctl({"--socket", socket_, "exports"});
  ASSERT_EQ(exports.code, kExitOk) << exports.err;
  EXPECT_NE(exports.out.find("r-"), std::string::npos) << exports.out;
  EXPECT_NE(exports.out.find("never"), std::string::npos) << exports.out;
  EXPECT_NE(exports.out.find("(local)"), std::string::npos) << exports.out;
  Outcome buffers = Ctl({"--socket", socket_, "buffers"});
  ASSERT_EQ(buffers.code, kExitOk) << buffers.err;
  EXPECT_EQ(buffers.out, "no buffers\n");
}

TEST_F(McdmactlTest, SlowDaemonTimesOutWithExitOne) {
  fake_.slow = true;
  Outcome r = Ctl({"--socket", socket_, "--timeout", "100", "status"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_NE(r.err.find("did not answer in time"), std::string::npos) << r.err;
}

TEST_F(McdmactlTest, DaemonErrorExitsOneWithItsMessage) {
  fake_.fail_exports = true;
  Outcome r = Ctl({"--socket", socket_, "exports"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err, "mcdmactl: exports failed: INTERNAL: exports table corrupt\n");
}

// `fabric-key new` runs without a daemon, in a temporary directory.
class McdmactlFabricKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdmactl-key-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/fabric.key";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Contents() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string Fingerprint() const {
    auto key = LoadFabricKey(path_);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    return key.ok() ? key->Fingerprint() : "";
  }

  std::string dir_;
  std::string path_;
};

TEST_F(McdmactlFabricKeyTest, NewWritesA0600KeyAndPrintsOnlyItsFingerprint) {
  Outcome r = Ctl({"fabric-key", "new", path_});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "wrote fabric key " + path_ + " (fingerprint " + Fingerprint() + ")\n");
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const std::string text = Contents();
  ASSERT_EQ(text.size(), 65u);
  EXPECT_EQ(r.out.find(text.substr(0, 16)), std::string::npos) << "key bytes printed";
}

TEST_F(McdmactlFabricKeyTest, NewRefusesToOverwriteWithoutForce) {
  ASSERT_EQ(Ctl({"fabric-key", "new", path_}).code, kExitOk);
  const std::string before = Contents();
  Outcome again = Ctl({"fabric-key", "new", path_});
  EXPECT_EQ(again.code, kExitFailure);
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(
      again.err.rfind(
          "mcdmactl: fabric-key new: ALREADY_EXISTS: fabric key " + path_ + " already exists", 0),
      0u)
      << again.err;
  EXPECT_EQ(Contents(), before);

  const std::string old_fingerprint = Fingerprint();
  Outcome forced = Ctl({"fabric-key", "new", "--force", path_, "--json"});
  ASSERT_EQ(forced.code, kExitOk) << forced.err;
  EXPECT_NE(Contents(), before);
  EXPECT_NE(Fingerprint(), old_fingerprint);
  EXPECT_EQ(forced.out, "{\"path\":\"" + path_ + "\",\"fingerprint\":\"" + Fingerprint() + "\"}\n");
}

TEST_F(McdmactlFabricKeyTest, NewFailsWithExitOneWhenTheDirectoryIsMissing) {
  Outcome r = Ctl({"fabric-key", "new", dir_ + "/missing/fabric.key"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err.rfind("mcdmactl: fabric-key new: NOT_FOUND: ", 0), 0u) << r.err;
}

TEST(McdmactlFabricKey, UsageErrorsExitTwo) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"fabric-key"},
                                             {"fabric-key", "new"},
                                             {"fabric-key", "new", "a", "b"},
                                             {"fabric-key", "old", "a"},
                                             {"fabric-key", "new", "--frob", "a"}}) {
    Outcome r = Ctl(args);
    EXPECT_EQ(r.code, kExitUsage) << "args: " << ::testing::PrintToString(args);
    EXPECT_EQ(r.err.rfind("mcdmactl: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  Outcome help = Ctl({"fabric-key", "new", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("--force"), std::string::npos) << help.out;
}

TEST(McdmactlRender, FormatsSizesAndDurations) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(4096), "4.0 KiB");
  EXPECT_EQ(FormatBytes(16ull << 30), "16.0 GiB");
  EXPECT_EQ(FormatMiB(0), "0.0 MiB");
  EXPECT_EQ(FormatMiB(3ull << 19), "1.5 MiB");
  EXPECT_EQ(FormatDuration(4.25), "4.2s");
  EXPECT_EQ(FormatDuration(185), "3m 05s");
  EXPECT_EQ(FormatDuration(3600), "1h 00m 00s");
  EXPECT_EQ(FormatDuration(-1), "0.0s");
}

TEST(McdmactlRender, TableAlignsColumnsWithoutTrailingSpaces) {
  Table table({{"NAME"}, {"N", true}, {"LAST"}});
  table.AddRow({"a", "5", ""});
  table.AddRow({"long", "123"});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(), "NAME    N  LAST\na       5\nlong  123\n");
}

}  // namespace
}  // namespace mcdma::tools
