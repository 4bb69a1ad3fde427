// mcdma-rpcd: parse the command line, start the Daemon, serve until SIGTERM
// or SIGINT, drain, stop. Exit codes: 0 ok, 1 failure, 2 usage or
// configuration (command_line.hpp prints those).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <variant>

#include "config/command_line.hpp"
#include "daemon.hpp"
#include "stop_signals.hpp"

namespace {
int Main(int argc, char** argv) {
  using namespace mcdma::daemon;
  std::variant<CommandLine, int> parsed = ParseCommandLine(argc, argv);
  if (const int* exit_code = std::get_if<int>(&parsed)) return *exit_code;
  const CommandLine& command = std::get<CommandLine>(parsed);
  if (command.check_only) return PrintCheck(command.options);

  BlockStopSignals();  // before any thread starts: every thread inherits the mask
  auto started = Daemon::Start(command.options);
  auto log = spdlog::get("daemon");
  if (!started.ok()) {
    log->critical("{}", started.status().ToString());
    return 1;
  }
  std::unique_ptr<Daemon> daemon = std::move(started).value();
  daemon->Drain("received " + WaitForStopSignal());
  daemon.reset();  // stops everything, in the reverse order of start
  log->info("stopped");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  // Nothing below is expected to throw; if a library does, say so and fail
  // instead of terminating without a word.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcdma-rpcd: fatal: %s\n", e.what());
    return 1;
  }
}
