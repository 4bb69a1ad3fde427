#include "link_relay.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "harness/pair_runner.hpp"
#include "link_orchestrator.hpp"
#include "relay_fabric.hpp"
#include "relay_report.hpp"

namespace mcdma::bench {

// Named, not anonymous: the target is a unity build (see link_rails.cpp).
namespace relay_mode {

namespace {

using harness::Millis;

// Servers outlive the client run they serve by this much before their own
// idle limit ends them (the orchestrator normally stops them long before).
constexpr int kServerSlackMs = 60000;
constexpr Millis kBulkReady(60000);  // a bulk server allocates and touches its buffer

bool Has(const std::vector<std::string>& list, const std::string& key) {
  for (const std::string& s : list) {
    if (s == key) return true;
  }
  return false;
}

std::string Oneline(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

// One server (on any host) and one client (on host a).
struct PairSpec {
  std::string key;
  size_t server_host = 1;
  std::string address;  // the server's --address; a TCP server listens there
  std::string server_role;
  std::string client_role;
  std::vector<std::string> server_args;
  std::vector<std::string> client_args;
  Millis ready_timeout{10000};
  size_t expect_sets = 0;
  size_t expect_samples = 0;
  std::vector<size_t> expect_payloads;
};

class RelayBench {
 public:
  RelayBench(LinkPlan plan, RelayFabric& fabric, const harness::TempDir& dir)
      : plan_(std::move(plan)), fabric_(fabric), dir_(dir) {}

  RelayResults& results() { return r_; }

  void Calls() {
    RelayCounters before[2];
    Relayed(before);
    for (size_t j = 1; j < RelayFabric::kHosts; ++j) {
      const std::string& id = fabric_.hosts()[j].id;
      PairSpec p = CallSpec("calls-" + id, "daemon-server", "daemon-call-client");
      p.server_host = j;
      p.address = fabric_.hosts()[j].address;
      p.server_args = {"--socket", fabric_.daemon(j).socket};
      p.client_args = {"--socket", fabric_.daemon(0).socket, "--peer", id};
      const int relays = static_cast<int>(j) - 1;
      AddCalls("daemon-" + id.substr(5),
               id + (relays == 0   ? ", direct"
                     : relays == 1 ? ", 1 relay"
                                   : ", 2 relays"),
               "mcdma-rpcd", std::move(p));
    }
    Relayed(r_.calls_relayed, before);
  }

  void TcpCalls() {
    const std::string address = fabric_.cables()[0].address[1];
    AddCalls("tcp", "raw TCP ping-pong, a-b cable", "tcp",
             WithAddress(CallSpec("calls-tcp", "tcp-server", "tcp-client"), address));
    AddCalls("tcpspin", "raw TCP ping-pong, spin 50us", "tcp",
             WithAddress(CallSpec("calls-tcpspin", "tcp-spin-server", "tcp-spin-client"), address));
  }

  // Bulk into an export on host j (1: direct, 2: one relay, 3: two).
  void DaemonBulk(size_t j, RelayCounters* relayed) {
    const std::string& id = fabric_.hosts()[j].id;
    RelayBulk row;
    row.relays = static_cast<int>(j) - 1;
    row.key = row.relays == 0 ? "direct" : "relay" + std::to_string(row.relays);
    row.label = id + (row.relays == 0   ? ", direct"
                      : row.relays == 1 ? ", 1 relay (b)"
                                        : ", 2 relays (b, c)");
    PairSpec p = BulkSpec("bulk-" + id, "daemon-bulk-server", "daemon-bulk-client");
    p.server_host = j;
    p.address = fabric_.hosts()[j].address;
    p.server_args = {"--socket", fabric_.daemon(j).socket, "--peer", fabric_.hosts()[0].id};
    p.client_args = {"--socket", fabric_.daemon(0).socket, "--peer", id};
    fprintf(stderr, "mcdma_bench_link relay: bulk host-a -> %s ...\n", row.label.c_str());
    RelayCounters before[2];
    if (relayed != nullptr) Relayed(before);
    Measure(row, std::move(p));
    if (relayed != nullptr) Relayed(relayed, before, true);
    r_.bulk.push_back(std::move(row));
  }

  void TcpBulk() {
    RelayBulk& row = r_.tcp;
    row.key = "tcp";
    row.label = "raw TCP stream, a-b cable";
    fprintf(stderr, "mcdma_bench_link relay: bulk over raw TCP, a-b cable ...\n");
    Measure(row, WithAddress(BulkSpec("bulk-tcp", "tcp-bulk-server", "tcp-bulk-client"),
                             fabric_.cables()[0].address[1]));
  }

  bool failed() const { return !r_.failures.empty(); }
  void Failed(const std::string& what, const std::string& why) {
    r_.failures.push_back(what + ": " + why);
    fprintf(stderr, "mcdma_bench_link relay: %s failed: %s\n", what.c_str(), why.c_str());
  }

 private:
  PairSpec CallSpec(const std::string& key, const std::string& server, const std::string& client) {
    PairSpec p;
    p.key = key;
    p.server_role = server;
    p.client_role = client;
    p.expect_sets = plan_.payloads.size();
    p.expect_samples = static_cast<size_t>(plan_.iterations);
    p.expect_payloads = plan_.payloads;
    return p;
  }

  PairSpec BulkSpec(const std::string& key, const std::string& server, const std::string& client) {
    PairSpec p;
    p.key = key;
    p.server_role = server;
    p.client_role = client;
    p.ready_timeout = kBulkReady;
    p.expect_sets = 2;
    p.expect_samples = static_cast<size_t>(plan_.repeats);
    return p;
  }

  static PairSpec WithAddress(PairSpec p, const std::string& address) {
    p.address = address;
    return p;
  }

  std::vector<std::string> Endpoint(const std::string& role, int run_limit_ms) const {
    std::vector<std::string> argv = harness::EndpointArgv(
        {plan_.self_exe, "child"}, harness::RoleFor(plan_, role, run_limit_ms));
    argv.insert(argv.end(),
                {"--bulk-bytes", std::to_string(plan_.bulk_bytes), "--op-bytes",
                 std::to_string(plan_.op_bytes), "--repeats", std::to_string(plan_.repeats)});
    return argv;
  }

  Result<std::vector<harness::SampleSet>> Run(PairSpec p) {
    const harness::Hosts& hosts = fabric_.hosts();
    const harness::Host& server = hosts[p.server_host];
    const harness::Host& client = hosts[0];
    harness::PairRun run;
    run.program = plan_.program;
    run.key = p.key;
    run.server_role = p.server_role;
    run.client_role = p.client_role;
    run.server_argv =
        hosts.On(server, Endpoint(p.server_role, plan_.run_limit_ms + kServerSlackMs));
    run.server_argv.insert(run.server_argv.end(), {"--address", p.address});
    run.server_argv.insert(run.server_argv.end(), p.server_args.begin(), p.server_args.end());
    run.server_host = server.id;
    run.server_address = p.address;
    run.client_argv = hosts.On(client, Endpoint(p.client_role, plan_.run_limit_ms));
    run.client_argv.insert(run.client_argv.end(), p.client_args.begin(), p.client_args.end());
    run.client_host = client.id;
    run.ready_timeout = p.ready_timeout;
    run.run_limit = Millis(plan_.run_limit_ms);
    run.expect_sets = p.expect_sets;
    run.expect_samples = p.expect_samples;
    run.expect_payloads = p.expect_payloads;
    return harness::RunPair(dir_, std::move(run));
  }

  void AddCalls(const std::string& key, const std::string& label, const std::string& transport,
                PairSpec p) {
    fprintf(stderr, "mcdma_bench_link relay: calls: %s ...\n", label.c_str());
    auto sets = Run(std::move(p));
    if (!sets.ok()) {
      const std::string why = Oneline(sets.status().message());
      for (size_t payload : plan_.payloads)
        r_.calls.push_back(harness::Row{key, label, transport, payload, false, why, {}});
      Failed("calls " + label, why);
      if (key.rfind("daemon", 0) == 0) fprintf(stderr, "%s", fabric_.LogTails(6).c_str());
      return;
    }
    for (harness::SampleSet& s : *sets) {
      r_.calls.push_back(harness::Row{key, label, transport, s.payload, true, "",
                                      harness::Summarize(std::move(s.nanos))});
    }
  }

  void Measure(RelayBulk& row, PairSpec p) {
    std::vector<uint64_t> before = fabric_.CableTx();
    auto sets = Run(std::move(p));
    std::vector<uint64_t> after = fabric_.CableTx();
    if (!before.empty() && after.size() == before.size()) {
      for (size_t k = 0; k < after.size(); ++k) row.cable_tx.push_back(after[k] - before[k]);
    }
    row.ran = true;
    if (!sets.ok()) {
      row.error = Oneline(sets.status().message());
      Failed("bulk " + row.label, row.error);
      if (row.key != "tcp") fprintf(stderr, "%s", fabric_.LogTails(6).c_str());
      return;
    }
    row.ok = true;
    for (size_t dir = 0; dir < 2; ++dir) {
      for (uint64_t ns : (*sets)[dir].nanos) {
        double mbps = static_cast<double>(plan_.bulk_bytes) * 1e3 / static_cast<double>(ns);
        (dir == 0 ? row.write_mbps : row.read_mbps).push_back(mbps);
      }
    }
  }

  // Hosts b's and c's relay counters: now, or since `before` (added to
  // what `out` holds with `add`).
  void Relayed(RelayCounters* out, const RelayCounters* before = nullptr, bool add = false) {
    for (size_t k = 0; k < 2; ++k) {
      RelayCounters now = fabric_.Relayed(k + 1);
      if (before != nullptr) {
        now.read = now.read && before[k].read;
        now.forwarded -= before[k].forwarded;
        now.forwarded_bytes -= before[k].forwarded_bytes;
        now.dropped -= before[k].dropped;
      }
      if (add && out[k].read && now.read) {
        out[k].forwarded += now.forwarded;
        out[k].forwarded_bytes += now.forwarded_bytes;
        out[k].dropped += now.dropped;
      } else {
        out[k] = now;
      }
    }
  }

  const LinkPlan plan_;
  RelayFabric& fabric_;
  const harness::TempDir& dir_;
  RelayResults r_;
};

}  // namespace

CLI::App* AddCommand(CLI::App& app, RelayOptions& o) {
  CLI::App* relay = app.add_subcommand(
      "relay",
      "Bulk and calls from host a to hosts b (direct), c (1 relay) and d (2 relays) of a line of "
      "rate-limited cables, routed by the daemons, vs raw TCP on the a-b cable (root: network "
      "namespaces and tc)");
  relay->option_defaults()->always_capture_default();
  relay->add_option("--rate", o.rate,
                    "tc tbf rate of each end of every cable (tc syntax, e.g. 200mbit); none: not "
                    "limited");
  relay
      ->add_option("--bytes", o.bulk_bytes, "Bytes per bulk transfer (and buffer size), e.g. 64MiB")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{1} << 20, uint64_t{16} << 30));
  relay->add_option("--op-bytes", o.op_bytes, "Bytes per piece of a daemon WriteBatch/ReadBatch")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{4096}, uint64_t{16} << 30));
  relay->add_option("--repeats", o.repeats, "Timed transfers per direction (after one untimed)")
      ->check(CLI::Range(1, 100));
  harness::AddRoundTripOptions(*relay, o.iterations, o.warmup, o.payloads);
  relay
      ->add_option("--parts", o.parts,
                   "Which to run: calls, bulk, tcp (the raw TCP rows of the parts run)")
      ->delimiter(',')
      ->check(CLI::IsMember({"calls", "bulk", "tcp"}));
  relay->add_option("--json", o.json, "Also write the results as JSON to this file");
  relay->add_option("--daemon", o.daemon,
                    "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  relay->add_option("--mcdmactl", o.mcdmactl,
                    "mcdmactl binary (default: <bench dir>/../tools/mcdmactl/mcdmactl)");
  relay->add_option("--hosts-script", o.hosts_script, "Network namespace script");
  relay->add_option("--daemon-log-level", o.daemon_log_level, "The daemons' --log-level");
  relay->add_option("--daemon-arg", o.daemon_args, "One more flag for every daemon (repeatable)")
      ->allow_extra_args(false);
  relay->add_option(
      "--log-dir", o.log_dir,
      "Keep the daemons' logs here (default: the run's temp dir, removed at the end)");
  relay->add_option("--timeout-ms", o.timeout_ms, "Deadline of one call")
      ->check(CLI::Range(1, 600000));
  relay->add_option("--run-limit", o.run_limit_s, "Seconds one client run may take")
      ->check(CLI::Range(1, 86400));
  relay->add_option("--link-wait", o.link_wait_s, "Seconds the links and routes may take")
      ->check(CLI::Range(1, 3600));
  return relay;
}

int Run(const RelayOptions& o, const std::string& self) {
  Status check = harness::Hosts::Check(o.hosts_script);
  if (check.code() == Code::kUnavailable) {
    printf("mcdma_bench_link relay: not run: %s\n", harness::LastLine(check.message()).c_str());
    return harness::Hosts::kCheckUnavailable;
  }
  if (!check.ok()) {
    fprintf(stderr, "mcdma_bench_link relay: hosts: %s\n", check.message().c_str());
    return 1;
  }
  harness::TempDir dir("mcdma-bench-relay");
  if (!dir.ok()) {
    fprintf(stderr, "mcdma_bench_link relay: %s\n", dir.error().c_str());
    return 1;
  }
  const LinkPlan plan = PlanFrom(o, self);
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0) {
    fprintf(stderr, "mcdma_bench_link relay: no mcdmactl at %s: the routes cannot be watched\n",
            plan.mcdmactl_path.c_str());
    return 1;
  }
  if (!o.log_dir.empty()) mkdir(o.log_dir.c_str(), 0755);

  RelayFabricConfig config;
  config.hosts_script = o.hosts_script;
  config.rate = o.rate == "none" ? "" : o.rate;
  config.daemon_path = plan.daemon_path;
  config.mcdmactl_path = plan.mcdmactl_path;
  config.log_level = o.daemon_log_level;
  config.daemon_args = o.daemon_args;
  config.log_dir = o.log_dir;
  auto made = RelayFabric::Make(config, dir);
  if (!made.ok()) {
    fprintf(stderr, "mcdma_bench_link relay: hosts: %s\n", made.status().message().c_str());
    return 1;
  }
  RelayFabric& fabric = **made;
  RelayBench bench(plan, fabric, dir);
  RelayResults& r = bench.results();
  r.daemon_path = plan.daemon_path;
  std::string cables;
  for (const RelayCable& c : fabric.cables()) {
    cables +=
        (cables.empty() ? "" : ", ") + c.label + " (" + c.address[0] + " - " + c.address[1] + ")";
  }
  r.setup = "network namespaces " + fabric.hosts()[0].netns + " .. " + fabric.hosts()[3].netns +
            "; cables " + cables + ", " +
            (o.rate == "none" ? std::string("not limited")
                              : "each end tc tbf " + o.rate + " burst 256kb latency 100ms") +
            "; daemons: one static fabric file (3 [[cable]]s), --fabric-interfaces c-*, "
            "transport tcp";
  fprintf(stderr, "mcdma_bench_link relay: %s\n", r.setup.c_str());

  Status started = fabric.StartDaemons();
  if (!started.ok()) {
    fprintf(stderr, "mcdma_bench_link relay: daemons: %s\n", started.message().c_str());
    return 1;
  }
  auto routes = fabric.WaitForRoutes(Millis(plan.link_wait_ms));
  if (routes.ok()) {
    r.routes_after_s = *routes;
  } else {
    // Measure anyway: each row then fails with its own reason.
    bench.Failed("routes", Oneline(routes.status().message()));
    fprintf(stderr, "%s", fabric.LogTails(10).c_str());
  }
  r.routes = fabric.routes_note();
  fprintf(stderr, "mcdma_bench_link relay: host-a's routes: %s\n", r.routes.c_str());

  // The direct link and raw TCP back to back; the relays after them.
  const bool calls = Has(o.parts, "calls"), bulk = Has(o.parts, "bulk"), tcp = Has(o.parts, "tcp");
  if (calls) bench.Calls();
  if (calls && tcp) bench.TcpCalls();
  if (bulk) bench.DaemonBulk(1, nullptr);
  if (bulk && tcp) bench.TcpBulk();
  if (bulk) {
    bench.DaemonBulk(2, r.bulk_relayed);
    bench.DaemonBulk(3, r.bulk_relayed);
  }
  if (std::string gone = fabric.Exited(); !gone.empty()) bench.Failed("daemons", gone);

  std::vector<harness::Verdict> verdicts;
  PrintRelayReport(o, r, verdicts);
  fflush(stdout);
  if (!o.json.empty()) {
    Status st = WriteRelayJson(o.json, o, r, verdicts);
    if (!st.ok()) {
      fprintf(stderr, "mcdma_bench_link relay: %s\n", st.message().c_str());
      return 1;
    }
  }
  return bench.failed() ? 1 : 0;
}

}  // namespace relay_mode

CLI::App* AddRelayCommand(CLI::App& app, RelayOptions& options) {
  return relay_mode::AddCommand(app, options);
}

int RunRelayBench(const RelayOptions& options, const std::string& self) {
  return relay_mode::Run(options, self);
}

}  // namespace mcdma::bench
