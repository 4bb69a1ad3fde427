#include "bench_cmd.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <memory>
#include <thread>

#include "admin_client.hpp"
#include "app_session.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "mcdma/client.hpp"

namespace mcdma::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchFlags {
  std::string peer;
  bool serve = false;
  int serve_seconds = 0;
  std::vector<std::string> allow;
  std::vector<std::string> tests{"call", "read", "write", "read_bw", "write_bw"};
  std::vector<std::string> sizes{"8", "4K", "64K", "1M"};
  std::vector<std::string> bw_sizes{"64K", "1M"};
  std::vector<uint32_t> depths{1, 8};
  uint32_t iterations = 1000;
  uint32_t bw_iterations = 500;
  uint32_t warmup = 20;
  std::string buffer = "64M";
  bool json = false;
  std::string raw;
};

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop.store(true); }

uint64_t Nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Draws "[#####.....] read 4096 B  512/1000" on stderr, a terminal only.
class Progress {
 public:
  Progress() : on_(isatty(STDERR_FILENO) == 1) {}
  void Show(const std::string& what, uint64_t done, uint64_t total) {
    if (!on_ || total == 0) return;
    auto now = Clock::now();
    if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(done * kWidth / total);
    fprintf(stderr, "\r[%s%s] %s  %llu/%llu   ", std::string(filled, '#').c_str(),
            std::string(kWidth - filled, '.').c_str(), what.c_str(),
            static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
  }
  void Clear() {
    if (on_) fprintf(stderr, "\r%*s\r", 80, "");
  }

 private:
  bool on_;
  Clock::time_point last_{};
};

struct LinkView {
  std::string transport;
  uint64_t generation = 0;
};

LinkView ViewLink(AdminClient& admin, const std::string& peer) {
  auto links = admin.ListLinks();
  if (!links.ok()) return {"?", 0};
  for (const auto& l : links->links()) {
    if (l.peer() == peer)
      return {l.transport().empty() ? l.state() : l.transport(), l.generation()};
  }
  return {"no link", 0};
}

// The bench's own app session; null (the error printed after `who`) when
// the daemon does not take it.
std::unique_ptr<Client> ConnectBenchApp(const std::string& socket, int timeout_ms, const char* who,
                                        std::ostream& err) {
  ClientOptions options;
  options.app_name = "mcdmactl-bench";
  return ConnectApp(options, socket, timeout_ms, who, err);
}

int Serve(const BenchFlags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
          std::ostream& err) {
  uint64_t bytes = 0;
  if (!ParseByteSize(flags.buffer, bytes)) {
    err << "mcdmactl bench: --buffer '" << flags.buffer << "' is not a size (4096, 64K, 1M)\n";
    return kExitUsage;
  }
  std::unique_ptr<Client> client =
      ConnectBenchApp(socket, timeout_ms, "mcdmactl bench --serve", err);
  if (!client) return kExitFailure;
  std::vector<std::string> allow = flags.allow;
  if (allow.empty()) {
    AdminClient admin(socket, std::chrono::milliseconds(timeout_ms));
    auto links = admin.ListLinks();
    if (links.ok())
      for (const auto& l : links->links()) allow.push_back(l.peer());
  }
  auto served =
      client->Serve(kBenchService, [](ServerCall& call) { (void)call.Reply(call.payload()); });
  if (!served.ok()) {
    err << "mcdmactl bench --serve: serving " << kBenchService << ": " << served.status().ToString()
        << '\n';
    return kExitFailure;
  }
  auto buffer = client->Alloc(bytes);
  if (!buffer.ok()) {
    err << "mcdmactl bench --serve: " << buffer.status().ToString() << '\n';
    return kExitFailure;
  }
  ExportOptions ex;
  ex.allow_read = true;
  ex.allow_write = true;
  ex.allowed_peers = allow;
  if (Status st = client->Export(*buffer, kBenchExport, ex); !st.ok()) {
    err << "mcdmactl bench --serve: exporting " << kBenchExport << ": " << st.ToString() << '\n';
    return kExitFailure;
  }
  std::string who;
  for (const auto& a : allow) who += (who.empty() ? "" : ", ") + a;
  // Flushed: the first line tells a script the responder is ready.
  out << "mcdma bench responder on " << client->info().host_id << ": serving " << kBenchService
      << ", exporting " << kBenchExport << " (" << bytes << " bytes) to "
      << (who.empty() ? "no peer (none linked; use --allow)" : who) << "\n"
      << std::flush;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  auto until = Clock::now() + std::chrono::seconds(flags.serve_seconds);
  while (!g_stop.load() && (flags.serve_seconds == 0 || Clock::now() < until)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return kExitOk;
}

struct Target {
  Client* client;
  RemoteBuffer remote;
  Buffer local;
  std::string service;
};

// One latency row: `count` operations one after another.
Status LatencyRow(Target& t, const std::string& test, uint64_t bytes, uint32_t count,
                  uint32_t warmup, BenchRow& row, Progress& progress) {
  std::string request(test == "call" ? bytes : 0, 'b');
  for (uint32_t i = 0; i < warmup + count; ++i) {
    auto start = Clock::now();
    if (test == "call") {
      auto reply = t.client->Call(t.service, std::string_view(request));
      if (!reply.ok()) return reply.status();
      if (reply->size() != bytes)
        return Status(Code::kInternal, "the responder's reply has " +
                                           std::to_string(reply->size()) + " bytes, not " +
                                           std::to_string(bytes));
    } else {
      auto moved = test == "read" ? t.client->Read(t.remote, 0, t.local, 0, bytes)
                                  : t.client->Write(t.remote, 0, t.local, 0, bytes);
      if (!moved.ok()) return moved.status();
    }
    if (i >= warmup) row.samples_ns.push_back(Nanos(Clock::now() - start));
    progress.Show(test + " " + std::to_string(bytes) + " B", i + 1, warmup + count);
  }
  return Status::Ok();
}

// One bandwidth row: `count` transfers with `depth` in flight, each from
// its own slot of the local and remote buffers.
Status BandwidthRow(Target& t, bool read, uint64_t bytes, uint32_t depth, uint32_t count,
                    BenchRow& row, Progress& progress) {
  struct InFlight {
    Future<uint64_t> f;
    Clock::time_point start;
  };
  std::deque<InFlight> inflight;
  uint32_t issued = 0;
  auto begin = Clock::now();
  while (row.samples_ns.size() < count) {
    while (issued < count && inflight.size() < depth) {
      uint64_t off = (issued % depth) * bytes;
      auto start = Clock::now();
      inflight.push_back({read ? t.client->ReadAsync(t.remote, off, t.local, off, bytes)
                               : t.client->WriteAsync(t.remote, off, t.local, off, bytes),
                          start});
      ++issued;
    }
    InFlight head = std::move(inflight.front());
    inflight.pop_front();
    auto moved = head.f.Wait();
    if (!moved.ok()) {
      for (auto& rest : inflight) (void)rest.f.Wait();
      return moved.status();
    }
    row.samples_ns.push_back(Nanos(Clock::now() - head.start));
    progress.Show(row.test + " " + std::to_string(bytes) + " B x" + std::to_string(depth),
                  row.samples_ns.size(), count);
  }
  row.elapsed_s = std::chrono::duration<double>(Clock::now() - begin).count();
  return Status::Ok();
}

int Run(const BenchFlags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
        std::ostream& err) {
  auto sizes_of = [&](const std::vector<std::string>& texts, const char* flag,
                      std::vector<uint64_t>& into) {
    for (const auto& s : texts) {
      uint64_t b = 0;
      if (!ParseByteSize(s, b)) {
        err << "mcdmactl bench: " << flag << " '" << s << "' is not a size (4096, 64K, 1M)\n";
        return false;
      }
      into.push_back(b);
    }
    return true;
  };
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> bw_sizes;
  if (!sizes_of(flags.sizes, "--sizes", sizes) || !sizes_of(flags.bw_sizes, "--bw-sizes", bw_sizes))
    return kExitUsage;
  std::ofstream raw;
  if (!flags.raw.empty()) {
    raw.open(flags.raw, std::ios::trunc);
    if (!raw) {
      err << "mcdmactl bench: cannot write --raw " << flags.raw << '\n';
      return kExitFailure;
    }
  }
  std::unique_ptr<Client> client = ConnectBenchApp(socket, timeout_ms, "mcdmactl bench", err);
  if (!client) return kExitFailure;
  AdminClient admin(socket, std::chrono::milliseconds(timeout_ms));
  Target t{client.get(), {}, {}, flags.peer + "/" + kBenchService};
  auto remote = client->Resolve(kBenchExport, flags.peer);
  if (!remote.ok()) {
    err << "mcdmactl bench: no responder on '" << flags.peer << "' (resolving " << kBenchExport
        << ": " << remote.status().ToString() << "); run `mcdmactl bench --serve` there first\n";
    return kExitFailure;
  }
  t.remote = *remote;
  uint64_t need = 0;
  for (uint64_t s : sizes) need = std::max(need, s);
  for (uint64_t s : bw_sizes)
    for (uint32_t d : flags.depths) need = std::max(need, s * d);
  if (need > t.remote.length) {
    err << "mcdmactl bench: the sizes need " << need
        << " bytes of the responder's buffer, which has " << t.remote.length
        << " (start it with a larger --buffer)\n";
    return kExitUsage;
  }
  auto local = client->Alloc(need);
  if (!local.ok()) {
    err << "mcdmactl bench: " << local.status().ToString() << '\n';
    return kExitFailure;
  }
  t.local = *local;

  BenchReport report{client->info().host_id, flags.peer, {}};
  Progress progress;
  bool failed = false;
  std::signal(SIGINT, OnStopSignal);
  auto finish_row = [&](BenchRow& row, const LinkView& before, const Status& st) {
    progress.Clear();
    LinkView after = ViewLink(admin, flags.peer);
    row.transport = after.transport;
    row.link_restarted = before.generation != after.generation;
    if (!st.ok()) {
      row.error = st.ToString();
      failed = true;
    }
    report.rows.push_back(std::move(row));
  };
  for (const std::string& test : flags.tests) {
    bool bandwidth = test == "read_bw" || test == "write_bw";
    for (uint64_t bytes : bandwidth ? bw_sizes : sizes) {
      for (uint32_t depth : bandwidth ? flags.depths : std::vector<uint32_t>{1}) {
        if (g_stop.load()) break;
        BenchRow row;
        row.test = test;
        row.bytes = bytes;
        row.depth = depth;
        LinkView before = ViewLink(admin, flags.peer);
        Status st = bandwidth
                        ? BandwidthRow(t, test == "read_bw", bytes, depth, flags.bw_iterations, row,
                                       progress)
                        : LatencyRow(t, test, bytes, flags.iterations, flags.warmup, row, progress);
        finish_row(row, before, st);
      }
    }
  }
  if (flags.json)
    RenderBenchJson(report, out);
  else
    RenderBenchText(report, out);
  if (raw.is_open()) {
    WriteBenchRaw(report, raw);
    raw.close();
    if (!raw) {
      err << "mcdmactl bench: writing --raw " << flags.raw << " failed\n";
      return kExitFailure;
    }
  }
  if (g_stop.load()) {
    err << "mcdmactl bench: interrupted\n";
    return kExitFailure;
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                     LocalCommand& chosen) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Latency and bandwidth of calls and one-sided reads/writes to PEER through both daemons "
      "(run `mcdmactl bench --serve` on PEER first)");
  sub->add_option("peer", flags->peer, "The peer host id (as `mcdmactl links` shows it)");
  sub->add_flag("--serve", flags->serve,
                "Be the responder: serve mcdma.bench.echo and export mcdma.bench.buffer");
  sub->add_option("--serve-seconds", flags->serve_seconds,
                  "With --serve: stop after this many seconds (0: at SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--allow", flags->allow,
                  "With --serve: the hosts that may use the buffer (default: the peers linked now)")
      ->delimiter(',');
  sub->add_option("--buffer", flags->buffer, "With --serve: the exported buffer's size");
  sub->add_option("--tests", flags->tests, "Which rows: call, read, write, read_bw, write_bw")
      ->delimiter(',')
      ->check(CLI::IsMember({"call", "read", "write", "read_bw", "write_bw"}));
  sub->add_option("--sizes", flags->sizes, "Latency rows' sizes (bytes; K, M, G suffixes)")
      ->delimiter(',');
  sub->add_option("--bw-sizes", flags->bw_sizes, "Bandwidth rows' sizes")->delimiter(',');
  sub->add_option("--depths", flags->depths, "Bandwidth rows' queue depths")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  sub->add_option("--iterations", flags->iterations, "Samples per latency row")
      ->check(CLI::Range(1, 10'000'000));
  sub->add_option("--bw-iterations", flags->bw_iterations, "Transfers per bandwidth row")
      ->check(CLI::Range(1, 10'000'000));
  sub->add_option("--warmup", flags->warmup, "Unrecorded operations before each latency row")
      ->check(CLI::Range(0, 1'000'000));
  sub->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  sub->add_option("--raw", flags->raw, "Write every sample to FILE (CSV)")->type_name("FILE");
  sub->callback([&chosen, &socket, &timeout_ms, flags] {
    if (flags->serve == !flags->peer.empty()) {
      throw CLI::ValidationError("bench",
                                 flags->serve ? "--serve takes no PEER" : "give PEER, or --serve");
    }
    chosen = [flags, &socket, &timeout_ms](std::ostream& out, std::ostream& err) {
      return flags->serve ? Serve(*flags, socket, timeout_ms, out, err)
                          : Run(*flags, socket, timeout_ms, out, err);
    };
  });
}

}  // namespace mcdma::tools
