// What every daemon-facing mcdmactl subcommand shares: where it writes, the
// shape of its action, and how a failed request or a failed write becomes a
// message and an exit code (cli.hpp lists the codes).
//
// Threads: mcdmactl's main thread only, like AdminClient.
#pragma once

#include <functional>
#include <ostream>
#include <utility>

#include "admin_client.hpp"
#include "cli.hpp"
#include "mcdma/status.hpp"
#include "render.hpp"

namespace mcdma::tools {

// Where a command writes; shared by every subcommand's action.
struct Streams {
  std::ostream& out;
  std::ostream& err;
};

// One subcommand = one Admin request plus how to print its reply. The request
// runs only after parsing succeeded, so usage errors never touch the socket.
using Action = std::function<int(AdminClient&, OutputFormat, Streams)>;

// Writes why `command` failed to `err`. An error the daemon answered with is
// printed as its "CODE_NAME: message"; a request gRPC could not deliver gets
// the wording scripts grep for ("cannot reach mcdma-rpcd at SOCKET: ...").
void ReportFailure(const char* command, const AdminClient& client, const Status& status,
                   std::ostream& err);

// Flushes `io.out` and checks that what the command printed went somewhere
// (closed pipe, full disk): kExitOk, or kExitFailure with a message.
int FinishOutput(const char* command, Streams io);

// The common tail of a command: report a failed request, else print the reply
// with `render(reply, format, out)` (returning Status) and finish the output.
template <typename Reply, typename Render>
int Report(const char* command, const AdminClient& client, const Result<Reply>& result,
           Render&& render, OutputFormat format, Streams io) {
  if (!result.ok()) {
    ReportFailure(command, client, result.status(), io.err);
    return kExitFailure;
  }
  Status rendered = std::forward<Render>(render)(result.value(), format, io.out);
  if (!rendered.ok()) {
    io.out.flush();
    io.err << "mcdmactl: " << command << ": " << rendered.ToString() << '\n';
    return kExitFailure;
  }
  return FinishOutput(command, io);
}

}  // namespace mcdma::tools
