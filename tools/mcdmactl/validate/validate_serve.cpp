// `mcdmactl validate --serve`: the peer's half of a validation run
// (validate_wire.hpp).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "admin_client.hpp"
#include "app_session.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "mcdma/client.hpp"
#include "perftest_output.hpp"
#include "validate/process.hpp"
#include "validate/validate_flags.hpp"
#include "validate/validate_wire.hpp"

namespace mcdma::tools::validate {
namespace {

std::atomic<bool> g_serve_stop{false};
void OnServeSignal(int) { g_serve_stop.store(true); }

// How long a perftest server may live: its client's run plus slack.
constexpr auto kServerLife = std::chrono::minutes(5);
constexpr auto kListenWait = std::chrono::seconds(30);

bool DeviceName(const std::string& d) {
  if (d.empty() || d.size() > 64) return false;
  for (char c : d) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

// "TOOL DEVICE ARGS..." -> "ok PORT GID ADDRESS" or the error.
std::string StartPerftest(const std::string& request, const std::string& log_dir) {
  std::vector<std::string> w = Words(request);
  if (w.size() < 2) return "error: a request is TOOL DEVICE ARGS...";
  const std::string& tool = w[0];
  const std::string& device = w[1];
  if (!AllowedTool(tool)) return "error: '" + tool + "' is not a perftest tool this starts";
  if (!DeviceName(device)) return "error: '" + device + "' is not a device name";
  std::vector<std::string> args(w.begin() + 2, w.end());
  if (std::string why = CheckPerftestArgs(args); !why.empty()) return "error: " + why;
  auto gid = perftest::RoceV2Ipv4GidIndex(device);
  if (!gid.ok()) return "error: " + gid.status().message();
  auto address = perftest::RoceV2Ipv4Address(device, *gid);
  if (!address.ok()) return "error: " + address.status().message();
  auto port = FreeTcpPort();
  if (!port.ok()) return "error: " + port.status().message();
  std::vector<std::string> argv = {
      tool, "-d", device, "-x", std::to_string(*gid), "-p", std::to_string(*port)};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = log_dir + "/validate-" + tool + "-" + std::to_string(*port) + ".log";
  auto pid = Background(argv, log, kServerLife);
  if (!pid.ok()) return "error: " + pid.status().message();
  auto deadline = std::chrono::steady_clock::now() + kListenWait;
  while (!perftest::Listening(*port)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string why = "error: ";
      why.append(tool).append(" on ").append(device).append(" did not listen on port ");
      why.append(std::to_string(*port)).append(" within 30 s (see ").append(log);
      return why.append(" on the responder)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "ok " + std::to_string(*port) + " " + std::to_string(*gid) + " " + *address;
}

}  // namespace

int Serve(const Flags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
          std::ostream& err) {
  uint64_t bytes = 0;
  if (!ParseByteSize(flags.buffer, bytes)) {
    err << "mcdmactl validate: --buffer '" << flags.buffer << "' is not a size\n";
    return kExitUsage;
  }
  ClientOptions options;
  options.app_name = "mcdmactl-validate-serve";
  // The reverse check calls out from a handler: it must not run on the
  // progress thread.
  options.handler_threads = 2;
  std::unique_ptr<Client> client =
      ConnectApp(options, socket, timeout_ms, "mcdmactl validate --serve", err);
  if (!client) return kExitFailure;
  Client& c = *client;
  std::vector<std::string> allow = flags.allow;
  if (allow.empty()) {
    AdminClient admin(socket, std::chrono::milliseconds(timeout_ms));
    if (auto links = admin.ListLinks(); links.ok())
      for (const auto& l : links->links()) allow.push_back(l.peer());
  }
  auto buffer = c.Alloc(bytes);
  if (!buffer.ok()) {
    err << "mcdmactl validate --serve: " << buffer.status().ToString() << '\n';
    return kExitFailure;
  }
  auto* data = reinterpret_cast<uint8_t*>(buffer->data());
  for (uint64_t i = 0; i < bytes; ++i) data[i] = Pattern(i);
  ExportOptions ex;
  ex.allow_read = true;
  ex.allow_write = true;
  ex.allowed_peers = allow;
  if (Status st = c.Export(*buffer, kBufferExport, ex); !st.ok()) {
    err << "mcdmactl validate --serve: exporting " << kBufferExport << ": " << st.ToString()
        << '\n';
    return kExitFailure;
  }
  Client* self = &c;
  auto echo = c.Serve(kEchoService, [](ServerCall& call) { (void)call.Reply(call.payload()); });
  auto reverse = c.Serve(kReverseService, [self](ServerCall& call) {
    std::vector<std::string> w = Words(
        std::string(reinterpret_cast<const char*>(call.payload().data()), call.payload().size()));
    uint64_t calls = 0;
    uint64_t size = 0;
    if (w.size() != 3 || !ParseByteSize(w[0], calls) || !ParseByteSize(w[1], size) ||
        calls > 100000 || size > (16u << 20)) {
      (void)call.Reply(
          std::string_view("error: a request is CALLS BYTES HOST (at most 100000 "
                           "calls of 16 MiB)"));
      return;
    }
    std::mt19937_64 rng(calls * 7919 + size);
    std::string request(size, '\0');
    for (uint64_t i = 0; i < calls; ++i) {
      for (char& ch : request) ch = static_cast<char>(rng());
      auto reply = self->Call(w[2] + "/" + kEchoService, std::string_view(request));
      if (!reply.ok()) {
        (void)call.Reply("error: call " + std::to_string(i) + " to " + w[2] + ": " +
                         reply.status().ToString());
        return;
      }
      if (reply->view() != request) {
        (void)call.Reply("error: call " + std::to_string(i) + " to " + w[2] +
                         ": the reply is not the request");
        return;
      }
    }
    (void)call.Reply("ok " + std::to_string(calls));
  });
  const std::string log_dir = "/tmp";
  auto launcher = c.Serve(kPerftestService, [log_dir](ServerCall& call) {
    (void)call.Reply(StartPerftest(
        std::string(reinterpret_cast<const char*>(call.payload().data()), call.payload().size()),
        log_dir));
  });
  for (const auto* served : {&echo, &reverse, &launcher}) {
    if (!served->ok()) {
      err << "mcdmactl validate --serve: " << served->status().ToString() << '\n';
      return kExitFailure;
    }
  }
  std::string who;
  for (const auto& a : allow) who += (who.empty() ? "" : ", ") + a;
  // Flushed: the first line tells a script the responder is ready.
  out << "mcdma validate responder on " << c.info().host_id << ": serving " << kEchoService << ", "
      << kReverseService << ", " << kPerftestService << "; exporting " << kBufferExport << " ("
      << bytes << " bytes) to " << (who.empty() ? "no peer (none linked; use --allow)" : who)
      << "\n"
      << std::flush;
  std::signal(SIGINT, OnServeSignal);
  std::signal(SIGTERM, OnServeSignal);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(flags.serve_seconds);
  while (!g_serve_stop.load() &&
         (flags.serve_seconds == 0 || std::chrono::steady_clock::now() < until)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return kExitOk;
}

}  // namespace mcdma::tools::validate
