#include "link_daemons.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "harness/pair_runner.hpp"

namespace mcdma::bench {

namespace {

using harness::Millis;

constexpr Millis kSocketWait(20000);  // a daemon starts slowly under TCG
constexpr Millis kDaemonStopGrace(5000);
constexpr Millis kLinkPoll(200);

}  // namespace

Result<std::unique_ptr<DaemonPair>> DaemonPair::Start(const LinkPlan& plan,
                                                      const harness::Hosts& hosts,
                                                      const harness::TempDir& dir) {
  if (access(plan.daemon_path.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, "no executable mcdma-rpcd at " + plan.daemon_path +
                                       " (build it or pass --daemon)");
  }
  std::string key = dir.Join("fabric.key");
  MCDMA_RETURN_IF_ERROR(harness::WriteFabricKey(key));
  // Four distinct ports where both hosts share one namespace.
  std::vector<uint16_t> ports = {harness::kPeerPort, harness::kDataPort, harness::kPeerPort,
                                 harness::kDataPort};
  if (!hosts.netns()) {
    ports = harness::FreePorts(4);
    if (ports.size() != 4) return Status(Code::kInternal, "no free ports found");
  }
  std::unique_ptr<DaemonPair> pair(new DaemonPair());
  pair->program_ = plan.program;
  const std::string log_dir = plan.daemon_log_dir.empty() ? dir.path() : plan.daemon_log_dir;
  harness::DaemonHost* both[2] = {&pair->a_, &pair->b_};
  for (size_t i = 0; i < 2; ++i) {
    harness::DaemonHost& h = *both[i];
    static_cast<harness::Host&>(h) = hosts[i];
    const std::string name = std::string("rpcd-") + static_cast<char>('a' + i);
    h.socket = dir.Join(name + ".sock");
    h.log = log_dir;
    h.log.append("/").append(name).append(".log");
    h.truncate_log = true;
    h.key = key;
    h.log_level = plan.daemon_log_level;
    h.peer_port = ports[2 * i];
    h.data_port = ports[2 * i + 1];
    if (plan.transport == "verbs") {
      h.extra = {"--verbs-device",  h.verbs_device,    "--verbs-interface",
                 h.verbs_interface, "--verbs-profile", plan.verbs_profile};
    }
    if (i < plan.host_rails.size()) {
      for (const std::string& rail : plan.host_rails[i])
        h.extra.insert(h.extra.end(), {"--rail", rail});
    }
    h.extra.insert(h.extra.end(), plan.daemon_args.begin(), plan.daemon_args.end());
  }
  pair->a_.peers = {pair->b_.id + "=" + pair->b_.listen() + "," + plan.transport};
  MCDMA_RETURN_IF_ERROR(harness::StartDaemon(plan.daemon_path, pair->b_, kSocketWait));
  MCDMA_RETURN_IF_ERROR(harness::StartDaemon(plan.daemon_path, pair->a_, kSocketWait));
  MCDMA_RETURN_IF_ERROR(pair->WaitForLink(plan));
  return pair;
}

DaemonPair::~DaemonPair() {
  if (a_.daemon) harness::StopChild(program_, *a_.daemon, kDaemonStopGrace);
  if (b_.daemon) harness::StopChild(program_, *b_.daemon, kDaemonStopGrace);
}

std::string DaemonPair::Exited() {
  for (harness::DaemonHost* h : {&a_, &b_}) {
    std::string gone = harness::DaemonEnded(*h);
    if (!gone.empty()) return h->id + "'s " + gone;
  }
  return "";
}

Result<v1::LinksReply> DaemonPair::Links(const LinkPlan& plan, size_t host,
                                         std::string* raw) const {
  return harness::ReadLinks(plan.mcdmactl_path, host == 0 ? a_ : b_, raw);
}

pid_t DaemonPair::pid(size_t host) const {
  const harness::DaemonHost& h = host == 0 ? a_ : b_;
  return h.daemon ? h.daemon->pid() : -1;
}

std::string DaemonPair::LogTails(int lines) const {
  std::string out;
  for (const harness::DaemonHost* h : {&a_, &b_}) {
    std::string tail = harness::LastLines(harness::ReadFile(h->log), lines);
    for (size_t start = 0; start < tail.size();) {
      size_t nl = tail.find('\n', start);
      out += "  " + h->id + ": " + tail.substr(start, nl - start) + "\n";
      start = nl + 1;
    }
  }
  return out;
}

Result<std::vector<uint64_t>> DaemonPair::LinkTest(const LinkPlan& plan, size_t bytes, int count) {
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0)
    return Status(Code::kNotFound, "no mcdmactl at " + plan.mcdmactl_path);
  harness::CommandResult r =
      harness::RunCommand({plan.mcdmactl_path, "--socket", a_.socket, "--timeout",
                           std::to_string(plan.run_limit_ms), "link", "test", b_.id, "--bytes",
                           std::to_string(bytes), "--count", std::to_string(count), "--json"},
                          Millis(plan.run_limit_ms + 5000));
  if (r.exit_code() != 0) {
    std::string how = r.status ? harness::DescribeStatus(*r.status) : "did not finish in time";
    return Status(Code::kInternal, "mcdmactl link test: " + how + ": " + harness::LastLine(r.err));
  }
  // {"peer":...,"rtt_us":[464.019,56.285,...],...}
  const std::string& text = r.out;
  size_t at = text.find("\"rtt_us\"");
  at = at == std::string::npos ? at : text.find('[', at);
  std::vector<uint64_t> nanos;
  while (at != std::string::npos && at < text.size() && text[at] != ']') {
    char* end = nullptr;
    double us = strtod(text.c_str() + at + 1, &end);
    if (end == text.c_str() + at + 1) break;
    nanos.push_back(static_cast<uint64_t>(us * 1000));
    at = static_cast<size_t>(end - text.c_str());
  }
  if (nanos.size() != static_cast<size_t>(count)) {
    return Status(Code::kInternal, "mcdmactl link test printed " + std::to_string(nanos.size()) +
                                       " of " + std::to_string(count) + " round trips");
  }
  return nanos;
}

Result<std::string> DaemonPair::Trace(const LinkPlan& plan, size_t bytes, int count, int warmup,
                                      const std::string& log) {
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0)
    return Status(Code::kNotFound, "no mcdmactl at " + plan.mcdmactl_path);
  const int limit_s = plan.run_limit_ms / 1000 + 10;
  // Its stdout is a pipe: the ready line is read from it.
  harness::SpawnOptions spawn = harness::LoggedSpawn("trace-responder", log);
  spawn.pipe_stdout = true;
  MCDMA_ASSIGN_OR_RETURN(
      std::unique_ptr<harness::Child> responder,
      harness::Child::Spawn(
          {plan.mcdmactl_path, "--socket", b_.socket, "bench", "--serve", "--serve-seconds",
           std::to_string(limit_s), "--buffer", "4K", "--allow", a_.id},
          spawn));
  if (!responder->WaitForPrefix("mcdma bench responder", Millis(30000))) {
    return Status(Code::kInternal, "mcdmactl bench --serve on " + b_.id +
                                       " did not say it was ready: " + responder->Describe());
  }
  harness::CommandResult r = harness::RunCommand(
      {plan.mcdmactl_path, "--socket", a_.socket, "--timeout", std::to_string(plan.run_limit_ms),
       "trace", b_.id, "--bytes", std::to_string(bytes), "--count", std::to_string(count),
       "--warmup", std::to_string(warmup)},
      Millis(plan.run_limit_ms + 5000));
  responder->Stop(SIGTERM, Millis(5000));
  if (r.exit_code() != 0) {
    std::string how = r.status ? harness::DescribeStatus(*r.status) : "did not finish in time";
    return Status(Code::kInternal, "mcdmactl trace: " + how + ": " + harness::LastLine(r.err));
  }
  return r.out;
}

Status DaemonPair::WaitForLink(const LinkPlan& plan) {
  auto start = harness::Clock::now();
  auto deadline = start + Millis(plan.link_wait_ms);
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0) {
    note_ = "no mcdmactl at " + plan.mcdmactl_path +
            "; link state not checked, the clients retry their first use for 30 s";
    return Status::Ok();
  }
  std::string state = "(not read yet)";
  std::string last_error;
  while (harness::Clock::now() < deadline) {
    if (std::string gone = Exited(); !gone.empty()) return Status(Code::kUnavailable, gone);
    auto links = harness::ReadLinks(plan.mcdmactl_path, a_);
    if (!links.ok() && links.status().code() == Code::kInvalid) {
      note_ = "mcdmactl has no `links` (" + harness::LastLine(links.status().message()) +
              "); link state not checked, the clients retry their first use for 30 s";
      return Status::Ok();
    }
    const v1::LinkInfo* link = links.ok() ? harness::FindLink(*links, b_.id) : nullptr;
    if (link != nullptr) {
      state = link->state();
      last_error = link->last_error();
      if (state == "up" && link->transport() != plan.transport) {
        return Status(Code::kInternal, "link to " + b_.id + " came up over '" + link->transport() +
                                           "', not " + plan.transport +
                                           ": nothing here would measure " + plan.transport +
                                           (last_error.empty() ? "" : " (" + last_error + ")"));
      }
      if (state == "up") {
        char secs[32];
        snprintf(secs, sizeof(secs), "%.1f",
                 std::chrono::duration<double>(harness::Clock::now() - start).count());
        note_ = "link " + a_.id + " -> " + b_.id + " up after " + secs + " s (transport " +
                link->transport() +
                (plan.verbs_profile.empty() ? "" : ", profile " + plan.verbs_profile) + ")";
        return Status::Ok();
      }
    } else if (links.ok()) {
      state = "(no link to " + b_.id + " listed)";
    } else {
      state = "(mcdmactl links: " + harness::LastLine(links.status().message()) + ")";
    }
    std::this_thread::sleep_for(kLinkPoll);
  }
  return Status(Code::kTimeout,
                "link " + a_.id + " -> " + b_.id + " not up within " +
                    std::to_string(plan.link_wait_ms / 1000) + " s (state " + state +
                    (last_error.empty() ? "" : ", last error: " + last_error) + ")");
}

}  // namespace mcdma::bench
