// The options table (daemon/src/config/option_table.hpp): every row is reachable
// from the TOML file and from its flag, both set the same field, --help
// lists it, its bounds name it, and the shipped example documents it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/command_line.hpp"
#include "config/option_table.hpp"
#include "config/options.hpp"

namespace mcdma::daemon {
namespace {

using Kind = OptionBounds::Kind;

bool IsString(const OptionSpec& row) { return row.field.index() == 0; }

// The largest value the row's field can hold.
int64_t TypeMax(const OptionSpec& row) {
  switch (row.field.index()) {
    case 1:
      return UINT32_MAX;
    case 2:
      return INT64_MAX;
    default:
      return INT32_MAX;
  }
}

// A value for the row that is not its default and is within its bounds.
std::string Sample(const OptionSpec& row) {
  const Options defaults;
  std::string current = OptionValueText(row, defaults);
  const OptionBounds& b = row.bounds;
  if (IsString(row)) {
    if (b.kind == Kind::kOneOf || b.kind == Kind::kEmptyOrOneOf) {
      for (std::string_view choice : b.choices) {
        if (choice != current) return std::string(choice);
      }
    }
    return "sample-" + std::string(row.key);
  }
  int64_t value = std::stoll(current);
  std::vector<int64_t> candidates;
  if (b.kind == Kind::kPowerOfTwo) {
    candidates = {b.min * 2, b.min};
  } else if (b.kind == Kind::kRange) {
    candidates = {b.min + 1, b.min, value + 7};
  } else {
    candidates = {value + 7, value - 1};
  }
  for (int64_t c : candidates) {
    bool in_bounds = b.kind == Kind::kNone || (c >= b.min && c <= b.max);
    if (c != value && c >= 0 && in_bounds) return std::to_string(c);
  }
  ADD_FAILURE() << row.key << ": no sample value";
  return current;
}

std::string TomlLine(const OptionSpec& row, const std::string& value) {
  return std::string(row.key) + " = " + (IsString(row) ? "\"" + value + "\"" : value) + "\n";
}

class OptionTableTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = ::testing::TempDir() + "/option_table_" + std::to_string(++files_) + ".toml";
    std::ofstream(path) << text;
    return path;
  }

  // Parses `args` as flags over a default Options.
  static Options FromFlags(const std::vector<std::string>& args) {
    CLI::App app;
    Options flags;
    AddOptionFlags(app, flags);
    std::vector<const char*> argv = {"mcdma-rpcd"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    Options out;
    ApplyGivenFlags(app, flags, out);
    return out;
  }

  int files_ = 0;
};

TEST_F(OptionTableTest, EveryRowHasAKeyAFlagAndHelpEachUnique) {
  const std::regex key_form("[a-z_]+(\\.[a-z_]+)?");
  const std::regex flag_form("--[a-z][a-z-]+");
  std::set<std::string_view> keys;
  std::set<std::string_view> flags;
  for (const OptionSpec& row : OptionTable()) {
    EXPECT_TRUE(std::regex_match(std::string(row.key), key_form)) << row.key;
    EXPECT_TRUE(std::regex_match(std::string(row.flag), flag_form)) << row.key << ": " << row.flag;
    EXPECT_FALSE(row.help.empty()) << row.key;
    EXPECT_TRUE(keys.insert(row.key).second) << row.key << " is in the table twice";
    EXPECT_TRUE(flags.insert(row.flag).second) << row.flag << " is in the table twice";
    EXPECT_EQ(FindOption(row.key), &row) << row.key;
    bool string_bounds = row.bounds.kind == Kind::kOneOf || row.bounds.kind == Kind::kEmptyOrOneOf;
    EXPECT_EQ(string_bounds, IsString(row) && row.bounds.kind != Kind::kNone) << row.key;
  }
  EXPECT_EQ(FindOption("no_such.key"), nullptr);
  // The 36 keys the file took before the table, at least.
  EXPECT_GE(keys.size(), 36u);
  // No two rows set the same field.
  std::span<const OptionSpec> table = OptionTable();
  for (size_t i = 0; i < table.size(); ++i) {
    for (size_t j = i + 1; j < table.size(); ++j) {
      EXPECT_FALSE(table[i].field == table[j].field) << table[i].key << " and " << table[j].key;
    }
  }
  // The flags the scripts and the Python tests use keep their names.
  for (const char* flag :
       {"--socket", "--host-id", "--log-level", "--spin-budget-us", "--arena-bytes",
        "--max-buffer-bytes", "--default-timeout-ms", "--drain-timeout-ms", "--fabric-key",
        "--listen", "--data-listen", "--heartbeat-ms", "--link-timeout-ms", "--reconnect-max-ms",
        "--verbs-device", "--verbs-interface", "--verbs-profile"}) {
    EXPECT_EQ(flags.count(flag), 1u) << flag;
  }
}

// Each row alone: the file and the flag set its field, and nothing else.
TEST_F(OptionTableTest, EachRowIsSetByTheFileAndByItsFlagAndNoOtherField) {
  const Options defaults;
  for (const OptionSpec& row : OptionTable()) {
    std::string value = Sample(row);
    Options from_file;
    Status st = LoadTomlFile(Write(TomlLine(row, value)), from_file);
    ASSERT_TRUE(st.ok()) << row.key << ": " << st.ToString();
    Options from_flag = FromFlags({std::string(row.flag), value});
    EXPECT_EQ(OptionValueText(row, from_file), value) << row.key;
    EXPECT_EQ(OptionValueText(row, from_flag), value) << row.flag;
    for (const OptionSpec& other : OptionTable()) {
      if (&other == &row) continue;
      EXPECT_EQ(OptionValueText(other, from_file), OptionValueText(other, defaults))
          << row.key << " changed " << other.key;
      EXPECT_EQ(OptionValueText(other, from_flag), OptionValueText(other, defaults))
          << row.flag << " changed " << other.key;
    }
  }
}

// Every row at once: both paths give the same Options, field by field.
TEST_F(OptionTableTest, TheFileAndTheFlagsSetTheSameFields) {
  std::string toml;
  std::vector<std::string> args;
  for (const OptionSpec& row : OptionTable()) {
    std::string value = Sample(row);
    toml += TomlLine(row, value);
    args.push_back(std::string(row.flag));
    args.push_back(value);
  }
  Options from_file;
  ASSERT_TRUE(LoadTomlFile(Write(toml), from_file).ok());
  Options from_flags = FromFlags(args);
  const Options defaults;
  for (const OptionSpec& row : OptionTable()) {
    EXPECT_EQ(OptionValueText(row, from_file), OptionValueText(row, from_flags)) << row.key;
    EXPECT_NE(OptionValueText(row, from_file), OptionValueText(row, defaults)) << row.key;
  }
}

TEST_F(OptionTableTest, HelpListsEveryFlagWithItsHelpKeyAndDefault) {
  CLI::App app;
  Options flags;
  AddOptionFlags(app, flags);
  std::string help = app.help();
  for (const OptionSpec& row : OptionTable()) {
    EXPECT_NE(help.find(std::string(row.help) + " (toml: " + std::string(row.key) + ")"),
              std::string::npos)
        << row.key;
    // The flag's line shows its default: "--heartbeat-ms UINT=500".
    size_t at = help.find(std::string(row.flag) + " ");
    ASSERT_NE(at, std::string::npos) << row.flag;
    std::string line = help.substr(at, help.find('\n', at) - at);
    std::string value = OptionValueText(row, flags);
    if (!value.empty()) EXPECT_NE(line.find("=" + value), std::string::npos) << line;
  }
  EXPECT_NE(help.find("--spin-budget-us UINT=50"), std::string::npos) << help;
  EXPECT_NE(help.find("--log-level TEXT=info"), std::string::npos) << help;
}

TEST_F(OptionTableTest, FlagsOverrideTheFileOnlyWhereGiven) {
  std::string config =
      Write("log_level = \"debug\"\n[engine]\nspin_budget_us = 7\n[link]\nheartbeat_ms = 200\n");
  std::string socket = ::testing::TempDir() + "/option_table.sock";
  std::vector<const char*> argv = {
      "mcdma-rpcd", "--config",     config.c_str(), "--log-level",         "warn",
      "--socket",   socket.c_str(), "--peer",       "host-b=10.0.0.2,tcp", "--fabric-key",
      "/k",         "--host-id",    "host-a"};
  auto parsed = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const Options& o = std::get<CommandLine>(parsed).options;
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(o.spin_budget_us, 7u);
  EXPECT_EQ(o.heartbeat_ms, 200u);
  EXPECT_EQ(o.socket, socket);
  EXPECT_EQ(o.host_id, "host-a");
  ASSERT_EQ(o.peers.size(), 1u);
  EXPECT_EQ(o.peers[0].name, "host-b");
  EXPECT_EQ(o.peers[0].address, "10.0.0.2");
  EXPECT_EQ(o.peers[0].transport, "tcp");
  EXPECT_FALSE(std::get<CommandLine>(parsed).check_only);

  std::vector<const char*> bad = {"mcdma-rpcd", "--socket", socket.c_str(), "--max-backlog", "3"};
  parsed = ParseCommandLine(static_cast<int>(bad.size()), bad.data());
  ASSERT_TRUE(std::holds_alternative<int>(parsed));
  EXPECT_EQ(std::get<int>(parsed), 2);
  EXPECT_FALSE(ParsePeerFlag("host-b").ok());
}

// A float where an integer belongs is refused, naming the key, whatever its
// size (toml++ itself would cast 1e19 to an integer out of range: UB).
TEST_F(OptionTableTest, FloatsForIntegerOptionsAreRefusedNamingTheKey) {
  int checked = 0;
  for (const OptionSpec& row : OptionTable()) {
    if (IsString(row)) continue;
    for (const char* value :
         {"5000.0", "1e19", "-9.3e18", "9223372036854775808.0", "1e300", "inf", "nan", "-inf"}) {
      Options o;
      Status st = LoadTomlFile(Write(TomlLine(row, value)), o);
      EXPECT_EQ(st.code(), Code::kInvalid) << row.key << " = " << value;
      EXPECT_NE(st.message().find(std::string(row.key) + ": expected "), std::string::npos)
          << st.message();
      EXPECT_NE(st.message().find("integer"), std::string::npos) << st.message();
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

// Each bound: the edges pass, one beyond fails naming the key and the value.
TEST_F(OptionTableTest, BoundsNameTheKeyAndTheValue) {
  int checked = 0;
  for (const OptionSpec& row : OptionTable()) {
    const OptionBounds& b = row.bounds;
    if (b.kind == Kind::kNone) continue;
    auto check = [&](const std::string& value) {
      Options o;
      EXPECT_TRUE(LoadTomlFile(Write(TomlLine(row, value)), o).ok()) << row.key << " " << value;
      return CheckBounds(row, o);
    };
    if (IsString(row)) {
      EXPECT_TRUE(check(std::string(b.choices.front())).ok()) << row.key;
      Status st = check("nonsense");
      EXPECT_EQ(st.code(), Code::kInvalid) << row.key;
      EXPECT_EQ(st.message().rfind(std::string(row.key) + ": 'nonsense' is not one of ", 0), 0u)
          << st.message();
      EXPECT_EQ(check("").ok(), b.kind == Kind::kEmptyOrOneOf) << row.key;
      ++checked;
      continue;
    }
    EXPECT_TRUE(check(std::to_string(b.min)).ok()) << row.key;
    if (b.max != kNoMax) EXPECT_TRUE(check(std::to_string(b.max)).ok()) << row.key;
    std::vector<int64_t> outside;
    if (b.min > (row.field.index() == 3 ? INT32_MIN : 0)) outside.push_back(b.min - 1);
    if (b.max < TypeMax(row)) outside.push_back(b.max + 1);
    if (b.kind == Kind::kPowerOfTwo) outside.push_back(b.min * 2 + 1);
    ASSERT_FALSE(outside.empty()) << row.key << ": a bound that excludes nothing";
    for (int64_t v : outside) {
      Status st = check(std::to_string(v));
      EXPECT_EQ(st.code(), Code::kInvalid) << row.key << " " << v;
      EXPECT_EQ(st.message().rfind(std::string(row.key) + ": ", 0), 0u) << st.message();
      EXPECT_NE(st.message().find("got " + std::to_string(v)), std::string::npos) << st.message();
    }
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

TEST_F(OptionTableTest, ValuesOfTheWrongTypeNameTheKey) {
  for (const OptionSpec& row : OptionTable()) {
    Options o;
    Status st =
        LoadTomlFile(Write(std::string(row.key) + (IsString(row) ? " = 3\n" : " = \"x\"\n")), o);
    EXPECT_EQ(st.code(), Code::kInvalid) << row.key;
    EXPECT_NE(st.message().find(std::string(row.key) + ": expected "), std::string::npos)
        << st.message();
  }
  Options o;
  Status st = LoadTomlFile(Write("[limits]\nmax_sessions = 4294967296\n"), o);
  EXPECT_NE(st.message().find("limits.max_sessions: expected an integer at most 4294967295"),
            std::string::npos)
      << st.message();
  st = LoadTomlFile(Write("[mailbox]\narena_bytes = -1\n"), o);
  EXPECT_NE(st.message().find("mailbox.arena_bytes: expected a non-negative integer"),
            std::string::npos)
      << st.message();
  st = LoadTomlFile(Write("[verbs]\ngid_index = -1\n"), o);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(o.verbs_gid_index, -1);
}

// Loads `toml` and validates it with a usable socket path; the first error.
Status LoadAndValidate(const std::string& path, Options& o) {
  MCDMA_RETURN_IF_ERROR(LoadTomlFile(path, o));
  o.socket = ::testing::TempDir() + "/option_table.sock";
  return Validate(o);
}

TEST_F(OptionTableTest, RailTablesLoadAndTheirNamesDefault) {
  Options o;
  Status st = LoadAndValidate(Write("[[rail]]\naddress = \"10.1.1.1\"\n"
                                    "[[rail]]\naddress = \"10.1.2.1\"\nname = \"nic-b\"\n"
                                    "transport = \"tcp\"\n"
                                    "[[rail]]\naddress = \"fd00::2\"\n"
                                    "[link]\nstripe_min_bytes = 65536\n"),
                              o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(o.rails.size(), 3u);
  EXPECT_EQ(o.rails[0].name, "tcp:10.1.1.1");
  EXPECT_EQ(o.rails[0].address, "10.1.1.1");
  EXPECT_EQ(o.rails[0].transport, "tcp");
  EXPECT_EQ(o.rails[1].name, "nic-b");
  EXPECT_EQ(o.rails[1].address, "10.1.2.1");
  EXPECT_EQ(o.rails[2].name, "tcp:fd00::2");
  EXPECT_EQ(o.stripe_min_bytes, 65536u);
  // Rails need no peers and no fabric key of their own.
  EXPECT_TRUE(o.peers.empty());
  // No [[rail]]: none, and the defaults of the link.* rail options.
  Options none;
  ASSERT_TRUE(LoadAndValidate(Write("log_level = \"info\"\n"), none).ok());
  EXPECT_TRUE(none.rails.empty());
  EXPECT_EQ(none.stripe_min_bytes, 1u << 20);
  EXPECT_EQ(none.slice_bytes, 256u << 10);
  EXPECT_EQ(none.rail_min_share, 10u);
  EXPECT_EQ(none.rail_hold_down_ms, 1000u);
  EXPECT_EQ(none.rail_probe_ms, 2000u);
}

// Each bad [[rail]] is refused, naming the table and the key.
TEST_F(OptionTableTest, BadRailTablesNameTheTableAndTheKey) {
  const std::string ok = "[[rail]]\naddress = \"10.1.1.1\"\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rail = 3\n", "rail: expected [[rail]] tables"},
      {"rail = [3]\n", "rail[0]: expected a table"},
      {"[[rail]]\naddress = \"10.1.1.1\"\ncolour = \"red\"\n",
       "rail[0].colour: unknown configuration key"},
      {"[[rail]]\naddress = 7\n", "rail[0].address: expected a string"},
      {"[[rail]]\nname = \"a\"\n", "rail[0].address: missing"},
      {ok + "[[rail]]\naddress = \"host-b\"\n", "rail[1].address: 'host-b' is not an IP address"},
      {"[[rail]]\naddress = \"10.1.1.1:7472\"\n",
       "rail[0].address: '10.1.1.1:7472' is not an IP address"},
      {"[[rail]]\naddress = \"[fd00::1]\"\n", "rail[0].address: '[fd00::1]' is not an IP address"},
      {"[[rail]]\naddress = \"0.0.0.0\"\n",
       "rail[0].address: '0.0.0.0' is the unspecified address"},
      {"[[rail]]\naddress = \"::\"\n", "rail[0].address: '::' is the unspecified address"},
      {"[[rail]]\naddress = \"10.1.1.1\"\ntransport = \"verbs\"\n",
       "rail[0].transport: only \"tcp\" rails are configured; RDMA rails come from the devices"},
      {"[[rail]]\naddress = \"10.1.1.1\"\ntransport = \"rdma\"\n",
       "rail[0].transport: only \"tcp\" rails are configured"},
      {ok + ok, "rail[1].address: '10.1.1.1' is listed twice"},
      // Two spellings of one address are one address.
      {"[[rail]]\naddress = \"fd00::1\"\n[[rail]]\naddress = \"fd00:0:0::1\"\n",
       "rail[1].address: 'fd00:0:0::1' is listed twice"},
      {ok + "[[rail]]\naddress = \"10.1.2.1\"\nname = \"tcp:10.1.1.1\"\n",
       "rail[1].name: 'tcp:10.1.1.1' is listed twice"},
      {"[[rail]]\naddress = \"10.1.1.1\"\nname = \"a\"\n"
       "[[rail]]\naddress = \"10.1.2.1\"\nname = \"a\"\n",
       "rail[1].name: 'a' is listed twice"},
      {"[[rail]]\naddress = \"10.1.1.1\"\nname = \"a>b\"\n",
       "rail[0].name: 'a>b': 1..64 characters of [A-Za-z0-9._:-]"},
      {"[[rail]]\naddress = \"10.1.1.1\"\nname = \"" + std::string(65, 'x') + "\"\n",
       "rail[0].name: '" + std::string(65, 'x') + "': 1..64 characters"},
  };
  for (const auto& [toml, error] : cases) {
    Options o;
    Status st = LoadAndValidate(Write(toml), o);
    EXPECT_EQ(st.code(), Code::kInvalid) << toml;
    EXPECT_NE(st.message().find(error), std::string::npos) << "expected '" << error << "' for\n"
                                                           << toml << "got: " << st.ToString();
  }
}

TEST_F(OptionTableTest, RailFlagsAddToTheFileAndTheRailOptionsAreSetByTheirFlags) {
  std::string config =
      Write("[[rail]]\naddress = \"10.1.1.1\"\nname = \"left\"\n[link]\nslice_bytes = 65536\n");
  std::string socket = ::testing::TempDir() + "/option_table.sock";
  std::vector<const char*> argv = {"mcdma-rpcd",
                                   "--config",
                                   config.c_str(),
                                   "--socket",
                                   socket.c_str(),
                                   "--rail",
                                   "10.1.2.1",
                                   "--rail",
                                   "fd00::7",
                                   "--stripe-min-bytes",
                                   "4194304",
                                   "--slice-bytes",
                                   "1048576",
                                   "--rail-min-share",
                                   "25",
                                   "--rail-hold-down-ms",
                                   "0",
                                   "--rail-probe-ms",
                                   "500"};
  auto parsed = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const Options& o = std::get<CommandLine>(parsed).options;
  ASSERT_EQ(o.rails.size(), 3u);
  EXPECT_EQ(o.rails[0].name, "left");
  EXPECT_EQ(o.rails[1].name, "tcp:10.1.2.1");
  EXPECT_EQ(o.rails[1].address, "10.1.2.1");
  EXPECT_EQ(o.rails[1].transport, "tcp");
  EXPECT_EQ(o.rails[2].name, "tcp:fd00::7");
  EXPECT_EQ(o.stripe_min_bytes, 4u << 20);
  EXPECT_EQ(o.slice_bytes, 1u << 20);  // the flag over the file
  EXPECT_EQ(o.rail_min_share, 25u);
  EXPECT_EQ(o.rail_hold_down_ms, 0u);
  EXPECT_EQ(o.rail_probe_ms, 500u);

  EXPECT_TRUE(ParseRailFlag("10.0.0.1").ok());
  EXPECT_TRUE(ParseRailFlag("::1").ok());
  for (const char* bad : {"", "host-b", "10.0.0.1:7472", "[::1]", "10.0.0.1=left"}) {
    auto rail = ParseRailFlag(bad);
    ASSERT_FALSE(rail.ok()) << bad;
    EXPECT_EQ(rail.status().message().rfind("--rail " + std::string(bad) + ": expected ADDRESS", 0),
              0u)
        << rail.status().message();
  }
  // A bad --rail, a --rail that repeats the file's, and a rail option out of
  // bounds: exit 2.
  for (std::vector<const char*> bad :
       std::vector<std::vector<const char*>>{{"--rail", "host-b"},
                                             {"--config", config.c_str(), "--rail", "10.1.1.1"},
                                             {"--slice-bytes", "65537"},
                                             {"--slice-bytes", "2048"},
                                             {"--stripe-min-bytes", "4095"},
                                             {"--rail-min-share", "101"},
                                             {"--rail-hold-down-ms", "600001"},
                                             {"--rail-probe-ms", "99"}}) {
    bad.insert(bad.begin(), {"mcdma-rpcd", "--socket", socket.c_str()});
    parsed = ParseCommandLine(static_cast<int>(bad.size()), bad.data());
    ASSERT_TRUE(std::holds_alternative<int>(parsed)) << bad.back();
    EXPECT_EQ(std::get<int>(parsed), 2) << bad.back();
  }
}

// [[rdma]] tables and --rdma flags: each an RDMA device port with its own
// profile, interface and GID index; bad ones refused by name.
TEST_F(OptionTableTest, RdmaTablesAndFlagsListTheDevicePortsToOpen) {
  std::string config = Write(
      "[[rdma]]\ndevice = \"rdma_en2\"\nprofile = \"apple-tb5\"\n"
      "[[rdma]]\ndevice = \"mlx5_0\"\nport = 2\ninterface = \"enp1s0f1np1\"\ngid_index = 3\n");
  std::string socket = ::testing::TempDir() + "/option_table.sock";
  std::vector<const char*> argv = {"mcdma-rpcd",
                                   "--config",
                                   config.c_str(),
                                   "--socket",
                                   socket.c_str(),
                                   "--rdma",
                                   "device=rxe1,port=1,profile=linux-rc,gid-index=-1"};
  auto parsed = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(std::holds_alternative<CommandLine>(parsed));
  const Options& o = std::get<CommandLine>(parsed).options;
  ASSERT_EQ(o.rdma.size(), 3u);
  EXPECT_EQ(o.rdma[0].device, "rdma_en2");
  EXPECT_EQ(o.rdma[0].port, 1u);
  EXPECT_EQ(o.rdma[0].profile, "apple-tb5");
  EXPECT_EQ(o.rdma[0].gid_index, -1);
  EXPECT_EQ(o.rdma[1].device, "mlx5_0");
  EXPECT_EQ(o.rdma[1].port, 2u);
  EXPECT_EQ(o.rdma[1].interface, "enp1s0f1np1");
  EXPECT_EQ(o.rdma[1].gid_index, 3);
  EXPECT_EQ(o.rdma[2].device, "rxe1");
  EXPECT_EQ(o.rdma[2].profile, "linux-rc");

  const std::string one = "[[rdma]]\ndevice = \"rxe1\"\n";
  std::string nine;
  for (int i = 0; i < 9; ++i) nine += "[[rdma]]\ndevice = \"rxe" + std::to_string(i) + "\"\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rdma = 3\n", "rdma: expected [[rdma]] tables"},
      {"[[rdma]]\nport = 1\n", "rdma[0].device: '': 1..64 characters"},
      {"[[rdma]]\ndevice = \"rxe 1\"\n", "rdma[0].device: 'rxe 1'"},
      {"[[rdma]]\ndevice = \"rxe1\"\nport = 0\n", "rdma[0].port: 0 is not in 1..255"},
      {"[[rdma]]\ndevice = \"rxe1\"\nprofile = \"warp\"\n",
       "rdma[0].profile: 'warp': expected linux-rc, mcdma-cx5 or apple-tb5"},
      {"[[rdma]]\ndevice = \"rxe1\"\ncolour = 1\n", "rdma[0].colour: unknown configuration key"},
      {one + one, "rdma[1]: device rxe1 port 1 is listed twice"},
      {nine, "rdma: 9 device ports listed; at most 8"},
  };
  for (const auto& [toml, error] : cases) {
    Options bad;
    Status st = LoadAndValidate(Write(toml), bad);
    EXPECT_EQ(st.code(), Code::kInvalid) << toml;
    EXPECT_NE(st.message().find(error), std::string::npos) << "expected '" << error << "' for\n"
                                                           << toml << "got: " << st.ToString();
  }
  for (const char* flag : {"rxe1", "device=", "device=rxe1,port=300", "device=rxe1,port=x",
                           "device=rxe1,speed=9", "port=1"}) {
    auto r = ParseRdmaFlag(flag);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_EQ(
        r.status().message().rfind("--rdma " + std::string(flag) + ": expected device=NAME", 0), 0u)
        << r.status().message();
  }
}

// systemd/rpcd.toml.example documents every key, and its active values are
// the defaults, as it says.
TEST_F(OptionTableTest, TheExampleConfigDocumentsEveryKeyAndHoldsTheDefaults) {
  std::string path = std::string(MCDMA_TEST_DATA_DIR) + "/../../../systemd/rpcd.toml.example";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  // Each line "name = ..." or "# name = ..." under its "[section]".
  std::set<std::string> documented;
  std::string section;
  std::string line;
  const std::regex header("^\\[([a-z_]+)\\]$");
  const std::regex entry("^(# )?([a-z_]+) = .*$");
  std::smatch m;
  while (std::getline(text, line)) {
    if (std::regex_match(line, m, header)) section = m[1];
    if (std::regex_match(line, m, entry))
      documented.insert(section.empty() ? m[2].str() : section + "." + m[2].str());
  }
  Options loaded;
  Status st = LoadTomlFile(path, loaded);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Options defaults;
  for (const OptionSpec& row : OptionTable()) {
    EXPECT_EQ(documented.count(std::string(row.key)), 1u) << row.key << " is not in " << path;
    EXPECT_EQ(OptionValueText(row, loaded), OptionValueText(row, defaults)) << row.key;
  }
}

}  // namespace
}  // namespace mcdma::daemon
