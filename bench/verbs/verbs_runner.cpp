#include "verbs_runner.hpp"

#include <sched.h>
#include <string.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <thread>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "harness/report.hpp"
#include "link_daemons.hpp"
#include "link_orchestrator.hpp"
#include "verbs_perftest.hpp"
#include "verbs_report.hpp"

namespace mcdma::bench {

namespace {

using harness::FormatBytes;
using harness::Hosts;
using harness::TempDir;

constexpr uint16_t kFirstPerftestPort = 18515;  // perftest's own default
constexpr int kWriteLatRttFactor = 2;           // ib_write_lat reports half a round trip
constexpr int kLogTailLines = 12;
constexpr int kPerftestAttempts = 3;
// An emulated rxe ping-pong takes ~0.1-0.3 ms under TCG; a median this long
// means every hop waited for a scheduler tick (4 ms at HZ=250).
constexpr double kTickLockedUs = 2000;

bool Has(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

std::string HostText(const VerbsHost& h) {
  return h.id + " = " + h.device + " (" + h.interface + ", " + h.address + ", GID index " +
         (h.gid_index < 0 ? std::string("?") : std::to_string(h.gid_index)) + ")";
}

LatencyRow NewLatencyRow(const std::string& key, const std::string& label, size_t payload) {
  LatencyRow row;
  row.key = key;
  row.label = label;
  row.payload = payload;
  return row;
}

BandwidthRow NewBandwidthRow(const std::string& key, const std::string& label,
                             const std::string& direction, uint64_t bytes, uint64_t unit) {
  BandwidthRow row;
  row.key = key;
  row.label = label;
  row.direction = direction;
  row.bytes = bytes;
  row.unit = unit;
  return row;
}

std::string Join(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& a : args) text += (text.empty() ? "" : " ") + a;
  return text;
}

// Puts this process, and so every process it starts, in `sched`'s class.
mcdma::Status ApplySched(const std::string& sched) {
  if (sched != "idle") return mcdma::Status::Ok();
  sched_param param{};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) {
    return mcdma::Status(mcdma::Code::kSystem,
                         std::string("sched_setscheduler(SCHED_IDLE): ") + strerror(errno));
  }
  return mcdma::Status::Ok();
}

void Say(const std::string& line) { fprintf(stderr, "mcdma_bench_verbs: %s\n", line.c_str()); }

// Collects rows as the measurements run; `failed` once any did not.
class Runner {
 public:
  explicit Runner(VerbsPlan& plan) : plan_(plan), o_(plan.options) {}

  void PerftestLatency() {
    for (size_t payload : o_.payloads) {
      LatencyRow row = NewLatencyRow("perftest", "ib_write_lat round trip (2 x reported)", payload);
      row.csv = "ib_write_lat-" + std::to_string(payload) + ".csv";
      Say("latency: ib_write_lat " + FormatBytes(payload) + " ...");
      // -n N prints N - 1 samples; the first `warmup` are dropped, as the
      // daemon's client drops its warm-up round trips.
      PerftestRun run{"ib_write_lat",
                      {"-s", std::to_string(payload), "-n",
                       std::to_string(o_.warmup + o_.iterations + 1), "-U"},
                      "ib_write_lat-" + std::to_string(payload)};
      if (payload == o_.payloads.front()) {
        notes.push_back("perftest ib_write_lat: " + Join(run.args) + " (server on " + o_.b.device +
                        ", client on " + o_.a.device + "; -s per payload)");
      }
      auto out = Perftest(run);
      auto nanos = out.ok() ? ParseUnsortedLatency(out->text, kWriteLatRttFactor)
                            : mcdma::Result<std::vector<uint64_t>>(out.status());
      const size_t expected = static_cast<size_t>(o_.warmup) + static_cast<size_t>(o_.iterations);
      if (nanos.ok() && nanos->size() != expected) {
        nanos = mcdma::Status(mcdma::Code::kInternal,
                              "ib_write_lat printed " + std::to_string(nanos->size()) +
                                  " samples, expected " + std::to_string(expected));
      }
      if (!nanos.ok()) {
        Fail(row, nanos.status().message());
        latency.push_back(std::move(row));
        continue;
      }
      // perftest converts cycles with the CPU MHz it reads; under TCG a
      // wrong rate would scale every sample, so the samples' sum is shown
      // next to the client's wall time (the sum must be the smaller).
      double sum_s = std::accumulate(nanos->begin(), nanos->end(), 0.0) / 1e9;
      char check[160];
      snprintf(check, sizeof(check), "clock check: %s samples sum to %.2f s of the client's %.2f s",
               run.name.c_str(), sum_s, out->wall_s);
      notes.emplace_back(check);
      if (sum_s > out->wall_s * 1.05) {
        Fail(row, std::string(check) + ": perftest's cycle clock runs fast; figures unusable");
        latency.push_back(std::move(row));
        continue;
      }
      row.nanos.assign(nanos->begin() + o_.warmup, nanos->end());
      Keep(std::move(row));
      const LatencyRow& kept = latency.back();
      if (kept.ok && kept.stats.p50_us >= kTickLockedUs) {
        char warning[200];
        snprintf(warning, sizeof(warning),
                 "warning: ib_write_lat %s p50 is %.1f ms: locked to the guest's scheduler tick "
                 "(VM CPUs starved?); ratios against it mean little",
                 FormatBytes(payload).c_str(), kept.stats.p50_us / 1000);
        notes.emplace_back(warning);
      }
    }
  }

  void PerftestBandwidth() {
    const uint64_t iters = std::max<uint64_t>(5, o_.bulk_bytes / o_.perftest_bw_bytes);
    for (const char* direction : {"WRITE", "READ"}) {
      bool read = std::string(direction) == "READ";
      BandwidthRow row = NewBandwidthRow("perftest", read ? "ib_read_bw" : "ib_write_bw", direction,
                                         iters * o_.perftest_bw_bytes, o_.perftest_bw_bytes);
      std::vector<std::string> args = {"-s", std::to_string(o_.perftest_bw_bytes), "-n",
                                       std::to_string(iters), "--report_gbits"};
      if (read) args.insert(args.end(), {"-o", std::to_string(o_.perftest_read_depth)});
      if (o_.perftest_tx_depth > 0)
        args.insert(args.end(), {"-t", std::to_string(o_.perftest_tx_depth)});
      notes.push_back("perftest " + row.label + ": " + Join(args) + " (server on " + o_.b.device +
                      ", client on " + o_.a.device + "), " + std::to_string(o_.repeats) +
                      " timed runs after 1 untimed");
      // One untimed run, then `repeats` timed ones: the daemon's rounds.
      for (int round = 0; round <= o_.repeats; ++round) {
        Say("bandwidth: " + row.label + " run " + std::to_string(round) + " ...");
        PerftestRun run{row.label, args, row.label + "-" + std::to_string(round)};
        auto out = Perftest(run);
        auto gbps = out.ok() ? ParseAverageBandwidth(out->text, o_.perftest_bw_bytes)
                             : mcdma::Result<double>(out.status());
        if (!gbps.ok()) {
          row.error = gbps.status().message();
          break;
        }
        if (round > 0) row.mbps.push_back(*gbps * 1000.0);
      }
      Finish(std::move(row));
    }
  }

  void DaemonRows(const TempDir& dir, const Hosts& hosts) {
    bool lat = Has(o_.parts, "latency");
    bool bw = Has(o_.parts, "bandwidth");
    Say("starting the daemons (profile " + o_.profile + ") ...");
    auto daemons = DaemonPair::Start(plan_.link, hosts, dir);
    if (!daemons.ok()) {
      std::string why = "daemons: " + daemons.status().message();
      link_note = why;
      Say(why);
      DaemonLogs();
      if (lat) {
        for (size_t payload : o_.payloads) {
          LatencyRow row = NewLatencyRow("daemon", kDaemonLatencyLabel, payload);
          Fail(row, why);
          latency.push_back(std::move(row));
        }
      }
      if (bw) {
        for (const char* direction : {"WRITE", "READ"}) {
          BandwidthRow row = NewBandwidthRow("daemon", DaemonBulkLabel(direction), direction, 0, 0);
          row.error = why;
          Finish(std::move(row));
        }
      }
      return;
    }
    DaemonPair& pair = **daemons;
    link_note = pair.note();
    Say(pair.note());
    if (lat) DaemonLatency(dir, hosts, pair);
    if (lat) LocalLatency(dir, hosts, pair);
    if (lat) LinkTest(pair);
    if (lat) Trace(dir, pair);
    if (bw) DaemonBandwidth(dir, hosts, pair);
    // A daemon that died mid-run explains the failures above it.
    if (std::string gone = pair.Exited(); !gone.empty()) {
      Say(gone);
      failed = true;
    }
    if (failed) fprintf(stderr, "daemon log tails:\n%s", pair.LogTails(kLogTailLines).c_str());
  }

  std::vector<LatencyRow> latency;
  std::vector<BandwidthRow> bandwidth;
  std::vector<std::string> notes;
  std::vector<std::string> traces;  // mcdmactl trace's tables, one per payload
  std::string link_note;
  bool failed = false;

 private:
  static constexpr char kDaemonLatencyLabel[] = "mcdma-rpcd call via 2 daemons (verbs)";
  static constexpr char kLocalLatencyLabel[] = "mcdma-rpcd call, one daemon (no link)";

  std::string DaemonBulkLabel(const std::string& direction) const {
    return std::string(direction == "WRITE" ? "mcdma-rpcd WriteBatch" : "mcdma-rpcd ReadBatch") +
           " (" + FormatBytes(o_.op_bytes) + " pieces)";
  }

  void DaemonLatency(const TempDir& dir, const Hosts& hosts, DaemonPair& pair) {
    Say("latency: daemon calls ...");
    CallRows(dir, hosts, "daemon", kDaemonLatencyLabel, "daemon-call-",
             {"--socket", pair.socket_b()}, {"--socket", pair.socket_a(), "--peer", o_.b.id});
  }

  // Diagnostic, in no ratio: the same calls between two apps of host B
  // through B's daemon alone, crossing no link: what the four hand-offs
  // between apps and daemons cost on this machine without any RDMA. The
  // client runs in host A's place but talks to B's daemon (its socket is
  // a file; the VM's hosts share one network namespace anyway).
  void LocalLatency(const TempDir& dir, const Hosts& hosts, DaemonPair& pair) {
    Say("latency: local calls through one daemon ...");
    CallRows(dir, hosts, "local", kLocalLatencyLabel, "daemon-local-",
             {"--socket", pair.socket_b()}, {"--socket", pair.socket_b()});
  }

  // One latency row per payload (key, label, samples in CSV_PREFIX<bytes>.csv)
  // from the echo server and call client roles run with these arguments.
  void CallRows(const TempDir& dir, const Hosts& hosts, const std::string& key,
                const std::string& label, const std::string& csv_prefix,
                std::vector<std::string> server_args, std::vector<std::string> client_args) {
    LinkPair run{"calls-" + key,         "daemon-server",
                 "daemon-call-client",   std::move(server_args),
                 std::move(client_args), std::chrono::seconds(60),
                 o_.payloads.size(),     static_cast<size_t>(o_.iterations)};
    auto sets = RunLinkPair(plan_.link, hosts, dir, std::move(run));
    for (size_t i = 0; i < o_.payloads.size(); ++i) {
      LatencyRow row = NewLatencyRow(key, label, o_.payloads[i]);
      row.csv = csv_prefix + std::to_string(o_.payloads[i]) + ".csv";
      if (!sets.ok()) {
        Fail(row, sets.status().message());
        latency.push_back(std::move(row));
        continue;
      }
      row.nanos = std::move((*sets)[i].nanos);
      Keep(std::move(row));
    }
  }

  // Diagnostic, in no ratio: the daemons' own echo over the verbs link,
  // no app involved (mcdmactl link test; no warm-up). The call row minus
  // this one is what the apps' hops to and from their daemons cost.
  void LinkTest(DaemonPair& pair) {
    for (size_t payload : o_.payloads) {
      Say("latency: daemon-daemon echo (mcdmactl link test) " + FormatBytes(payload) + " ...");
      LatencyRow row = NewLatencyRow("linktest", "daemon-daemon echo (link test)", payload);
      row.csv = "daemon-linktest-" + std::to_string(payload) + ".csv";
      auto nanos = pair.LinkTest(plan_.link, payload, o_.iterations);
      if (!nanos.ok()) {
        Fail(row, nanos.status().message());
        latency.push_back(std::move(row));
        continue;
      }
      row.nanos = std::move(*nanos);
      Keep(std::move(row));
    }
  }

  // Diagnostic, in no ratio: where a call's microseconds go, stage by stage
  // (mcdmactl trace against mcdmactl bench --serve), printed as is.
  void Trace(const TempDir& dir, DaemonPair& pair) {
    for (size_t payload : o_.payloads) {
      Say("latency: mcdmactl trace " + FormatBytes(payload) + " ...");
      auto text = pair.Trace(plan_.link, payload, std::min(o_.iterations, 4096), o_.warmup,
                             dir.path() + "/trace-responder-" + std::to_string(payload) + ".log");
      if (!text.ok()) {
        // The trace explains the call row; it decides nothing.
        notes.push_back("mcdmactl trace " + FormatBytes(payload) + ": " + text.status().message());
        continue;
      }
      traces.push_back(*text);
    }
  }

  void DaemonBandwidth(const TempDir& dir, const Hosts& hosts, DaemonPair& pair) {
    Say("bandwidth: daemon WriteBatch/ReadBatch of " + FormatBytes(o_.bulk_bytes) + " ...");
    LinkPair run;
    run.key = "bulk-daemon";
    run.server_role = "daemon-bulk-server";
    run.client_role = "daemon-bulk-client";
    run.server_args = {"--socket", pair.socket_b(), "--peer", o_.a.id};
    run.client_args = {"--socket", pair.socket_a(), "--peer", o_.b.id};
    run.ready_timeout = std::chrono::seconds(180);  // allocates and touches the buffer (TCG)
    run.expect_sets = 2;
    run.expect_samples = static_cast<size_t>(o_.repeats);
    auto sets = RunLinkPair(plan_.link, hosts, dir, std::move(run));
    for (int i = 0; i < 2; ++i) {
      const char* direction = i == 0 ? "WRITE" : "READ";
      BandwidthRow row = NewBandwidthRow("daemon", DaemonBulkLabel(direction), direction,
                                         o_.bulk_bytes, o_.op_bytes);
      if (!sets.ok()) {
        row.error = sets.status().message();
      } else {
        for (uint64_t ns : (*sets)[i].nanos)
          row.mbps.push_back(static_cast<double>(o_.bulk_bytes) * 1000.0 / static_cast<double>(ns));
      }
      Finish(std::move(row));
    }
  }

  void DaemonLogs() {
    for (const char* host : {"a", "b"}) {
      std::string tail = harness::LastLines(
          harness::ReadFile(o_.out + "/logs/rpcd-" + host + ".log"), kLogTailLines);
      if (!tail.empty()) fprintf(stderr, "rpcd-%s.log (last lines):\n%s", host, tail.c_str());
    }
  }

  void Fail(LatencyRow& row, const std::string& why) {
    row.ok = false;
    row.error = why;
    failed = true;
    Say(row.label + " " + FormatBytes(row.payload) + " failed: " + why);
  }

  void Keep(LatencyRow row) {
    row.ok = true;
    row.stats = harness::Summarize(row.nanos);
    mcdma::Status written = harness::WriteSampleCsv(o_.out + "/" + row.csv, row.nanos);
    if (!written.ok()) Fail(row, written.message());
    latency.push_back(std::move(row));
  }

  void Finish(BandwidthRow row) {
    row.ok = row.error.empty() && static_cast<int>(row.mbps.size()) == o_.repeats;
    if (!row.ok) {
      if (row.error.empty()) row.error = "no figures";
      failed = true;
      Say(row.label + " " + row.direction + " failed: " + row.error);
    }
    bandwidth.push_back(std::move(row));
  }

  // One perftest pair, run again (twice at most) when perftest could not
  // sample the CPU clock, a start-up glitch of the emulation, and once when
  // it did not finish within --perftest-limit (rxe under TCG can stall a
  // queue pair that lost packets for good). Every repeat is noted in the
  // report, as is a CPU rate conflict.
  mcdma::Result<PerftestOutput> Perftest(const PerftestRun& run) {
    bool timed_out = false;
    for (int attempt = 1;; ++attempt) {
      auto out = RunPerftest(plan_, run, next_port_++);
      if (!out.ok() && out.status().code() == mcdma::Code::kTimeout && !timed_out &&
          attempt < kPerftestAttempts) {
        timed_out = true;
        notes.push_back(run.name + " attempt " + std::to_string(attempt) +
                        ": did not finish within " + std::to_string(o_.perftest_limit_s) +
                        " s; run again");
        continue;
      }
      if (!out.ok()) return out;
      if (std::string failure = ClockSamplingFailure(*out); !failure.empty()) {
        notes.push_back(run.name + " attempt " + std::to_string(attempt) +
                        ": perftest could not sample the CPU clock (" + failure + ")" +
                        (attempt < kPerftestAttempts ? "; run again" : ""));
        if (attempt < kPerftestAttempts) continue;
        return mcdma::Status(mcdma::Code::kInternal, "perftest could not sample the CPU clock in " +
                                                         std::to_string(attempt) +
                                                         " attempts: " + failure);
      }
      if (std::string conflict = CpuRateConflict(*out); !conflict.empty())
        notes.push_back(run.name + ": " + conflict);
      return out;
    }
  }

  VerbsPlan& plan_;
  const VerbsOptions& o_;
  uint16_t next_port_ = kFirstPerftestPort;
};

// The GID indexes perftest needs (-x), unless given.
mcdma::Status ResolveGids(VerbsOptions& o) {
  for (VerbsHost* h : {&o.a, &o.b}) {
    if (h->gid_index >= 0) continue;
    MCDMA_ASSIGN_OR_RETURN(h->gid_index, RoceV2Ipv4GidIndex(h->device));
  }
  return mcdma::Status::Ok();
}

void PrintReport(const VerbsPlan& plan, const Runner& r) {
  const VerbsOptions& o = plan.options;
  printf("verbs benchmark: client side %s -> server side %s; %u CPUs, %s\n", HostText(o.a).c_str(),
         HostText(o.b).c_str(), std::thread::hardware_concurrency(), harness::KernelName().c_str());
  printf(
      "scheduling: %s\n",
      o.sched == "idle"
          ? "every process of the run is SCHED_IDLE (the guest kernel's rxe work preempts it)"
          : "every process of the run is SCHED_OTHER (rxe's softirq work competes with polling)");
  if (!r.link_note.empty()) printf("%s\n", r.link_note.c_str());
  for (const std::string& note : r.notes) printf("%s\n", note.c_str());
  if (!r.latency.empty()) {
    printf(
        "\nlatency, QD1 round trip (%d after %d warm-up; daemon: app on host-a calls "
        "host-b/bench.echo, served by an app on host-b; perftest: ib_write_lat ping-pong, its "
        "samples x2)\n",
        o.iterations, o.warmup);
    PrintLatencyTable(stdout, r.latency, o.payloads);
  }
  if (!r.bandwidth.empty()) {
    printf(
        "\nbandwidth, sustained one-sided (%s per transfer; median of %d timed transfers after 1 "
        "untimed; MB/s = 10^6 B/s; WRITE = host-a's bytes into host-b, READ = back)\n",
        FormatBytes(o.bulk_bytes).c_str(), o.repeats);
    PrintBandwidthTable(stdout, r.bandwidth);
  }
  for (const std::string& trace : r.traces) printf("\n%s", trace.c_str());
  printf("\n");
  PrintOverhead(stdout, r.latency, o.payloads, r.bandwidth);
  printf("figures: %s\n", kEmulatedLabel);
  printf("raw samples and summary.csv in %s\n", o.out.c_str());
}

}  // namespace

int RunVerbsBench(VerbsPlan plan) {
  VerbsOptions& o = plan.options;
  std::error_code ec;
  std::filesystem::create_directories(o.out + "/logs", ec);
  if (ec) {
    Say("cannot create " + o.out + "/logs: " + ec.message());
    return 1;
  }
  TempDir dir("mcdma-bench-verbs");
  if (!dir.ok()) {
    Say(dir.error());
    return 1;
  }
  // Both hosts live in this machine's one namespace, each on its own
  // device and address: the shared orchestrator runs their endpoints
  // without `ip netns exec`.
  auto as_host = [](const VerbsHost& h) {
    return harness::Host{h.id, "", h.address, h.device, h.interface};
  };
  std::unique_ptr<Hosts> hosts = Hosts::Shared({as_host(o.a), as_host(o.b)});
  plan.link.program = "mcdma_bench_verbs";
  plan.link.transport = "verbs";
  plan.link.verbs_profile = o.profile;
  plan.link.daemon_log_dir = o.out + "/logs";
  mcdma::Status sched = ApplySched(o.sched);
  if (!sched.ok()) {
    Say(sched.message());
    return 1;
  }
  Runner runner(plan);
  if (Has(o.mechanisms, "perftest")) {
    mcdma::Status gids = ResolveGids(o);
    if (!gids.ok()) {
      Say("perftest: " + gids.message());
      runner.failed = true;
    } else {
      if (Has(o.parts, "latency")) runner.PerftestLatency();
      if (Has(o.parts, "bandwidth")) runner.PerftestBandwidth();
    }
  }
  if (Has(o.mechanisms, "daemon")) runner.DaemonRows(dir, *hosts);
  PrintReport(plan, runner);
  mcdma::Status summary = WriteSummaryCsv(o.out + "/summary.csv", runner.latency, runner.bandwidth);
  if (!summary.ok()) {
    Say(summary.message());
    return 1;
  }
  if (runner.failed) Say("FAILED: at least one measurement did not run (see above)");
  return runner.failed ? 1 : 0;
}

}  // namespace mcdma::bench
