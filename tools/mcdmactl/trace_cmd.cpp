#include "trace_cmd.hpp"

#include <chrono>
#include <fstream>
#include <memory>

#include "admin_client.hpp"
#include "app_session.hpp"
#include "bench_cmd.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "mcdma/client.hpp"
#include "trace_report.hpp"

namespace mcdma::tools {
namespace {

struct TraceFlags {
  std::string peer;
  std::string service = kBenchService;
  std::string bytes = "64";
  uint32_t count = 1000;
  uint32_t warmup = 100;
  bool json = false;
  std::string raw;
};

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

int RunTrace(const TraceFlags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
             std::ostream& err) {
  uint64_t bytes = 0;
  if (flags.bytes == "0") {
    bytes = 0;
  } else if (!ParseByteSize(flags.bytes, bytes)) {
    err << "mcdmactl trace: --bytes '" << flags.bytes << "' is not a size (0, 64, 4K, 1M)\n";
    return kExitUsage;
  }
  std::ofstream raw;
  if (!flags.raw.empty()) {
    raw.open(flags.raw, std::ios::trunc);
    if (!raw) {
      err << "mcdmactl trace: cannot write --raw " << flags.raw << '\n';
      return kExitFailure;
    }
  }
  ClientOptions options;
  options.app_name = "mcdmactl-trace";
  options.trace_calls = true;
  std::unique_ptr<Client> client = ConnectApp(options, socket, timeout_ms, "mcdmactl trace", err);
  if (!client) return kExitFailure;
  const std::string service = flags.peer + "/" + flags.service;
  const std::string request(bytes, 't');
  AdminClient admin(socket, std::chrono::milliseconds(timeout_ms));
  auto call = [&](std::vector<uint64_t>* seen) -> Status {
    auto reply = client->Call(service, std::string_view(request));
    if (seen != nullptr) seen->push_back(NowNs());
    if (!reply.ok()) return reply.status();
    // The bench responder echoes; another service answers what it answers.
    if (flags.service == kBenchService && reply->view() != request)
      return Status(Code::kInternal, "the reply to a " + std::to_string(bytes) +
                                         "-byte call is not its request (" +
                                         std::to_string(reply->size()) + " bytes came back)");
    return Status::Ok();
  };
  for (uint32_t i = 0; i < flags.warmup; ++i) {
    if (Status st = call(nullptr); !st.ok()) {
      err << "mcdmactl trace: calling " << service << ": " << st.ToString()
          << (flags.service == kBenchService ? " (is `mcdmactl bench --serve` running there?)" : "")
          << '\n';
      return kExitFailure;
    }
  }
  const uint64_t session = client->info().session_id;
  v1::TraceRequest clear;
  clear.set_session(session);
  clear.set_max(1);
  clear.set_clear(true);
  if (auto r = admin.Trace(clear); !r.ok()) {
    err << "mcdmactl trace: " << r.status().ToString() << '\n';
    return kExitFailure;
  }
  std::vector<uint64_t> seen;
  seen.reserve(flags.count);
  for (uint32_t i = 0; i < flags.count; ++i) {
    if (Status st = call(&seen); !st.ok()) {
      err << "mcdmactl trace: calling " << service << ": " << st.ToString() << '\n';
      return kExitFailure;
    }
  }
  v1::TraceRequest get;
  get.set_session(session);
  get.set_max(flags.count);
  auto records = admin.Trace(get);
  if (!records.ok()) {
    err << "mcdmactl trace: " << records.status().ToString() << '\n';
    return kExitFailure;
  }
  std::vector<v1::TraceCall> calls(records->calls().begin(), records->calls().end());
  if (calls.size() != flags.count) {
    err << "mcdmactl trace: the daemon recorded " << calls.size() << " of the " << flags.count
        << " traced calls (it keeps " << records->capacity()
        << "; another app of this session's id, or a daemon without call tracing?)\n";
    return kExitFailure;
  }
  TraceBreakdown b = BreakDown(calls, seen);
  b.host = client->info().host_id;
  b.service = flags.service;
  if (flags.json)
    RenderTraceJson(b, out);
  else
    RenderTraceText(b, out);
  if (raw.is_open()) {
    WriteTraceRaw(b, raw);
    raw.close();
    if (!raw) {
      err << "mcdmactl trace: writing --raw " << flags.raw << " failed\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

}  // namespace

void AddTraceCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                     LocalCommand& chosen) {
  auto flags = std::make_shared<TraceFlags>();
  CLI::App* sub = app.add_subcommand(
      "trace",
      "Time each stage of calls to PEER through both daemons: where the microseconds go "
      "(calls mcdma.bench.echo by default: run `mcdmactl bench --serve` on PEER first)");
  sub->add_option("peer", flags->peer, "The peer host id (as `mcdmactl links` shows it)")
      ->required();
  sub->add_option("--service", flags->service, "The service to call on PEER");
  sub->add_option("--bytes", flags->bytes, "Request bytes per call (K, M suffixes)");
  sub->add_option("--count", flags->count, "Traced calls")->check(CLI::Range(1, 4096));
  sub->add_option("--warmup", flags->warmup, "Untraced calls first")
      ->check(CLI::Range(0, 1'000'000));
  sub->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  sub->add_option("--raw", flags->raw, "Write every stage's samples to FILE (CSV)")
      ->type_name("FILE");
  sub->callback([&chosen, &socket, &timeout_ms, flags] {
    chosen = [flags, &socket, &timeout_ms](std::ostream& out, std::ostream& err) {
      return RunTrace(*flags, socket, timeout_ms, out, err);
    };
  });
}

}  // namespace mcdma::tools
