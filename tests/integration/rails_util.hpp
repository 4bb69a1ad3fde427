// What the rails suites share (links_rails_test.cpp over tcp,
// links_verbs_rails_test.cpp over RDMA in the Soft-RoCE VM): finding a
// rail of a link, a one-line-per-rail summary for failure messages, and
// the testapp roles' replies to "count", "verify" and "status".
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "two_hosts.hpp"

namespace mcdma::itest {

inline const v1::RailInfo* RailAt(const v1::LinkInfo& l, uint32_t index) {
  for (const v1::RailInfo& r : l.rails())
    if (r.index() == index) return &r;
  return nullptr;
}

// One line per rail, for logs and failure messages.
inline std::string RailsSummary(const v1::LinkInfo& l) {
  std::ostringstream os;
  os << LinkSummary(l) << "\n";
  for (const v1::RailInfo& r : l.rails()) {
    os << "  rail " << r.index() << " " << r.name() << " " << r.transport() << " " << r.state()
       << (r.last_resort() ? " last_resort" : "") << (r.messages() ? " messages" : "") << " device "
       << r.device() << ":" << r.port() << " peer_device " << r.peer_device() << " profile "
       << r.profile() << " bytes_sent " << r.bytes_sent() << " slices " << r.slices()
       << " reissued " << r.slices_reissued() << " inflight " << r.inflight_bytes() << " share "
       << r.share() << " mbps " << r.throughput_mbps() << " downs " << r.downs() << " retry_in_ms "
       << r.retry_in_ms() << " last_error '" << r.last_error() << "'\n";
  }
  return os.str();
}

// A serve app's counts ("COUNT calls=.. notifies=.. bytes=..").
inline std::string ServerCount(Child* server) {
  if (!server->WriteStdin("count\n")) return "";
  return server->WaitForPrefix("COUNT", Millis(10000)).value_or("");
}

// Asks a fill app to check its own memory against `seed`; its VERIFY line.
inline std::string ExporterVerify(Child* exporter, uint64_t seed, Millis wait = Millis(60000)) {
  if (!exporter->WriteStdin("verify " + std::to_string(seed) + "\n")) return "";
  return exporter->WaitForPrefix("VERIFY", wait).value_or("");
}

// The app's STATUS line (calls_ok, ...).
inline std::string LoadStatus(Child* c) {
  if (!c->WriteStdin("status\n")) return "";
  return c->WaitForPrefix("STATUS", Millis(10000)).value_or("");
}

}  // namespace mcdma::itest
