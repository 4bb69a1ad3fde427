// `mcdmactl doctor` through RunCli, in-process: a real config file, real key
// file, recorded device dumps and a fake Admin service on a Unix socket.
// Asserts on the exit code, on where the socket comes from, and on the JSON
// shape (parsed back with protobuf's JSON parser into a Struct).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mcdma/v1/admin.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdmactl_test_support.hpp"

namespace mcdma::tools {
namespace {

namespace v1 = mcdma::v1;
using test_support::Ctl;
using test_support::Outcome;

// A daemon that is up, with one tcp link up under `fingerprint`, in no
// fabric.
class FakeDoctorAdmin final : public v1::Admin::Service {
 public:
  std::string fingerprint;

  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusReply* r) override {
    r->set_version("9.9.9");
    r->set_host_id("spark-1");
    r->set_state("serving");
    return grpc::Status::OK;
  }
  grpc::Status Links(grpc::ServerContext*, const v1::LinksRequest*, v1::LinksReply* r) override {
    r->set_host_id("spark-1");
    r->set_peering(true);
    r->set_fabric_key_fingerprint(fingerprint);
    auto* link = r->add_links();
    link->set_peer("spark-2");
    link->set_state("up");
    link->set_transport("tcp");
    return grpc::Status::OK;
  }
  grpc::Status Fabric(grpc::ServerContext*, const v1::FabricRequest*, v1::FabricReply* r) override {
    r->set_host_id("spark-1");
    return grpc::Status::OK;
  }
};

// One check as parsed back from the JSON: every key as a string.
using Check = std::map<std::string, std::string>;

struct Parsed {
  bool ok = false;
  bool healthy = false;
  std::vector<Check> checks;
};

Parsed ParseJson(const std::string& text) {
  Parsed p;
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(text, &root).ok()) return p;
  const auto& fields = root.fields();
  if (fields.size() != 2 || fields.count("healthy") == 0 || fields.count("checks") == 0) return p;
  p.healthy = fields.at("healthy").bool_value();
  for (const auto& item : fields.at("checks").list_value().values()) {
    Check c;
    for (const auto& [key, value] : item.struct_value().fields()) c[key] = value.string_value();
    p.checks.push_back(c);
  }
  p.ok = true;
  return p;
}

Check Find(const Parsed& p, const std::string& id) {
  for (const auto& c : p.checks) {
    if (c.at("id") == id) return c;
  }
  return {{"id", id}, {"verdict", "missing"}};
}

class DoctorCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdmactl-doctor-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/rpcd.sock";
    key_ = dir_ + "/fabric.key";
    ASSERT_TRUE(WriteNewFabricKey(key_, false).ok());
    auto key = LoadFabricKey(key_);
    ASSERT_TRUE(key.ok());
    fake_.fingerprint = key->Fingerprint();
    Write("empty.dump", "# no devices\n");
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
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // A config whose only peer uses tcp, so a host without RDMA is healthy.
  std::string TcpConfig(const std::string& extra = "") {
    return Write("rpcd.toml", "host_id = \"spark-1\"\nfabric_key = \"" + key_ + "\"\n" + extra +
                                  "[[peer]]\nname = \"spark-2\"\naddress = \"10.0.0.2\"\n"
                                  "transport = \"tcp\"\n");
  }
  Outcome Doctor(std::vector<std::string> args) {
    args.insert(args.begin(), "doctor");
    return Ctl(std::move(args));
  }

  FakeDoctorAdmin fake_;
  std::string dir_;
  std::string socket_;
  std::string key_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(DoctorCliTest, HealthyHostExitsZeroWithOneLinePerCheck) {
  Outcome r =
      Doctor({"--config", TcpConfig(), "--socket", socket_, "--device-dump", dir_ + "/empty.dump"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("[ ok ] config: " + dir_ + "/rpcd.toml loads and validates\n", 0), 0u)
      << r.out;
  for (const std::string& line : std::vector<std::string>{
           "[skip] rdma_device: no RDMA device; every peer uses tcp\n",
           "[skip] memlock: no RDMA device (tcp links pin no memory)\n",
           "[ ok ] daemon: mcdma-rpcd 9.9.9 answers on " + socket_ + "\n",
           "[skip] fabric_store: no fabric (set fabric.store = \"etcd://HOST:PORT\" or "
           "fabric.file to join one)\n",
           "[ ok ] peers: spark-2: up via tcp\n", "[skip] path_mtu: no verbs link\n",
           "[ ok ] clock: clock sync not needed: nothing compares timestamps across hosts\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "in\n" << r.out;
  }
  EXPECT_EQ(r.out.substr(r.out.size() - 8), "healthy\n") << r.out;
}

TEST_F(DoctorCliTest, JsonIsOneObjectWithEveryKey) {
  Outcome r = Doctor({"--json", "--config", TcpConfig(), "--socket", socket_, "--device-dump",
                      dir_ + "/empty.dump"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  Parsed p = ParseJson(r.out);
  ASSERT_TRUE(p.ok) << r.out;
  EXPECT_TRUE(p.healthy);
  ASSERT_EQ(p.checks.size(), 14u) << r.out;
  for (const auto& c : p.checks) {
    EXPECT_EQ(c.size(), 5u) << c.at("id");
    for (const char* key : {"id", "verdict", "summary", "detail", "fix"})
      EXPECT_EQ(c.count(key), 1u) << key;
    const std::string& v = c.at("verdict");
    EXPECT_TRUE(v == "ok" || v == "skip") << c.at("id") << ": " << v;
  }
  EXPECT_EQ(p.checks.front().at("id"), "config");
  EXPECT_EQ(p.checks.back().at("id"), "clock");
  EXPECT_EQ(Find(p, "fabric_key").at("verdict"), "ok");
}

TEST_F(DoctorCliTest, UnreachableDaemonExitsOneAndTextSaysTheFix) {
  const std::string none = dir_ + "/none.sock";
  Outcome r =
      Doctor({"--config", TcpConfig(), "--socket", none, "--device-dump", dir_ + "/empty.dump"});
  EXPECT_EQ(r.code, kExitFailure) << r.out;
  EXPECT_NE(r.out.find("[fail] daemon: no answer on " + none + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("       fix: start it: systemctl start mcdma-rpcd"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[skip] peers: the daemon is not reachable\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unhealthy: failed daemon\n"), std::string::npos) << r.out;
}

TEST_F(DoctorCliTest, SocketComesFromTheFlagsThenTheConfig) {
  const std::string config = TcpConfig("socket = \"" + socket_ + "\"\n");
  const std::string dump = dir_ + "/empty.dump";
  Parsed p = ParseJson(Doctor({"--json", "--config", config, "--device-dump", dump}).out);
  EXPECT_EQ(Find(p, "daemon").at("verdict"), "ok");
  const std::string none = dir_ + "/none.sock";
  Outcome r =
      Ctl({"--socket", none, "doctor", "--json", "--config", config, "--device-dump", dump});
  p = ParseJson(r.out);
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(Find(p, "daemon").at("summary"), "no answer on " + none);
  r = Ctl({"--socket", none, "doctor", "--json", "--socket", socket_, "--config", config,
           "--device-dump", dump});
  EXPECT_EQ(r.code, kExitOk) << r.out;
}

TEST_F(DoctorCliTest, DeviceDumpFromFlagOrEnvironmentPassesTheDeviceChecks) {
  const std::string config = TcpConfig("[verbs]\ninterface = \"veth0\"\n");
  const std::string dump = std::string(MCDMA_TEST_DATA_DIR) + "/rxe_veth.sysfs";
  for (bool from_env : {false, true}) {
    std::vector<std::string> args = {"--json", "--config", config, "--socket", socket_};
    if (from_env) {
      setenv("MCDMA_DOCTOR_DEVICE_DUMP", dump.c_str(), 1);
    } else {
      args.insert(args.end(), {"--device-dump", dump});
    }
    Parsed p = ParseJson(Doctor(args).out);
    unsetenv("MCDMA_DOCTOR_DEVICE_DUMP");
    ASSERT_TRUE(p.ok);
    for (const char* id : {"rdma_device", "port_active", "gid", "profile"})
      EXPECT_EQ(Find(p, id).at("verdict"), "ok") << id << " from_env=" << from_env;
    EXPECT_EQ(Find(p, "gid").at("summary"),
              "index 1 0000:0000:0000:0000:0000:ffff:0a00:0101 (RoCE v2, veth0)");
  }
}

TEST_F(DoctorCliTest, BadConfigFailsWithTheParsersMessage) {
  const std::string config = Write("bad.toml", "[verbs]\nprot = 1\n");
  Outcome r = Doctor(
      {"--json", "--config", config, "--socket", socket_, "--device-dump", dir_ + "/empty.dump"});
  EXPECT_EQ(r.code, kExitFailure);
  Check c = Find(ParseJson(r.out), "config");
  EXPECT_EQ(c.at("verdict"), "fail");
  EXPECT_NE(c.at("detail").find(config + ": verbs.prot: unknown configuration key"),
            std::string::npos)
      << c.at("detail");
  r = Doctor({"--json", "--config", dir_ + "/missing.toml", "--socket", socket_});
  c = Find(ParseJson(r.out), "config");
  EXPECT_EQ(c.at("verdict"), "fail");
  EXPECT_EQ(c.at("detail").find(dir_ + "/missing.toml: no such file"), 0u) << c.at("detail");
}

}  // namespace
}  // namespace mcdma::tools
