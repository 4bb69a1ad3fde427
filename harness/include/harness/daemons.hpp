// mcdma-rpcd daemons as the tests and the benchmarks run them: one per
// simulated host (hosts.hpp), each in its host's namespace, sharing a
// fabric key and linked by --peer; a single local daemon too. Their link
// state is read with `mcdmactl links --json`.
//
// Ownership: a DaemonHost owns its daemon process (killed and reaped when
// the DaemonHost goes); stopping it gracefully is the owner's call
// (Child::Stop), because tests judge how it ends.
//
// Threading: the owner's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/child.hpp"
#include "harness/hosts.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::harness {

// The ports a daemon listens on inside a namespace (nothing else does).
inline constexpr uint16_t kPeerPort = 7471;
inline constexpr uint16_t kDataPort = 7472;

// One host and its mcdma-rpcd: how it is started and, while it runs, its
// process. Empty fields add no flag.
struct DaemonHost : Host {
  int peer_port = 0;               // --listen ADDRESS:PORT (0: no peer service)
  int data_port = 0;               // --data-listen ADDRESS:PORT
  std::string socket;              // --socket, the control socket
  std::string key;                 // --fabric-key file
  std::string log_level = "info";  // --log-level
  std::vector<std::string> peers;  // --peer values
  std::vector<std::string> extra;  // more flags, last on the command line
  // The daemon's stderr: appended to across restarts (emptied at each
  // start with `truncate_log`); "" for this process's own stderr.
  std::string log;
  bool truncate_log = false;
  std::unique_ptr<Child> daemon;  // while started

  std::string listen() const { return address + ":" + std::to_string(peer_port); }
  std::string data_listen() const { return address + ":" + std::to_string(data_port); }
};

// 32 random bytes as 64 hex digits and a newline, mode 0600, a new file
// (what `mcdmactl fabric-key new` writes).
Status WriteFabricKey(const std::string& path);

// Starts `argv` (mcdma-rpcd, or a wrapper that execs it) with stdin from
// /dev/null and its output appended to `log` (emptied first with
// `truncate_log`; "": this process's own streams), and waits up to
// `wait` until `socket` accepts connections. On failure the process is
// killed and the Status says why: it could not start, ended (how, and its
// log's last lines) or did not listen in time.
Result<std::unique_ptr<Child>> SpawnDaemon(const std::vector<std::string>& argv,
                                           const std::string& socket, const std::string& log,
                                           bool truncate_log, Millis wait);
// The mcdma-rpcd command line for `h` (InNamespace of its netns).
std::vector<std::string> DaemonArgv(const std::string& daemon_path, const DaemonHost& h);
// SpawnDaemon of DaemonArgv(h) into h.daemon, killing one it still held
// (h.daemon is empty after a failure).
Status StartDaemon(const std::string& daemon_path, DaemonHost& h, Millis wait);
// "" while h's daemon runs (or was never started); once it has ended by
// itself: how, with the last two lines of its log. Reaps it.
std::string DaemonEnded(DaemonHost& h);
// True if something accepts connections on the Unix socket at `path`.
bool SocketAccepts(const std::string& path);

// `mcdmactl --socket h.socket links --json` (15 s at most), parsed; `raw`
// gets the text. kInvalid when mcdmactl exits 2 (a usage error: it has no
// `links`), kUnavailable when it fails otherwise, kInternal when it prints
// something else; the message quotes it.
Result<v1::LinksReply> ReadLinks(const std::string& mcdmactl, const DaemonHost& h,
                                 std::string* raw = nullptr);
// `mcdmactl --socket h.socket fabric --json`, parsed, as ReadLinks.
Result<v1::FabricReply> ReadFabric(const std::string& mcdmactl, const DaemonHost& h,
                                   std::string* raw = nullptr);
// The link to `peer` in `links`; nullptr when it lists none.
const v1::LinkInfo* FindLink(const v1::LinksReply& links, const std::string& peer);

}  // namespace mcdma::harness
