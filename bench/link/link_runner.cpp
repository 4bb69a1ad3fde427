#include "link_runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "link_daemons.hpp"
#include "link_iperf.hpp"

namespace mcdma::bench {

namespace {

using harness::Row;
using harness::SampleSet;

struct CallMechanism {
  const char* key;
  const char* label;
  const char* transport;
  const char* server_role;
  const char* client_role;
};
// Table order: the daemon first, it is what the others are compared with.
const CallMechanism kCalls[] = {
    {"daemon", "mcdma-rpcd call via 2 daemons", "tcp-link", "daemon-server", "daemon-call-client"},
    // Diagnostic, in no target: the daemons alone, via `mcdmactl link test`.
    {"linktest", "daemon-daemon echo (link test)", "tcp-link", nullptr, nullptr},
    {"tcp", "raw TCP ping-pong", "tcp", "tcp-server", "tcp-client"},
    // Part of "tcp": the same with the daemon's wait policy (spin, then block).
    {"tcpspin", "raw TCP ping-pong, spin 50us", "tcp", "tcp-spin-server", "tcp-spin-client"},
    // Diagnostic, in no target: the same through one relay process per
    // host, the floor of any per-host daemon design on this machine.
    {"tcprelay", "raw TCP via 2 relays, spin 50us", "tcp", "tcp-relay-server", "tcp-relay-client"},
    {"grpc", "gRPC unary over TCP", "grpc-tcp", "grpc-tcp-server", "grpc-tcp-client"},
    {"zmq", "ZeroMQ REQ/REP", "zmq-tcp", "zmq-server", "zmq-client"},
};
const char* const kBulkOrder[] = {"daemon", "tcp", "iperf3"};

bool Has(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// Table position of a call mechanism.
int CallRank(const std::string& key) {
  int i = 0;
  while (i < static_cast<int>(std::size(kCalls)) && key != kCalls[i].key) ++i;
  return i;
}

// The two hosts of the run and a line saying where they are: two network
// namespaces joined by a veth pair, made by `bash script up mcbl<pid>`;
// loopback where `force_loopback` is set or `script check` says namespaces
// cannot be made here (the note says why). Any other failure of the
// script is an error (and whatever it made is removed).
struct LinkHosts {
  std::unique_ptr<harness::Hosts> hosts;
  std::string note;
};

Result<LinkHosts> MakeLinkHosts(const std::string& script, bool force_loopback) {
  if (force_loopback) {
    return LinkHosts{harness::Hosts::Loopback(2),
                     "loopback (--loopback): both daemons on 127.0.0.1"};
  }
  Status check = harness::Hosts::Check(script);
  if (check.code() == Code::kUnavailable) {
    std::string why = harness::LastLine(check.message());
    return LinkHosts{harness::Hosts::Loopback(2),
                     "loopback: " + (why.empty() ? "network namespaces unavailable" : why) +
                         "; both daemons on 127.0.0.1"};
  }
  if (check.code() == Code::kNotFound) {
    return Status(Code::kNotFound, check.message() + " (pass --hosts-script or --loopback)");
  }
  MCDMA_RETURN_IF_ERROR(check);
  MCDMA_ASSIGN_OR_RETURN(
      std::unique_ptr<harness::Hosts> hosts,
      harness::Hosts::MakeNamespaces(script, "mcbl" + std::to_string(getpid()), 2));
  hosts->RemoveOnSignals();
  const harness::Host& a = (*hosts)[0];
  const harness::Host& b = (*hosts)[1];
  std::string note = "network namespaces " + a.netns + " (" + a.address + ") and " + b.netns +
                     " (" + b.address + ") joined by a veth pair";
  return LinkHosts{std::move(hosts), std::move(note)};
}

// Collects rows as mechanisms run; `failed` once any row failed.
class Runner {
 public:
  Runner(const LinkPlan& plan, const harness::Hosts& hosts, const harness::TempDir& dir)
      : plan_(plan), hosts_(hosts), dir_(dir) {}

  void Calls(const CallMechanism& m, std::vector<std::string> server_args,
             std::vector<std::string> client_args, std::chrono::milliseconds ready) {
    fprintf(stderr, "mcdma_bench_link: calls: %s ...\n", m.key);
    LinkPair run{std::string("calls-") + m.key,
                 m.server_role,
                 m.client_role,
                 std::move(server_args),
                 std::move(client_args),
                 ready,
                 plan_.payloads.size(),
                 static_cast<size_t>(plan_.iterations)};
    auto sets = RunLinkPair(plan_, hosts_, dir_, std::move(run));
    if (!sets.ok()) return CallsNotRun(m, sets.status().message(), false);
    for (size_t i = 0; i < plan_.payloads.size(); ++i) {
      calls.rows.push_back(Row{m.key, m.label, m.transport, plan_.payloads[i], true, "",
                               harness::Summarize((*sets)[i].nanos)});
    }
  }

  void CallsNotRun(const CallMechanism& m, const std::string& why, bool skipped) {
    if (skipped) calls.skipped.push_back(m.key);
    failed = failed || !skipped;
    if (!skipped) fprintf(stderr, "mcdma_bench_link: %s failed: %s\n", m.key, why.c_str());
    for (size_t payload : plan_.payloads)
      calls.rows.push_back(Row{m.key, m.label, m.transport, payload, false, why, {}});
  }

  void Bulk(const std::string& key, const std::string& write_label, const std::string& read_label,
            LinkPair run) {
    fprintf(stderr, "mcdma_bench_link: bulk: %s ...\n", key.c_str());
    run.key = "bulk-" + key;
    run.expect_sets = 2;
    run.expect_samples = static_cast<size_t>(plan_.repeats);
    auto sets = RunLinkPair(plan_, hosts_, dir_, std::move(run));
    if (!sets.ok()) return BulkNotRun(key, write_label, read_label, sets.status().message(), false);
    auto rates = [&](const SampleSet& set) {
      std::vector<double> gbps;
      gbps.reserve(set.nanos.size());
      for (uint64_t ns : set.nanos) gbps.push_back(static_cast<double>(plan_.bulk_bytes) / ns);
      return gbps;
    };
    bulk.push_back(
        BulkRow{key, write_label, "A->B", plan_.bulk_bytes, true, false, "", rates((*sets)[0])});
    bulk.push_back(
        BulkRow{key, read_label, "B->A", plan_.bulk_bytes, true, false, "", rates((*sets)[1])});
  }

  void BulkNotRun(const std::string& key, const std::string& write_label,
                  const std::string& read_label, const std::string& why, bool skipped) {
    failed = failed || !skipped;
    if (!skipped)
      fprintf(stderr, "mcdma_bench_link: %s bulk failed: %s\n", key.c_str(), why.c_str());
    bulk.push_back(BulkRow{key, write_label, "A->B", plan_.bulk_bytes, false, skipped, why, {}});
    bulk.push_back(BulkRow{key, read_label, "B->A", plan_.bulk_bytes, false, skipped, why, {}});
  }

  void Iperf() {
    if (plan_.iperf3_path.empty()) {
      fprintf(stderr, "mcdma_bench_link: iperf3 not installed; its rows are skipped\n");
      return BulkNotRun("iperf3", "iperf3", "iperf3 -R", "iperf3 not installed", true);
    }
    fprintf(stderr, "mcdma_bench_link: bulk: iperf3 ...\n");
    auto rates = RunIperf(plan_, hosts_, dir_);
    if (!rates.ok())
      return BulkNotRun("iperf3", "iperf3", "iperf3 -R", rates.status().message(), false);
    bulk.push_back(
        BulkRow{"iperf3", "iperf3", "A->B", plan_.bulk_bytes, true, false, "", rates->a_to_b_gbps});
    bulk.push_back(BulkRow{"iperf3", "iperf3 -R", "B->A", plan_.bulk_bytes, true, false, "",
                           rates->b_to_a_gbps});
  }

  CallRows calls;
  std::vector<BulkRow> bulk;
  bool failed = false;

 private:
  const LinkPlan& plan_;
  const harness::Hosts& hosts_;
  const harness::TempDir& dir_;
};

const CallMechanism& Mechanism(const char* key) {
  for (const CallMechanism& m : kCalls) {
    if (std::string(m.key) == key) return m;
  }
  return kCalls[0];
}

// The daemons' own echo over the link, one row per payload: how much of a
// call's round trip is the link between the daemons rather than the apps'
// hops to and from them.
void RunLinkTest(const LinkPlan& plan, DaemonPair& pair, Runner& runner) {
  fprintf(stderr, "mcdma_bench_link: calls: linktest ...\n");
  const CallMechanism& m = Mechanism("linktest");
  std::vector<Row> rows;
  for (size_t payload : plan.payloads) {
    auto nanos = pair.LinkTest(plan, payload, plan.iterations);
    if (!nanos.ok()) {
      bool skipped = nanos.status().code() == mcdma::Code::kNotFound;
      return runner.CallsNotRun(m, nanos.status().message(), skipped);
    }
    rows.push_back(Row{m.key, m.label, m.transport, payload, true, "", harness::Summarize(*nanos)});
  }
  runner.calls.rows.insert(runner.calls.rows.end(), rows.begin(), rows.end());
}

void RunDaemonRows(const LinkOptions& options, const LinkPlan& plan, const harness::Hosts& hosts,
                   const harness::TempDir& dir, Runner& runner, LinkRunInfo& info) {
  bool calls = Has(options.parts, "calls");
  bool bulk = Has(options.parts, "bulk");
  fprintf(stderr, "mcdma_bench_link: starting the daemons ...\n");
  auto daemons = DaemonPair::Start(plan, hosts, dir);
  if (!daemons.ok()) {
    std::string why = "daemons: " + daemons.status().message();
    info.link = why;
    if (calls) runner.CallsNotRun(Mechanism("daemon"), why, false);
    if (bulk)
      runner.BulkNotRun("daemon", "mcdma-rpcd WriteBatch", "mcdma-rpcd ReadBatch", why, false);
    return;
  }
  DaemonPair& pair = **daemons;
  info.link = pair.note();
  fprintf(stderr, "mcdma_bench_link: %s\n", pair.note().c_str());
  if (calls) {
    runner.Calls(Mechanism("daemon"), {"--socket", pair.socket_b()},
                 {"--socket", pair.socket_a(), "--peer", hosts[1].id}, std::chrono::seconds(20));
  }
  if (calls) RunLinkTest(plan, pair, runner);
  if (bulk) {
    LinkPair run;
    run.server_role = "daemon-bulk-server";
    run.client_role = "daemon-bulk-client";
    run.server_args = {"--socket", pair.socket_b(), "--peer", hosts[0].id};
    run.client_args = {"--socket", pair.socket_a(), "--peer", hosts[1].id};
    run.ready_timeout = std::chrono::seconds(60);  // allocates and touches the buffer
    runner.Bulk("daemon", "mcdma-rpcd WriteBatch", "mcdma-rpcd ReadBatch", std::move(run));
  }
  // A daemon that died mid-run explains the failures above it.
  if (std::string gone = pair.Exited(); !gone.empty()) {
    fprintf(stderr, "mcdma_bench_link: %s\n", gone.c_str());
    runner.failed = true;
  }
}

}  // namespace

int RunLinkBench(const LinkOptions& options, const LinkPlan& plan) {
  harness::TempDir dir("mcdma-bench-link");
  if (!dir.ok()) {
    fprintf(stderr, "mcdma_bench_link: %s\n", dir.error().c_str());
    return 1;
  }
  auto made = MakeLinkHosts(options.hosts_script, options.loopback);
  if (!made.ok()) {
    fprintf(stderr, "mcdma_bench_link: hosts: %s\n", made.status().message().c_str());
    return 1;
  }
  const harness::Hosts& hosts = *made->hosts;
  LinkRunInfo info;
  info.hosts = made->note;
  info.loopback = !hosts.netns();
  fprintf(stderr, "mcdma_bench_link: hosts: %s\n", info.hosts.c_str());
  if (info.loopback) printf("note: %s\n", info.hosts.c_str());

  Runner runner(plan, hosts, dir);
  const bool calls = Has(options.parts, "calls");
  const bool bulk = Has(options.parts, "bulk");
  const auto ready = std::chrono::milliseconds(10000);
  // Baselines first: no daemon runs while they are measured.
  if (calls && Has(options.mechanisms, "tcp")) {
    runner.Calls(Mechanism("tcp"), {}, {}, ready);
    runner.Calls(Mechanism("tcpspin"), {}, {}, ready);
    runner.Calls(Mechanism("tcprelay"), {}, {}, ready);
  }
  if (calls && Has(options.mechanisms, "grpc")) runner.Calls(Mechanism("grpc"), {}, {}, ready);
  if (calls && Has(options.mechanisms, "zmq")) {
    if (kHaveZmq) {
      runner.Calls(Mechanism("zmq"), {}, {}, ready);
    } else {
      runner.CallsNotRun(Mechanism("zmq"), "built without libzmq", true);
    }
  }
  if (bulk && Has(options.mechanisms, "tcp")) {
    LinkPair run;
    run.server_role = "tcp-bulk-server";
    run.client_role = "tcp-bulk-client";
    run.ready_timeout = std::chrono::seconds(60);  // allocates and touches the buffer
    runner.Bulk("tcp", "raw TCP single stream", "raw TCP single stream", std::move(run));
  }
  if (bulk && Has(options.mechanisms, "iperf3")) runner.Iperf();
  if (Has(options.mechanisms, "daemon")) RunDaemonRows(options, plan, hosts, dir, runner, info);

  std::stable_sort(runner.calls.rows.begin(), runner.calls.rows.end(),
                   [](const Row& a, const Row& b) {
                     if (a.payload != b.payload) return a.payload < b.payload;
                     return CallRank(a.mechanism) < CallRank(b.mechanism);
                   });
  auto bulk_rank = [](const BulkRow& r) {
    return static_cast<int>(std::find(std::begin(kBulkOrder), std::end(kBulkOrder), r.mechanism) -
                            std::begin(kBulkOrder));
  };
  std::stable_sort(runner.bulk.begin(), runner.bulk.end(), [&](const BulkRow& a, const BulkRow& b) {
    if (a.direction != b.direction) return a.direction < b.direction;
    return bulk_rank(a) < bulk_rank(b);
  });

  printf("cross-host link: host-a -> host-b over %s; %u CPUs, %s\n", info.hosts.c_str(),
         std::thread::hardware_concurrency(), harness::KernelName().c_str());
  if (!info.link.empty()) printf("%s\n", info.link.c_str());
  if (calls) {
    printf(
        "\ncalls (client app on host-a, server app on host-b): %d round trips per row after %d "
        "warm-up\n",
        plan.iterations, plan.warmup);
    PrintCallTable(stdout, runner.calls);
  }
  if (bulk) {
    printf(
        "\nbulk (app on host-a; A->B = write, B->A = read): median of %d timed transfers after "
        "1 untimed; GB/s = 10^9 B/s; daemon pieces of %s\n",
        plan.repeats, harness::FormatBytes(plan.op_bytes).c_str());
    PrintBulkTable(stdout, runner.bulk);
  }
  std::vector<harness::Verdict> targets =
      EvaluateLinkTargets(runner.calls, plan.payloads, runner.bulk);
  printf("\n");
  for (const harness::Verdict& t : targets) printf("%s\n", t.line.c_str());
  if (std::string floor = RelayFloorLine(runner.calls, plan.payloads); !floor.empty()) {
    printf("%s\n", floor.c_str());
  }
  fflush(stdout);

  if (!options.json.empty()) {
    mcdma::Status st = WriteLinkJson(options.json, info, plan, runner.calls, runner.bulk, targets);
    if (!st.ok()) {
      fprintf(stderr, "mcdma_bench_link: %s\n", st.message().c_str());
      return 1;
    }
  }
  return runner.failed ? 1 : 0;
}

}  // namespace mcdma::bench
