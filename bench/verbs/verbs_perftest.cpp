#include "verbs_perftest.hpp"

#include <dirent.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "harness/child.hpp"
#include "harness/files.hpp"

namespace mcdma::bench {

namespace {

using harness::Clock;
using harness::LastLines;
using harness::ReadFile;

// The numbers of one line of perftest's output, split on blanks and commas;
// nullopt when a field is not a number.
std::optional<std::vector<double>> Numbers(const std::string& line) {
  std::vector<double> out;
  const char* p = line.data();
  const char* end = p + line.size();
  while (p < end) {
    if (*p == ' ' || *p == '\t' || *p == ',') {
      ++p;
      continue;
    }
    double v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next < end && *next != ' ' && *next != '\t' && *next != ','))
      return std::nullopt;
    out.push_back(v);
    p = next;
  }
  return out;
}

constexpr auto kListenWait = std::chrono::seconds(30);
constexpr auto kServerFinish = std::chrono::seconds(10);
constexpr int kTailLines = 4;

std::string ReadTrimmed(const std::string& path) {
  std::string text = ReadFile(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// True once some socket listens on TCP `port` (/proc/net/tcp and tcp6:
// local address "HEX_IP:HEX_PORT", state 0A = LISTEN). perftest's server
// prints nothing reliable before it listens (its stdout is a file, so
// buffered), and its client gives up at once on a refused connection.
bool Listening(uint16_t port) {
  char want[8];
  snprintf(want, sizeof(want), ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(ReadFile(table));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot;
      std::string local;
      std::string remote;
      std::string state;
      if (!(fields >> slot >> local >> remote >> state)) continue;
      if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, want) == 0)
        return true;
    }
  }
  return false;
}

std::string Tail(const std::string& path) {
  std::string tail = LastLines(ReadFile(path), kTailLines);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  for (char& c : tail) c = c == '\n' ? '/' : c;
  return tail;
}

// The first line of `text` containing `what`, trimmed; "" when none.
std::string LineWith(const std::string& text, const std::string& what) {
  size_t at = text.find(what);
  if (at == std::string::npos) return "";
  size_t start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  size_t end = text.find('\n', at);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::vector<std::string> EndArgs(const std::string& tool, const VerbsHost& host,
                                 const std::vector<std::string>& args, uint16_t port) {
  std::vector<std::string> argv = {
      tool, "-d", host.device, "-x", std::to_string(host.gid_index), "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

mcdma::Result<int> RoceV2Ipv4GidIndex(const std::string& device) {
  const std::string port = "/sys/class/infiniband/" + device + "/ports/1";
  DIR* dir = opendir((port + "/gids").c_str());
  if (dir == nullptr) {
    return mcdma::Status(mcdma::Code::kNotFound,
                         "no RDMA device " + device + " (" + port + "/gids unreadable)");
  }
  int best = -1;
  std::string seen;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long index = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::string gid = ReadTrimmed(port + "/gids/" + entry->d_name);
    if (gid.empty() || gid == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    std::string type = ReadTrimmed(port + "/gid_attrs/types/" + entry->d_name);
    seen.append(" ").append(entry->d_name).append("=").append(gid);
    seen.append(" (").append(type).append(")");
    if (type == "RoCE v2" && gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0 &&
        (best < 0 || index < best)) {
      best = static_cast<int>(index);
    }
  }
  closedir(dir);
  if (best < 0) {
    return mcdma::Status(mcdma::Code::kNotFound,
                         device + " has no RoCE v2 IPv4-mapped GID; port 1 has:" +
                             (seen.empty() ? std::string(" none") : seen));
  }
  return best;
}

mcdma::Result<PerftestOutput> RunPerftest(const VerbsPlan& plan, const PerftestRun& run,
                                          uint16_t port) {
  const VerbsOptions& o = plan.options;
  const std::string tool = plan.perftest_dir + "/" + run.tool;
  const std::string log_base = o.out + "/logs/" + run.name;
  // Both ends' output stays in the logs; this process's stdin is theirs.
  auto end_spawn = [&](const std::string& name, const std::string& side) {
    harness::SpawnOptions spawn = harness::LoggedSpawn(name, log_base + "." + side + ".stderr");
    spawn.stdout_path = log_base + "." + side + ".log";
    return spawn;
  };
  const harness::SpawnOptions server_spawn =
      end_spawn(run.tool + " server (" + o.b.device + ")", "server");
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<harness::Child> server,
                         harness::Child::Spawn(EndArgs(tool, o.b, run.args, port), server_spawn));

  auto deadline = Clock::now() + kListenWait;
  while (!Listening(port)) {
    if (auto ended = server->WaitExit(harness::Millis(0))) {
      return mcdma::Status(
          mcdma::Code::kInternal,
          server_spawn.name + " ended before it listened (" + harness::DescribeStatus(*ended) +
              "): " + Tail(server_spawn.stdout_path) + " " + Tail(server_spawn.stderr_path));
    }
    if (Clock::now() >= deadline) {
      return mcdma::Status(mcdma::Code::kTimeout, server_spawn.name + " not listening on port " +
                                                      std::to_string(port) + " within " +
                                                      std::to_string(kListenWait.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::vector<std::string> client_argv = EndArgs(tool, o.a, run.args, port);
  client_argv.push_back(o.b.address);
  const harness::SpawnOptions client_spawn =
      end_spawn(run.tool + " client (" + o.a.device + ")", "client");
  auto t0 = Clock::now();
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<harness::Child> client,
                         harness::Child::Spawn(client_argv, client_spawn));
  auto client_status = client->WaitExit(std::chrono::seconds(plan.options.perftest_limit_s));
  if (!client_status) client->Kill();
  double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto server_status = server->WaitExit(kServerFinish);
  if (!server_status) server->Kill();
  const std::string what = run.tool + " " + run.name;
  if (!client_status) {
    return mcdma::Status(mcdma::Code::kTimeout,
                         what + ": client: did not finish within " +
                             std::to_string(plan.options.perftest_limit_s) +
                             " s; client said: " + Tail(client_spawn.stdout_path) +
                             "; server said: " + Tail(server_spawn.stdout_path));
  }
  if (harness::ExitCode(*client_status) != 0) {
    return mcdma::Status(mcdma::Code::kInternal,
                         what + ": client " + harness::DescribeStatus(*client_status) + ": " +
                             Tail(client_spawn.stdout_path) + " " + Tail(client_spawn.stderr_path) +
                             "; server said: " + Tail(server_spawn.stdout_path) + " " +
                             Tail(server_spawn.stderr_path));
  }
  if (!server_status || harness::ExitCode(*server_status) != 0) {
    return mcdma::Status(mcdma::Code::kInternal,
                         what + ": server " +
                             (server_status ? harness::DescribeStatus(*server_status)
                                            : std::string("did not finish; killed")) +
                             ": " + Tail(server_spawn.stdout_path) + " " +
                             Tail(server_spawn.stderr_path));
  }
  return PerftestOutput{ReadFile(client_spawn.stdout_path), ReadFile(client_spawn.stderr_path),
                        wall_s};
}

std::string ClockSamplingFailure(const PerftestOutput& out) {
  return LineWith(out.errors + "\n" + out.text, "Correlation coefficient");
}

std::string CpuRateConflict(const PerftestOutput& out) {
  return LineWith(out.errors + "\n" + out.text, "Conflicting CPU frequency");
}

mcdma::Result<std::vector<uint64_t>> ParseUnsortedLatency(const std::string& text, int rtt_factor) {
  size_t at = text.find("#, usec");
  if (at == std::string::npos) {
    return mcdma::Status(mcdma::Code::kInvalid,
                         "no \"#, usec\" sample list in the output (was -U given?)");
  }
  std::istringstream lines(text.substr(at));
  std::string line;
  std::getline(lines, line);  // the header
  std::vector<uint64_t> nanos;
  while (std::getline(lines, line)) {
    auto fields = Numbers(line);
    if (!fields || fields->size() != 2) break;
    double number = (*fields)[0];
    double usec = (*fields)[1];
    if (number != static_cast<double>(nanos.size() + 1) || !std::isfinite(usec) || usec < 0) {
      return mcdma::Status(mcdma::Code::kInvalid, "unexpected sample line '" + line + "'");
    }
    nanos.push_back(static_cast<uint64_t>(std::llround(usec * 1000.0 * rtt_factor)));
  }
  if (nanos.empty()) return mcdma::Status(mcdma::Code::kInvalid, "an empty sample list");
  return nanos;
}

mcdma::Result<double> ParseAverageBandwidth(const std::string& text, uint64_t msg_bytes) {
  // The table: " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
  // MsgRate[Mpps]", then one row per size.
  size_t header = text.find("BW average[Gb/sec]");
  if (header == std::string::npos) {
    return mcdma::Status(mcdma::Code::kInvalid,
                         "no \"BW average[Gb/sec]\" column in the output (was --report_gbits "
                         "given?)");
  }
  std::istringstream lines(text.substr(header));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    auto fields = Numbers(line);
    if (fields && fields->size() >= 4 && (*fields)[0] == static_cast<double>(msg_bytes)) {
      double average = (*fields)[3];
      if (!(average > 0)) {
        return mcdma::Status(mcdma::Code::kInvalid, "average bandwidth is not positive: " + line);
      }
      return average / 8.0;  // 10^9 bit/s -> 10^9 B/s
    }
  }
  return mcdma::Status(mcdma::Code::kInvalid,
                       "no result row for " + std::to_string(msg_bytes) + " B under the header");
}

}  // namespace mcdma::bench
