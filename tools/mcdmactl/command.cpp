#include "command.hpp"

namespace mcdma::tools {

void ReportFailure(const char* command, const AdminClient& client, const Status& status,
                   std::ostream& err) {
  if (client.last_error_from_daemon()) {
    // The daemon understood the request and refused it: its own code and
    // words ("NOT_FOUND: ...", "LINK_DOWN: ..."), never "cannot reach".
    err << "mcdmactl: " << command << " failed: " << status.ToString() << '\n';
    return;
  }
  switch (status.code()) {
    case Code::kUnavailable:
      // The one message scripts and people grep for: keep its wording.
      err << "mcdmactl: cannot reach mcdma-rpcd at " << client.socket_path() << ": "
          << status.message() << '\n';
      break;
    case Code::kTimeout:
      err << "mcdmactl: " << command << ": mcdma-rpcd at " << client.socket_path()
          << " did not answer in time: " << status.message() << '\n';
      break;
    case Code::kInvalid:
      // gRPC's "unimplemented" usually has no text: say what it means.
      err << "mcdmactl: " << command << ": not supported by this mcdma-rpcd"
          << (status.message().empty() ? " (older than this mcdmactl)" : ": " + status.message())
          << '\n';
      break;
    default:
      err << "mcdmactl: " << command << " failed: " << status.ToString() << '\n';
      break;
  }
}

int FinishOutput(const char* command, Streams io) {
  io.out.flush();
  if (!io.out) {
    // A script must not take the command for a success.
    io.err << "mcdmactl: " << command << ": cannot write output\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace mcdma::tools
