// The endpoint processes of a benchmark, and their side of the start-up
// handshake. Every endpoint is the benchmark's own binary re-executed with
// a hidden `child` subcommand (never run by people, so left out of
// --help), or a script taking the same options (RoleArgs): a server that
// says it is ready on an inherited pipe and serves until its lifeline
// closes, or a client that measures and writes a sample file.
//
// Threading: called from main and the role functions, one thread.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::harness {

// What a `child` process is told on its command line. Descriptor numbers
// are those it inherited.
struct RoleOptions {
  std::string program = "mcdma_bench_local";  // prefixes the role's error messages
  std::string role;
  int fd = -1;           // the inherited socket or shared-memory fd
  int ready_fd = -1;     // servers: say ready here (SignalReady)
  int lifeline_fd = -1;  // servers: EOF here means "stop"
  std::string socket;    // Unix socket path (gRPC, daemon)
  std::string out;       // clients: where the samples go
  std::vector<size_t> payloads;
  int iterations = 0;
  int warmup = 0;
  int timeout_ms = 5000;      // deadline of one round trip (clients)
  int run_limit_ms = 120000;  // the longest a child lives; servers idle this long at most
};

// The options of `role` in a run of `plan` (any struct with payloads,
// iterations, warmup and timeout_ms), living at most `run_limit_ms`.
template <typename Plan>
RoleOptions RoleFor(const Plan& plan, const std::string& role, int run_limit_ms) {
  RoleOptions o;
  o.role = role;
  o.payloads = plan.payloads;
  o.iterations = plan.iterations;
  o.warmup = plan.warmup;
  o.timeout_ms = plan.timeout_ms;
  o.run_limit_ms = run_limit_ms;
  return o;
}
// `--role R --payloads P,... --iterations N --warmup N --timeout-ms N
// --run-limit-ms N`: what AddChildCommand parses back (the descriptors,
// socket and output file are the orchestrator's to add).
std::vector<std::string> RoleArgs(const RoleOptions& options);
// `program` (this binary's `child` command, or a script) with RoleArgs.
std::vector<std::string> EndpointArgv(std::vector<std::string> program, const RoleOptions& options);

// --iterations, --warmup and --payloads (1 B to 16 MiB each), as every
// round-trip benchmark takes them; the defaults are the variables' values.
void AddRoundTripOptions(CLI::App& app, int& iterations, int& warmup,
                         std::vector<size_t>& payloads);
// Adds `child` to `app` with every RoleOptions field as an option; the
// caller adds its own role-specific ones to the returned subcommand.
CLI::App* AddChildCommand(CLI::App& app, RoleOptions& role);
// Parses the command line: nullopt to go on, or the exit code when parsing
// ended the run (0 after --help, 2 for a usage error, said on stderr).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// A role's failure: "PROGRAM ROLE: CODE: message" on stderr; returns its
// exit code, 1.
int Fail(const RoleOptions& options, const Status& status);

// Server side of the start-up handshake: one byte on the ready pipe, which
// is then closed.
void SignalReady(int ready_fd);
// The same for a server listening on a kernel-chosen port: "P<port>".
void SignalReadyPort(int ready_fd, uint16_t port);
// Blocks until the orchestrator closes the lifeline (EOF) or `limit` passes.
void WaitForLifeline(int lifeline_fd, std::chrono::milliseconds limit);

// "Linux 6.1.0-..." from uname(2).
std::string KernelName();
// A benchmark's main(): `body`'s exit code, or 1 with a message on an
// exception (std::bad_alloc, a filesystem error), never std::terminate, so
// destructors run (Hosts removes its namespaces).
int GuardedMain(const char* program, int (*body)(int, char**), int argc, char** argv);

}  // namespace mcdma::harness
