#include "harness/daemons.hpp"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "harness/files.hpp"
#include "platform/socket.hpp"

namespace mcdma::harness {
namespace {

constexpr Millis kListenPoll(20);
constexpr Millis kLinksTimeout(15000);
constexpr int kCtlUsage = 2;  // mcdmactl's exit code for a usage error

// How a daemon that ended says why: `when` it ended, its wait status and
// the last two lines of its log (a usage error's reason comes before
// CLI11's closing "Run with --help for more information.").
std::string EndedText(const Child& daemon, const std::string& log, const std::string& when) {
  std::string text = daemon.name() + " ended" + when + " (" +
                     DescribeStatus(daemon.exit_status().value_or(-1)) + ")";
  if (log.empty()) return text;
  std::string tail = LastLines(ReadFile(log), 2);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  if (size_t nl = tail.find('\n'); nl != std::string::npos) tail.replace(nl, 1, " / ");
  return tail.empty() ? text : text + ": " + tail;
}

}  // namespace

Status WriteFabricKey(const std::string& path) {
  unsigned char key[32];
  if (getrandom(key, sizeof(key), 0) != static_cast<ssize_t>(sizeof(key))) {
    return Status(Code::kSystem, std::string("getrandom: ") + strerror(errno));
  }
  std::string hex;
  for (unsigned char byte : key) {
    hex += "0123456789abcdef"[byte >> 4];
    hex += "0123456789abcdef"[byte & 15];
  }
  hex += '\n';
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid() || write(fd.get(), hex.data(), hex.size()) != static_cast<ssize_t>(hex.size())) {
    return FileError("write", path);
  }
  return Status::Ok();
}

bool SocketAccepts(const std::string& path) {
  auto opened = platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0, platform::Blocking::kBlocking);
  if (!opened.ok()) return false;
  Fd fd = std::move(opened).value();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

Result<std::unique_ptr<Child>> SpawnDaemon(const std::vector<std::string>& argv,
                                           const std::string& socket, const std::string& log,
                                           bool truncate_log, Millis wait) {
  SpawnOptions o;
  o.name = "mcdma-rpcd";
  o.pipe_stdin = false;
  o.pipe_stdout = false;
  o.stderr_path = log;
  o.truncate_stderr = truncate_log;
  o.inherit = log.empty();
  auto spawned = Child::Spawn(argv, o);
  if (!spawned.ok()) {
    return Status(Code::kSystem, "cannot start " + o.name + ": " + spawned.status().message());
  }
  std::unique_ptr<Child> daemon = std::move(spawned).value();
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (!SocketAccepts(socket)) {
    if (!daemon->Alive()) {
      return Status(Code::kUnavailable,
                    EndedText(*daemon, log, " before it listened on " + socket));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::kTimeout, daemon->name() + " did not start listening on " + socket +
                                        " within " + std::to_string(wait.count() / 1000) + " s");
    }
    std::this_thread::sleep_for(kListenPoll);
  }
  return daemon;
}

std::vector<std::string> DaemonArgv(const std::string& daemon_path, const DaemonHost& h) {
  std::vector<std::string> argv = {daemon_path, "--socket", h.socket};
  if (!h.id.empty()) argv.insert(argv.end(), {"--host-id", h.id});
  argv.insert(argv.end(), {"--log-level", h.log_level});
  if (!h.key.empty()) argv.insert(argv.end(), {"--fabric-key", h.key});
  if (h.peer_port > 0) argv.insert(argv.end(), {"--listen", h.listen()});
  if (h.data_port > 0) argv.insert(argv.end(), {"--data-listen", h.data_listen()});
  for (const auto& p : h.peers) argv.insert(argv.end(), {"--peer", p});
  argv.insert(argv.end(), h.extra.begin(), h.extra.end());
  return InNamespace(h.netns, argv);
}

Status StartDaemon(const std::string& daemon_path, DaemonHost& h, Millis wait) {
  if (h.daemon) h.daemon->Kill();
  h.daemon.reset();
  // `ip netns exec` execs the daemon in place: the child's pid is the
  // daemon's, so signals reach it directly.
  auto started = SpawnDaemon(DaemonArgv(daemon_path, h), h.socket, h.log, h.truncate_log, wait);
  if (!started.ok()) {
    return Status(started.status().code(), h.id + "'s " + started.status().message());
  }
  h.daemon = std::move(started).value();
  return Status::Ok();
}

std::string DaemonEnded(DaemonHost& h) {
  if (!h.daemon || h.daemon->Alive()) return "";
  return EndedText(*h.daemon, h.log, "");
}

Result<v1::LinksReply> ReadLinks(const std::string& mcdmactl, const DaemonHost& h,
                                 std::string* raw) {
  CommandResult r = RunCommand({mcdmactl, "--socket", h.socket, "links", "--json"}, kLinksTimeout);
  if (r.exit_code() != 0) {
    return Status(r.exit_code() == kCtlUsage ? Code::kInvalid : Code::kUnavailable,
                  "mcdmactl links --json: " + r.Describe());
  }
  if (raw != nullptr) *raw = r.out;
  google::protobuf::util::JsonParseOptions po;
  po.ignore_unknown_fields = true;  // a newer mcdmactl may print more
  v1::LinksReply reply;
  auto st = google::protobuf::util::JsonStringToMessage(r.out, &reply, po);
  if (!st.ok()) {
    return Status(Code::kInternal,
                  "mcdmactl links --json printed no LinksReply: " + st.ToString() + "\n" + r.out);
  }
  return reply;
}

Result<v1::FabricReply> ReadFabric(const std::string& mcdmactl, const DaemonHost& h,
                                   std::string* raw) {
  CommandResult r = RunCommand({mcdmactl, "--socket", h.socket, "fabric", "--json"}, kLinksTimeout);
  if (r.exit_code() != 0) {
    return Status(r.exit_code() == kCtlUsage ? Code::kInvalid : Code::kUnavailable,
                  "mcdmactl fabric --json: " + r.Describe());
  }
  if (raw != nullptr) *raw = r.out;
  google::protobuf::util::JsonParseOptions po;
  po.ignore_unknown_fields = true;
  v1::FabricReply reply;
  auto st = google::protobuf::util::JsonStringToMessage(r.out, &reply, po);
  if (!st.ok()) {
    return Status(Code::kInternal,
                  "mcdmactl fabric --json printed no FabricReply: " + st.ToString() + "\n" + r.out);
  }
  return reply;
}

const v1::LinkInfo* FindLink(const v1::LinksReply& links, const std::string& peer) {
  for (const auto& l : links.links()) {
    if (l.peer() == peer) return &l;
  }
  return nullptr;
}

}  // namespace mcdma::harness
