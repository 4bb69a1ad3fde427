// `mcdmactl doctor`'s budgets check: the daemon's limits against what is
// used of them (StatusReply.budgets), judged so that a user learns which
// limit is near or was hit before an app fails on it. docs/operations.md,
// "Limits and budgets", lists each limit.
#include <string>
#include <vector>

#include "doctor/checks.hpp"
#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

struct Finding {
  Verdict verdict;
  std::string what;
  std::string fix;
};

std::string Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? "?" : std::to_string(part * 100 / whole) + "%";
}

void JudgeListeners(const v1::Budgets& b, std::vector<Finding>& out) {
  for (const v1::ListenerInfo& l : b.listeners()) {
    const std::string key =
        l.name() == "control" ? "limits.max_connections" : "peer_limits.max_connections";
    const std::string per_key = l.name() == "control" ? "limits.max_connections_per_user"
                                                      : "peer_limits.max_connections_per_address";
    if (l.shed_out_of_files() > 0) {
      out.push_back({Verdict::kWarn,
                     std::to_string(l.shed_out_of_files()) + " " + l.name() +
                         " connection(s) shed because the daemon ran out of open files",
                     "raise its open-file limit (LimitNOFILE= in the unit, ulimit -n) or find "
                     "what else holds descriptors (ls /proc/$(pidof mcdma-rpcd)/fd | wc -l)"});
    }
    if (l.refused_limit() > 0) {
      out.push_back({Verdict::kWarn,
                     std::to_string(l.refused_limit()) + " " + l.name() +
                         " connection(s) refused at " + key + " (" +
                         std::to_string(l.max_connections()) + ")",
                     "raise " + key + " (and limits.max_open_files to fit it)"});
    }
    if (l.refused_per_source() > 0) {
      out.push_back(
          {Verdict::kWarn,
           std::to_string(l.refused_per_source()) + " " + l.name() + " connection(s) refused at " +
               per_key + " (" + std::to_string(l.max_per_source()) + ")" +
               (l.busiest_source().empty() ? ""
                                           : "; busiest now: " + l.busiest_source() + " with " +
                                                 std::to_string(l.busiest_source_open())),
           "find the app or host opening connections without closing them, or raise " + per_key});
    }
  }
}

}  // namespace

CheckResult CheckBudgets(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  if (!d.status.ok()) {
    return CheckResult{"budgets", Verdict::kSkip, "the daemon did not answer", "", ""};
  }
  if (!d.reply.has_budgets()) {
    return CheckResult{"budgets", Verdict::kSkip,
                       "the daemon reports no budgets (it is older than this mcdmactl)", "", ""};
  }
  const v1::Budgets& b = d.reply.budgets();
  std::vector<Finding> found;
  if (b.max_open_files() > 0 && b.open_files() >= 0) {
    auto open = static_cast<uint64_t>(b.open_files());
    if (open * 100 >= b.max_open_files() * 90) {
      found.push_back(
          {open * 100 >= b.max_open_files() * 98 ? Verdict::kFail : Verdict::kWarn,
           "open files " + std::to_string(open) + " of " + std::to_string(b.max_open_files()),
           "raise the daemon's open-file limit (LimitNOFILE=) and "
           "limits.max_open_files"});
    }
  }
  if (b.shm_capacity() > 0 && b.shm_free() * 10 < b.shm_capacity()) {
    found.push_back({b.shm_free() * 100 < b.shm_capacity() ? Verdict::kFail : Verdict::kWarn,
                     "/dev/shm has " + FormatBytes(b.shm_free()) + " free of " +
                         FormatBytes(b.shm_capacity()) +
                         ": new sessions and buffers fail NO_MEMORY (SHM_FULL)",
                     "free it (ls -la /dev/shm) or grow it: mount -o remount,size=<bytes> "
                     "/dev/shm"});
  }
  if (b.max_backlog_bytes_total() > 0 && b.backlog_bytes() * 2 >= b.max_backlog_bytes_total()) {
    found.push_back({Verdict::kWarn,
                     "undelivered events hold " + FormatBytes(b.backlog_bytes()) + " (" +
                         Percent(b.backlog_bytes(), b.max_backlog_bytes_total()) +
                         " of limits.max_backlog_bytes_total)",
                     "an app does not read its inbox: mcdmactl sessions shows its backlog"});
  }
  for (const v1::UserUsage& u : b.users()) {
    bool sessions = b.per_user_sessions() > 0 && u.sessions() * 10 >= b.per_user_sessions() * 9;
    bool bytes = b.per_user_bytes() > 0 && u.bytes() * 10 >= b.per_user_bytes() * 9;
    if (sessions || bytes) {
      found.push_back({Verdict::kWarn,
                       "uid " + std::to_string(u.uid()) + " holds " + std::to_string(u.sessions()) +
                           " session(s) and " + FormatBytes(u.bytes()) + ", near limits.per_user_" +
                           (sessions ? "sessions" : "bytes"),
                       "raise limits.per_user_" + std::string(sessions ? "sessions" : "bytes") +
                           " if that user's apps need it"});
    }
  }
  JudgeListeners(b, found);
  if (b.auth_refused() > 0 || b.auth_timed_out() > 0) {
    found.push_back(
        {Verdict::kWarn,
         std::to_string(b.auth_refused()) +
             " peer authentication(s) refused at the "
             "per-address limit and " +
             std::to_string(b.auth_timed_out()) + " ended by the stage deadline",
         "a client without the fabric key is probing the peer port, or a peer is very "
         "slow (peer_limits.auth_timeout_ms); mcdmactl links shows which peers are up"});
  }
  std::string summary = "open files " + std::to_string(b.open_files()) + "/" +
                        std::to_string(b.max_open_files()) + ", /dev/shm " +
                        FormatBytes(b.shm_free()) + " free, backlog " +
                        FormatBytes(b.backlog_bytes());
  if (found.empty())
    return CheckResult{"budgets", Verdict::kOk, summary, "no limit near or hit", ""};
  Verdict worst = Verdict::kWarn;
  std::string detail;
  std::string fix;
  for (const Finding& f : found) {
    if (f.verdict == Verdict::kFail) worst = Verdict::kFail;
    detail += (detail.empty() ? "" : "; ") + f.what;
    if (fix.empty()) fix = f.fix;
  }
  return CheckResult{"budgets", worst, summary, detail, fix};
}

}  // namespace mcdma::tools::doctor
