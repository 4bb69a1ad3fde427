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
#include <optional>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "link_cli.hpp"
#include "verbs_runner.hpp"

namespace mcdma::bench {
namespace {

void AddHostOptions(CLI::App& app, const char* side, VerbsHost& host) {
  std::string s = side;
  app.add_option("--device-" + s, host.device, "RDMA device of host " + s);
  app.add_option("--interface-" + s, host.interface, "Interface host " + s + "'s GID is on");
  app.add_option("--address-" + s, host.address, "IPv4 address of host " + s);
  app.add_option("--gid-index-" + s, host.gid_index,
                 "perftest -x on host " + s + " (-1: the RoCE v2 IPv4-mapped GID from sysfs)")
      ->check(CLI::Range(-1, 65535));
}

void AddOptions(CLI::App& app, VerbsOptions& o) {
  app.add_option("--out", o.out, "Directory for the CSVs, summary.csv and logs/");
  app.add_option("--profile", o.profile, "Both daemons' --verbs-profile")
      ->check(CLI::IsMember({"linux-rc", "mcdma-cx5", "apple-tb5"}));
  AddHostOptions(app, "a", o.a);
  AddHostOptions(app, "b", o.b);
  AddPlanOptions(app, o, BulkLimits{uint64_t{1} << 20, uint64_t{4} << 30, 4096, 100});
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
  app.add_option("--perftest-dir", o.perftest_dir,
                 "Directory holding ib_write_lat etc. (default: found on PATH)");
}

// The perftest directory: --perftest-dir, else where ib_write_lat is on
// PATH; "" when neither.
std::string PerftestDir(const std::string& given) {
  if (!given.empty()) return given;
  std::string found = harness::FindInPath("ib_write_lat");
  return found.empty() ? "" : std::filesystem::path(found).parent_path().string();
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Calls and one-sided bulk through two mcdma-rpcd daemons linked over verbs, side by side "
      "with perftest on the same RDMA devices (run it in the Soft-RoCE VM: "
      "bench/verbs/run-in-vm.sh). All figures are emulated there: for pass/fail and ratios only"};
  app.option_defaults()->always_capture_default();
  VerbsOptions options;
  AddOptions(app, options);
  LinkRoleOptions role;
  CLI::App* child = AddLinkChild(app, role);
  if (std::optional<int> done = harness::ParseCommandLine(app, argc, argv)) return *done;
  if (child->parsed()) return RunLinkRole(role, "mcdma_bench_verbs", DaemonRoles());

  auto self = harness::SelfExePath();
  if (!self.ok()) {
    fprintf(stderr, "mcdma_bench_verbs: %s\n", self.status().message().c_str());
    return 1;
  }
  VerbsPlan plan;
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
  plan.link = PlanFrom(options, *self);
  return RunVerbsBench(std::move(plan));
}

}  // namespace
}  // namespace mcdma::bench

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_verbs", mcdma::bench::Main, argc, argv);
}
