#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "admin_client.hpp"
#include "bench_cmd.hpp"
#include "command.hpp"
#include "doctor/cmd.hpp"
#include "fabric_cmd.hpp"
#include "fabric_key_cmd.hpp"
#include "links_cmd.hpp"
#include "mcdma/client.hpp"
#include "render.hpp"
#include "trace_cmd.hpp"
#include "validate/validate_cmd.hpp"

#ifndef MCDMA_VERSION_TEXT
#define MCDMA_VERSION_TEXT "unknown"
#endif

namespace mcdma::tools {
namespace {

struct CtlOptions {
  // Daemon control socket; default DefaultClientSocketPath() ($MCDMA_SOCKET, then
  // $XDG_RUNTIME_DIR/mcdma/rpcd.sock when not root, then /run/mcdma/rpcd.sock).
  std::string socket;
  // Deadline per request, connecting included. Default 5000 ms.
  int timeout_ms = 5000;
  // Emit the reply as JSON (see render.hpp) instead of a text table.
  bool json = false;
};

// Adds a subcommand with its --json flag; `action` becomes `chosen` if the
// subcommand is on the command line.
void AddCommand(CLI::App& app, CtlOptions& options, Action& chosen, const char* name,
                const char* description, Action action) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->add_flag("--json", options.json,
                "Print the reply as one JSON object (snake_case keys, all fields present)");
  sub->callback([&chosen, action = std::move(action)] { chosen = action; });
}

void AddCommands(CLI::App& app, CtlOptions& options, Action& chosen) {
  AddCommand(app, options, chosen, "status", "Daemon health, counters and transports",
             [](AdminClient& c, OutputFormat f, Streams io) {
               return Report("status", c, c.GetStatus(), &RenderStatus, f, io);
             });
  AddCommand(app, options, chosen, "sessions", "Open app sessions and what each owns",
             [](AdminClient& c, OutputFormat f, Streams io) {
               return Report("sessions", c, c.ListSessions(), &RenderSessions, f, io);
             });
  AddCommand(app, options, chosen, "exports", "Live exports, their bounds and who may resolve them",
             [](AdminClient& c, OutputFormat f, Streams io) {
               return Report("exports", c, c.ListExports(), &RenderExports, f, io);
             });
  AddCommand(app, options, chosen, "buffers", "Live shared-memory buffers",
             [](AdminClient& c, OutputFormat f, Streams io) {
               return Report("buffers", c, c.ListBuffers(), &RenderBuffers, f, io);
             });
  AddLinkCommands(app, options.json, chosen);
  AddFabricCommands(app, options.json, chosen);
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CtlOptions options;
  options.socket = DefaultClientSocketPath();

  CLI::App app{
      "mcdmactl: inspect the host's mcdma-rpcd (status, sessions, exports, buffers), manage its "
      "links to peer hosts and its fabric key, check the host's setup (doctor), measure a link "
      "(bench) and where a call's microseconds go (trace)",
      "mcdmactl"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("mcdmactl ") + MCDMA_VERSION_TEXT);
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("mcdmactl: ") + e.what() + "\nRun 'mcdmactl --help' for usage.\n";
  });
  app.add_option("--socket", options.socket,
                 "Daemon control socket; the default comes from $MCDMA_SOCKET, else "
                 "$XDG_RUNTIME_DIR/mcdma/rpcd.sock (non-root), else /run/mcdma/rpcd.sock")
      ->type_name("PATH");
  app.add_option("--timeout", options.timeout_ms,
                 "Deadline per request in milliseconds, 1 to 3600000")
      ->type_name("MS")
      ->check(CLI::Range(1, 3'600'000).description(""));

  Action chosen;
  AddCommands(app, options, chosen);
  // Commands that make their own way to the daemon: `fabric-key` never
  // talks to it (--socket and --timeout are accepted but unused); `doctor`
  // may find its socket in the daemon's config and must run even without it;
  // `bench` and `trace` open an app session of their own.
  LocalCommand local;
  AddFabricKeyCommands(app, local);
  AddDoctorCommand(app, options.socket, options.timeout_ms, local);
  AddBenchCommand(app, options.socket, options.timeout_ms, local);
  AddTraceCommand(app, options.socket, options.timeout_ms, local);
  AddValidateCommand(app, options.socket, options.timeout_ms, local);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version are "errors" to CLI11 with exit code 0; every real
    // parse error (CLI11 has one code per kind) is our usage code 2.
    const int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (local) return local(out, err);
  if (!chosen) return kExitUsage;  // unreachable: require_subcommand(1)

  AdminClient client(options.socket, std::chrono::milliseconds(options.timeout_ms));
  return chosen(client, options.json ? OutputFormat::kJson : OutputFormat::kText,
                Streams{out, err});
}

}  // namespace mcdma::tools
