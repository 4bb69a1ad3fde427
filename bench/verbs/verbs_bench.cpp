// mcdma_bench_verbs: calls and one-sided bulk transfers through two
// mcdma-rpcd daemons linked over the verbs transport, side by side with
// perftest (ib_write_lat, ib_write_bw, ib_read_bw) on the same two RDMA
// devices. Made for the Soft-RoCE VM (bench/verbs/run-in-vm.sh runs it
// there); see bench/README.md.
//
// The same binary is every process of the run: without a subcommand it is
// the orchestrator; `child --role R` (hidden) is one app endpoint, started
// by the orchestrator. Exit codes: 0 every selected measurement ran, 1 one
// did not, 2 usage.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>

#include "link_cli.hpp"
#include "link_hosts.hpp"
#include "verbs_runner.hpp"

namespace {

constexpr size_t kMaxPayload = 16u << 20;

void AddHostOptions(CLI::App& app, const char* side, bench::VerbsHost& host) {
  std::string s = side;
  app.add_option("--device-" + s, host.device, "RDMA device of host " + s);
  app.add_option("--interface-" + s, host.interface, "Interface host " + s + "'s GID is on");
  app.add_option("--address-" + s, host.address, "IPv4 address of host " + s);
  app.add_option("--gid-index-" + s, host.gid_index,
                 "perftest -x on host " + s + " (-1: the RoCE v2 IPv4-mapped GID from sysfs)")
      ->check(CLI::Range(-1, 65535));
}

void AddOptions(CLI::App& app, bench::VerbsOptions& o) {
  app.add_option("--out", o.out, "Directory for the CSVs, summary.csv and logs/");
  app.add_option("--profile", o.profile, "Both daemons' --verbs-profile")
      ->check(CLI::IsMember({"linux-rc", "mcdma-cx5", "apple-tb5"}));
  AddHostOptions(app, "a", o.a);
  AddHostOptions(app, "b", o.b);
  app.add_option("--iterations", o.iterations, "Timed round trips per latency payload")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--warmup", o.warmup, "Untimed round trips before them")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--payloads", o.payloads, "Latency payload sizes in bytes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, kMaxPayload));
  app.add_option("--bulk-bytes", o.bulk_bytes, "Bytes per bandwidth transfer (and buffer size)")
      ->check(CLI::Range(uint64_t{1} << 20, uint64_t{4} << 30));
  app.add_option("--bulk-op-bytes", o.op_bytes, "Piece size of the daemon's WriteBatch/ReadBatch")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{4} << 30));
  app.add_option("--bulk-repeats", o.repeats, "Timed transfers per direction (after one untimed)")
      ->check(CLI::Range(1, 100));
  app.add_option("--perftest-bw-bytes", o.perftest_bw_bytes,
                 "Message size (-s) of ib_write_bw and ib_read_bw")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--perftest-read-depth", o.perftest_read_depth,
                 "Outstanding reads (-o) of ib_read_bw")
      ->check(CLI::Range(1, 1024));
  app.add_option("--perftest-tx-depth", o.perftest_tx_depth,
                 "Send queue depth (-t) of ib_write_bw and ib_read_bw; 0: perftest's default")
      ->check(CLI::Range(0, 16384));
  app.add_option("--perftest-limit", o.perftest_limit_s, "Seconds one perftest run may take")
      ->check(CLI::Range(1, 86400));
  app.add_option("--sched", o.sched,
                 "Scheduling class of every process of the run: idle (SCHED_IDLE: the kernel's "
                 "rxe work preempts them) or normal")
      ->check(CLI::IsMember({"idle", "normal"}));
  app.add_option("--parts", o.parts, "Which parts: latency, bandwidth")
      ->delimiter(',')
      ->check(CLI::IsMember({"latency", "bandwidth"}));
  app.add_option("--mechanisms", o.mechanisms, "Which rows: daemon, perftest")
      ->delimiter(',')
      ->check(CLI::IsMember({"daemon", "perftest"}));
  app.add_option("--daemon", o.daemon,
                 "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  app.add_option("--mcdmactl", o.mcdmactl,
                 "mcdmactl binary (default: <bench dir>/../tools/mcdmactl/mcdmactl)");
  app.add_option("--perftest-dir", o.perftest_dir,
                 "Directory holding ib_write_lat etc. (default: found on PATH)");
  app.add_option("--daemon-log-level", o.daemon_log_level, "The daemons' --log-level");
  app.add_option(
         "--daemon-arg", o.daemon_args,
         "One more flag for both daemons, e.g. --daemon-arg=--spin-budget-us=0 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--timeout-ms", o.timeout_ms, "Deadline of one round trip")
      ->check(CLI::Range(1, 600000));
  app.add_option("--run-limit", o.run_limit_s, "Seconds one app client run may take")
      ->check(CLI::Range(1, 86400));
  app.add_option("--link-wait", o.link_wait_s, "Seconds the verbs link may take to come up")
      ->check(CLI::Range(1, 3600));
}

// The perftest directory: --perftest-dir, else where ib_write_lat is on
// PATH; "" when neither.
std::string PerftestDir(const std::string& given) {
  if (!given.empty()) return given;
  std::string found = bench::FindInPath("ib_write_lat");
  return found.empty() ? "" : std::filesystem::path(found).parent_path().string();
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Calls and one-sided bulk through two mcdma-rpcd daemons linked over verbs, side by side "
      "with perftest on the same RDMA devices (run it in the Soft-RoCE VM: "
      "bench/verbs/run-in-vm.sh). All figures are emulated there: for pass/fail and ratios only"};
  app.option_defaults()->always_capture_default();
  bench::VerbsOptions options;
  AddOptions(app, options);
  bench::LinkRoleOptions role;
  CLI::App* child = bench::AddLinkChild(app, role);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (child->parsed()) return bench::RunLinkRole(role, "mcdma_bench_verbs", bench::DaemonRoles());

  auto self = bench::SelfExePath();
  if (!self.ok()) {
    fprintf(stderr, "mcdma_bench_verbs: %s\n", self.status().message().c_str());
    return 1;
  }
  bench::VerbsPlan plan;
  plan.options = options;
  bool perftest = std::find(options.mechanisms.begin(), options.mechanisms.end(), "perftest") !=
                  options.mechanisms.end();
  if (perftest) {
    plan.perftest_dir = PerftestDir(options.perftest_dir);
    if (plan.perftest_dir.empty()) {
      fprintf(stderr,
              "mcdma_bench_verbs: perftest (ib_write_lat) not on PATH; install perftest, pass "
              "--perftest-dir, or --mechanisms daemon\n");
      return 1;
    }
  }
  plan.link = bench::PlanFrom(options, *self);
  return bench::RunVerbsBench(std::move(plan));
}

}  // namespace

int main(int argc, char** argv) {
  return bench::GuardedMain("mcdma_bench_verbs", Main, argc, argv);
}
