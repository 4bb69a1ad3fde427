#include "harness/endpoint.hpp"

#include <poll.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>

namespace mcdma::harness {

std::vector<std::string> RoleArgs(const RoleOptions& options) {
  std::string payloads;
  for (size_t p : options.payloads) payloads += (payloads.empty() ? "" : ",") + std::to_string(p);
  return {"--role",         options.role,
          "--payloads",     payloads,
          "--iterations",   std::to_string(options.iterations),
          "--warmup",       std::to_string(options.warmup),
          "--timeout-ms",   std::to_string(options.timeout_ms),
          "--run-limit-ms", std::to_string(options.run_limit_ms)};
}

std::vector<std::string> EndpointArgv(std::vector<std::string> program,
                                      const RoleOptions& options) {
  std::vector<std::string> args = RoleArgs(options);
  program.insert(program.end(), args.begin(), args.end());
  return program;
}

void AddRoundTripOptions(CLI::App& app, int& iterations, int& warmup,
                         std::vector<size_t>& payloads) {
  constexpr size_t kMaxPayload = 16u << 20;
  app.add_option("--iterations", iterations, "Timed round trips per mechanism and payload")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--warmup", warmup, "Untimed round trips before them")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--payloads", payloads, "Payload sizes in bytes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, kMaxPayload));
}

CLI::App* AddChildCommand(CLI::App& app, RoleOptions& role) {
  CLI::App* child = app.add_subcommand("child", "")->group("");
  child->add_option("--role", role.role)->required();
  child->add_option("--fd", role.fd);
  child->add_option("--ready-fd", role.ready_fd);
  child->add_option("--lifeline-fd", role.lifeline_fd);
  child->add_option("--socket", role.socket);
  child->add_option("--out", role.out);
  child->add_option("--payloads", role.payloads)->delimiter(',');
  child->add_option("--iterations", role.iterations);
  child->add_option("--warmup", role.warmup);
  child->add_option("--timeout-ms", role.timeout_ms);
  child->add_option("--run-limit-ms", role.run_limit_ms);
  return child;
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return std::nullopt;
}

int Fail(const RoleOptions& options, const Status& status) {
  fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
          status.ToString().c_str());
  return 1;
}

namespace {

void WriteAndClose(int fd, const std::string& text) {
  ssize_t n;
  do {
    n = write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  close(fd);
}

}  // namespace

void SignalReady(int ready_fd) { WriteAndClose(ready_fd, "R"); }

void SignalReadyPort(int ready_fd, uint16_t port) {
  WriteAndClose(ready_fd, "P" + std::to_string(port));
}

void WaitForLifeline(int lifeline_fd, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{lifeline_fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc != 0) return;  // EOF / hang-up: the orchestrator says stop (or died)
  }
}

std::string KernelName() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release;
}

int GuardedMain(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
  } catch (...) {
    fprintf(stderr, "%s: unknown exception\n", program);
  }
  return 1;
}

}  // namespace mcdma::harness
