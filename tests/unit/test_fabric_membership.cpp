// The pure parts of fabric membership (daemon/src/fabric/): fabric
// interfaces and direct reach, the member record's checks, the static
// fabric file, and which end of a pair dials.
#include <gtest/gtest.h>

#include "fabric/fabric_file.hpp"
#include "fabric/fabric_view.hpp"
#include "fabric/host_record.hpp"
#include "fabric/local_networks.hpp"

namespace mcdma::daemon::fabric {
namespace {

LocalNet Net(const char* interface, const char* address, uint8_t prefix) {
  LocalNet n;
  n.interface = interface;
  EXPECT_TRUE(ParseIPv4(address, &n.address));
  n.prefix = prefix;
  return n;
}

v1::FabricHostRecord Record(const char* host, std::initializer_list<const char*> addresses) {
  v1::FabricHostRecord r;
  r.set_host(host);
  r.set_instance("i-1");
  for (const char* a : addresses) r.add_addresses(a);
  return r;
}

TEST(FabricReach, InterfacePatternsMatchNamesAndGlobs) {
  EXPECT_TRUE(InterfaceMatches("", "eth0"));
  EXPECT_TRUE(InterfaceMatches("tb*", "tb3"));
  EXPECT_TRUE(InterfaceMatches("eth1, tb*", "eth1"));
  EXPECT_FALSE(InterfaceMatches("tb*,eth1", "eth0"));
  EXPECT_FALSE(InterfaceMatches(",", "eth0"));
}

TEST(FabricReach, ADirectAddressIsOnAFabricSubnetAndNotOursOwn) {
  std::vector<LocalNet> nets = {Net("cab-b", "10.20.1.1", 30), Net("cab-c", "10.20.2.1", 30)};
  EXPECT_EQ(DirectAddress({"10.30.0.2:7471", "10.20.2.2:7471"}, nets), "10.20.2.2:7471");
  EXPECT_EQ(DirectAddress({"10.20.1.5:7471"}, nets), "");  // outside the /30
  EXPECT_EQ(DirectAddress({"10.20.1.1:7471"}, nets), "");  // this host's own
  EXPECT_EQ(DirectAddress({"not-an-ip:1"}, nets), "");
  EXPECT_EQ(FabricAddresses(nets, 7471),
            (std::vector<std::string>{"10.20.1.1:7471", "10.20.2.1:7471"}));
}

TEST(FabricReach, TheLowerIdDialsAndTheHigherWaits) {
  std::vector<LocalNet> nets_a = {Net("cab-b", "10.20.1.1", 30)};
  std::vector<LocalNet> nets_b = {Net("cab-a", "10.20.1.2", 30)};
  Reach ab = ReachOf("host-a", Record("host-b", {"10.20.1.2:7471"}), nets_a, nullptr);
  Reach ba = ReachOf("host-b", Record("host-a", {"10.20.1.1:7471"}), nets_b, nullptr);
  EXPECT_TRUE(ab.direct);
  EXPECT_TRUE(ab.dials);
  EXPECT_EQ(ab.address, "10.20.1.2:7471");
  EXPECT_EQ(ab.detail, "via cab-b");
  EXPECT_TRUE(ba.direct);
  EXPECT_FALSE(ba.dials);
  Reach ac = ReachOf("host-a", Record("host-c", {"10.20.9.2:7471"}), nets_a, nullptr);
  EXPECT_FALSE(ac.direct);
  EXPECT_FALSE(ac.dials);
  EXPECT_NE(ac.detail.find("none of its addresses"), std::string::npos) << ac.detail;
}

TEST(FabricReach, CablesOfAFileDecideAlone) {
  Cables cables = {{"host-a", "host-c"}};
  std::vector<LocalNet> nets = {Net("eth0", "10.1.0.1", 24)};
  Reach ab = ReachOf("host-a", Record("host-b", {"10.1.0.2:7471"}), nets, &cables);
  EXPECT_FALSE(ab.direct);
  EXPECT_EQ(ab.detail, "no cable to it in the fabric file");
  // Cabled: its address on a shared subnet, else its first.
  Reach ac = ReachOf("host-a", Record("host-c", {"192.168.9.3:7471"}), nets, &cables);
  EXPECT_TRUE(ac.direct);
  EXPECT_TRUE(ac.dials);
  EXPECT_EQ(ac.address, "192.168.9.3:7471");
}

TEST(FabricRecord, RoundTripsAsJsonUnderItsKey) {
  v1::FabricHostRecord r = Record("host-a", {"10.20.1.1:7471"});
  r.set_boot_generation(1765000000000);
  auto* l = r.add_links();
  l->set_peer("host-b");
  l->set_state("up");
  std::string prefix = HostsPrefix("lab");
  EXPECT_EQ(prefix, "/mcdma/fabrics/lab/hosts/");
  EXPECT_EQ(HostOfKey(prefix, prefix + "host-a"), "host-a");
  EXPECT_EQ(HostOfKey(prefix, prefix + "host-a/x"), "");
  EXPECT_EQ(HostOfKey(prefix, "/other/host-a"), "");
  auto back = DecodeRecord(EncodeRecord(r), "host-a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value().SerializeAsString(), r.SerializeAsString());
}

TEST(FabricRecord, BadRecordsAreRefusedByName) {
  auto check = [](const std::string& value, const char* host, const char* says) {
    auto r = DecodeRecord(value, host);
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_EQ(r.status().code(), Code::kInvalid);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  check("{", "host-a", "not a record");
  check(R"({"host":"host-b"})", "host-a", "names host 'host-b'");
  check(R"({"host":"host-a","addresses":["10.0.0.1"]})", "host-a", "is not IPV4:PORT");
  check(R"({"host":"host-a","addresses":["10.0.0.1:99999"]})", "host-a", "is not IPV4:PORT");
  check(R"({"host":"bad id!"})", "bad id!", "host");
  check(std::string(kMaxRecordBytes + 1, ' '), "host-a", "bytes (at most");
  std::string many = R"({"host":"host-a","addresses":[)";
  for (int i = 0; i <= kMaxAddresses; ++i) many += std::string(i ? "," : "") + "\"10.0.0.1:1\"";
  check(many + "]}", "host-a", "addresses (at most");
  // Fields a newer daemon adds are ignored.
  EXPECT_TRUE(DecodeRecord(R"({"host":"host-a","future_field":1})", "host-a").ok());
}

TEST(FabricFileTest, HostsAndCablesParse) {
  auto f = ParseFabricFile(R"(
[[host]]
id = "mac-1"
addresses = ["10.20.1.1:7471", "10.20.2.1:7471"]
[[host]]
id = "mac-2"
addresses = ["10.20.1.2:7471"]
[[cable]]
hosts = ["mac-2", "mac-1"]
)",
                           "fabric.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f.value().hosts.size(), 2u);
  EXPECT_EQ(f.value().hosts[0].addresses_size(), 2);
  ASSERT_EQ(f.value().cables.size(), 1u);
  EXPECT_EQ(f.value().cables[0], std::make_pair(std::string("mac-1"), std::string("mac-2")));
}

TEST(FabricFileTest, MistakesAreNamed) {
  auto says = [](const std::string& text, const char* what) {
    auto f = ParseFabricFile(text, "fabric.toml");
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_EQ(f.status().code(), Code::kInvalid);
    EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
  };
  says("", "no [[host]] tables");
  says("[[host]]\nid = \"a\"\n", "host[0].addresses: missing");
  says("[[host]]\naddresses = [\"10.0.0.1:1\"]\n", "host[0].id: missing");
  says(
      "[[host]]\nid = \"a\"\naddresses = [\"10.0.0.1:1\"]\n[[host]]\nid = \"a\"\naddresses = "
      "[\"10.0.0.2:1\"]\n",
      "host[1].id: 'a' is listed twice");
  says("[[host]]\nid = \"a\"\naddresses = [\"10.0.0.1:1\"]\n[[cable]]\nhosts = [\"a\", \"z\"]\n",
       "cable[0].hosts: 'z' is not a [[host]]");
  says("[[host]]\nid = \"a\"\naddresses = [\"10.0.0.1:1\"]\n[[cable]]\nhosts = [\"a\", \"a\"]\n",
       "two different host ids");
  says("[[host]]\nid = \"a\"\naddresses = [\"x\"]\n", "is not IPV4:PORT");
  says("[[host]]\nid = \"a\"\naddresses = [\"10.0.0.1:1\"]\ncolour = 1\n", "unknown key 'colour'");
  says("[hosts]\n", "unknown key 'hosts'");
  says("[[host]\n", "line 1");
}

}  // namespace
}  // namespace mcdma::daemon::fabric
