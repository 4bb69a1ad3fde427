// `mcdmactl validate PEER`: this host's half of a validation run
// (validate_cmd.hpp says what it does, validate_wire.hpp what it asks the
// peer).
#include <sys/utsname.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "admin_client.hpp"
#include "app_session.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "doctor/cmd.hpp"
#include "doctor/report.hpp"
#include "mcdma/client.hpp"
#include "perftest_output.hpp"
#include "validate/process.hpp"
#include "validate/validate_flags.hpp"
#include "validate/validate_report.hpp"
#include "validate/validate_wire.hpp"

namespace mcdma::tools::validate {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// One RDMA device pair of the link: where perftest runs side by side.
struct Rail {
  std::string name;  // "rxe1>rxe2"
  std::string local;
  std::string peer;
};

class Runner {
 public:
  Runner(const Flags& flags, Client& client, AdminClient& admin, Report& report)
      : f_(flags), c_(client), admin_(admin), r_(report) {}

  void Conditions() {
    utsname u{};
    if (uname(&u) == 0)
      r_.conditions.push_back(std::string("kernel: ") + u.sysname + " " + u.release + " " +
                              u.machine);
    r_.conditions.push_back("CPUs: " + std::to_string(std::thread::hardware_concurrency()));
    auto version = RunCaptured({"ib_write_lat", "--version"}, std::chrono::seconds(10));
    r_.conditions.push_back("perftest: " + (version.ok() ? Trim(version->out + version->err)
                                                         : std::string("not found (") +
                                                               version.status().message() + ")"));
  }

  void Doctor(const std::string& socket, int timeout_ms) {
    if (f_.skip_doctor) {
      r_.notes.push_back("doctor: skipped (--skip-doctor)");
      return;
    }
    DoctorFlags df;
    df.socket = socket;
    df.config = f_.config;
    df.timeout = std::chrono::milliseconds(timeout_ms);
    auto results = doctor::RunChecks(GatherDoctorInputs(df));
    int ok = 0;
    int warn = 0;
    std::string failed;
    for (const auto& res : results) {
      if (res.verdict == doctor::Verdict::kFail) {
        failed += (failed.empty() ? "" : "; ") + res.id + ": " + res.summary;
      } else if (res.verdict == doctor::Verdict::kWarn) {
        ++warn;
      } else {
        ++ok;
      }
    }
    r_.checks.push_back({"doctor", failed.empty(),
                         std::to_string(ok) + " ok or skipped, " + std::to_string(warn) +
                             " warnings" + (failed.empty() ? "" : "; failed: " + failed)});
  }

  // The link to the peer: up, and its RDMA rails. False when it is not up.
  bool Link() {
    auto links = admin_.ListLinks();
    if (!links.ok()) {
      r_.checks.push_back({"link", false, links.status().ToString()});
      return false;
    }
    for (const auto& l : links->links()) {
      if (l.peer() != f_.peer) continue;
      std::string rails;
      for (const auto& rail : l.rails()) {
        rails += (rails.empty() ? "" : ", ") + rail.name() + " (" + rail.state() +
                 (rail.profile().empty() ? "" : ", " + rail.profile()) + ")";
        if (rail.transport() == "verbs" && !rail.device().empty() && !rail.peer_device().empty())
          AddRail(rail.device(), rail.peer_device());
      }
      if (l.transport() == "verbs" && !l.verbs().device().empty())
        AddRail(l.verbs().device(), l.verbs().peer_device());
      r_.conditions.push_back(
          "link: " + l.state() + ", transport " + l.transport() +
          (l.verbs().profile().empty() ? "" : ", profile " + l.verbs().profile()) +
          ", generation " + std::to_string(l.generation()));
      if (!rails.empty()) r_.conditions.push_back("rails: " + rails);
      const bool up = l.state() == "up";
      r_.checks.push_back({"link", up,
                           up ? "up over " + l.transport()
                              : l.state() + (l.last_error().empty() ? "" : ": " + l.last_error())});
      return up;
    }
    r_.checks.push_back(
        {"link", false, "no link to '" + f_.peer + "' (mcdmactl links lists this host's)"});
    return false;
  }

  bool Resolve() {
    auto remote = c_.Resolve(kBufferExport, f_.peer);
    if (!remote.ok()) {
      r_.checks.push_back({"responder", false,
                           "resolving " + std::string(kBufferExport) + " on " + f_.peer + ": " +
                               remote.status().ToString() +
                               " (run `mcdmactl validate --serve` there first)"});
      return false;
    }
    remote_ = *remote;
    uint64_t need = std::max<uint64_t>(8u << 20, bw_op_ * f_.bw_depth);
    for (uint64_t s : sizes_) need = std::max(need, s);
    if (remote_.length < need) {
      r_.checks.push_back({"responder", false,
                           "its buffer has " + std::to_string(remote_.length) +
                               " bytes; this run "
                               "needs " +
                               std::to_string(need) + " (start it with a larger --buffer)"});
      return false;
    }
    auto local = c_.Alloc(need);
    if (!local.ok()) {
      r_.checks.push_back({"responder", false, local.status().ToString()});
      return false;
    }
    local_ = *local;
    r_.checks.push_back(
        {"responder", true,
         std::string(kBufferExport) + " of " + std::to_string(remote_.length) + " bytes resolved"});
    return true;
  }

  void ByteChecks() {
    std::mt19937_64 rng(std::random_device{}());
    // Calls this way, of a few sizes.
    std::string failure;
    int calls = 0;
    for (uint64_t size : {uint64_t{1} << 10, uint64_t{4} << 10, uint64_t{64} << 10}) {
      std::string request(size, '\0');
      for (int i = 0; i < 20 && failure.empty(); ++i) {
        for (char& ch : request) ch = static_cast<char>(rng());
        auto reply = c_.Call(f_.peer + "/" + kEchoService, std::string_view(request));
        if (!reply.ok()) {
          failure = reply.status().ToString();
        } else if (reply->view() != request) {
          failure = "a " + std::to_string(size) + "-byte reply is not its request";
        }
        ++calls;
      }
    }
    r_.checks.push_back(
        {"calls " + r_.host + " -> " + f_.peer, failure.empty(),
         failure.empty() ? std::to_string(calls) + " calls of 1, 4 and 64 KiB, replies byte-checked"
                         : failure});
    // Calls the other way: the responder calls our echo.
    auto rev = c_.Call(f_.peer + "/" + kReverseService, "20 4096 " + r_.host);
    std::string answer = rev.ok() ? std::string(rev->view()) : rev.status().ToString();
    const bool rev_ok = rev.ok() && answer.rfind("ok ", 0) == 0;
    r_.checks.push_back(
        {"calls " + f_.peer + " -> " + r_.host, rev_ok,
         rev_ok ? "20 calls of 4 KiB from the responder, replies byte-checked" : answer});
    // READ what the responder wrote, then WRITE and READ back.
    const uint64_t n = 4u << 20;
    auto* mem = reinterpret_cast<uint8_t*>(local_.data());
    auto read = c_.Read(remote_, 0, local_, 0, n);
    std::string why;
    if (!read.ok()) {
      why = read.status().ToString();
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        if (mem[i] != Pattern(i)) {
          why = "byte " + std::to_string(i) + " read from the responder is not what it wrote";
          break;
        }
      }
    }
    r_.checks.push_back({"READ " + f_.peer + " -> " + r_.host, why.empty(),
                         why.empty() ? "4 MiB the responder wrote, read and byte-checked" : why});
    std::vector<uint8_t> sent(n);
    for (auto& b : sent) b = static_cast<uint8_t>(rng());
    std::memcpy(mem, sent.data(), n);
    why.clear();
    auto wrote = c_.Write(remote_, 0, local_, 0, n);
    if (!wrote.ok()) why = wrote.status().ToString();
    if (why.empty()) {
      std::memset(mem, 0, n);
      auto back = c_.Read(remote_, 0, local_, 0, n);
      if (!back.ok()) {
        why = back.status().ToString();
      } else if (std::memcmp(mem, sent.data(), n) != 0) {
        why = "the 4 MiB read back are not the 4 MiB written";
      }
    }
    r_.checks.push_back(
        {"WRITE " + r_.host + " -> " + f_.peer, why.empty(),
         why.empty() ? "4 MiB of random bytes written, read back, byte-checked" : why});
  }

  void DaemonLatency() {
    for (const char* test : {"call", "write", "read"}) {
      for (uint64_t bytes : sizes_) {
        LatencyRow row{test, "link", bytes, {}, ""};
        std::string request(std::string(test) == "call" ? bytes : 0, 'v');
        for (uint32_t i = 0; i < f_.warmup + f_.samples; ++i) {
          auto start = Clock::now();
          Status st;
          if (std::string(test) == "call") {
            auto reply = c_.Call(f_.peer + "/" + kEchoService, std::string_view(request));
            st = reply.ok() ? (reply->size() == bytes
                                   ? Status::Ok()
                                   : Status(Code::kInternal, "a reply of the wrong size"))
                            : reply.status();
          } else {
            auto moved = std::string(test) == "write" ? c_.Write(remote_, 0, local_, 0, bytes)
                                                      : c_.Read(remote_, 0, local_, 0, bytes);
            st = moved.status();
          }
          if (!st.ok()) {
            row.error = st.ToString();
            break;
          }
          if (i >= f_.warmup) row.samples_ns.push_back(Nanos(Clock::now() - start));
        }
        r_.latency.push_back(std::move(row));
      }
    }
  }

  void Perftest() {
    if (f_.skip_perftest) {
      r_.notes.push_back("perftest: skipped (--skip-perftest)");
      return;
    }
    if (rails_.empty()) {
      r_.notes.push_back("perftest: the link has no RDMA rail, so nothing to run it on");
      return;
    }
    for (const Rail& rail : rails_) {
      for (const char* tool : {"ib_send_lat", "ib_write_lat", "ib_read_lat"}) {
        for (uint64_t bytes : sizes_) {
          // -n N prints N - 1 samples; the first `warmup` are dropped.
          std::vector<std::string> args = {"-s", std::to_string(bytes), "-n",
                                           std::to_string(f_.warmup + f_.samples + 1), "-U"};
          LatencyRow row{tool, rail.name, bytes, {}, ""};
          // perftest halves a ping-pong's round trip (SEND, WRITE); a READ
          // is one round trip already.
          const int factor = std::string(tool) == "ib_read_lat" ? 1 : 2;
          Attempts(
              std::string(tool) + " " + std::to_string(bytes) + " B on " + rail.name,
              [&]() -> Status {
                auto out = RunPair(rail, tool, args);
                if (!out.ok()) return out.status();
                // A clock it could not sample makes every figure wrong
                // (samples of 0 or inf): run it again.
                if (std::string w = perftest::ClockSamplingFailure(out->out, out->err); !w.empty())
                  return Status(Code::kInternal, "perftest's clock: " + w);
                auto nanos = perftest::ParseUnsortedLatency(out->out, factor);
                if (!nanos.ok()) return nanos.status();
                if (nanos->size() < f_.warmup + 1)
                  return Status(Code::kInternal,
                                "perftest printed " + std::to_string(nanos->size()) + " samples");
                row.samples_ns.assign(nanos->begin() + f_.warmup, nanos->end());
                return Status::Ok();
              },
              &row.error);
          r_.latency.push_back(std::move(row));
        }
      }
      for (const char* tool : {"ib_write_bw", "ib_read_bw"}) {
        const uint64_t iters = std::max<uint64_t>(5, bw_total_ / bw_op_);
        std::vector<std::string> args = {
            "-s", std::to_string(bw_op_),         "-n", std::to_string(iters), "--report_gbits",
            "-t", std::to_string(f_.bw_depth * 2)};
        if (std::string(tool) == "ib_read_bw")
          args.insert(args.end(), {"-o", std::to_string(f_.bw_depth * 2)});
        BandwidthRow row{tool, rail.name, bw_op_, iters * bw_op_, 0, ""};
        Attempts(
            std::string(tool) + " on " + rail.name,
            [&]() -> Status {
              auto out = RunPair(rail, tool, args);
              if (!out.ok()) return out.status();
              auto gbps = perftest::ParseAverageBandwidth(out->out, bw_op_);
              if (!gbps.ok()) return gbps.status();
              row.mbps = *gbps * 1000.0;
              return Status::Ok();
            },
            &row.error);
        r_.bandwidth.push_back(std::move(row));
      }
    }
  }

  void DaemonBandwidth() {
    for (bool read : {false, true}) {
      BandwidthRow row{read ? "read" : "write", "link", bw_op_, bw_total_, 0, ""};
      std::deque<Future<uint64_t>> inflight;
      uint64_t issued = 0;
      uint64_t done = 0;
      const uint64_t count = std::max<uint64_t>(1, bw_total_ / bw_op_);
      auto start = Clock::now();
      while (done < count && row.error.empty()) {
        while (issued < count && inflight.size() < f_.bw_depth) {
          uint64_t off = (issued % f_.bw_depth) * bw_op_;
          inflight.push_back(read ? c_.ReadAsync(remote_, off, local_, off, bw_op_)
                                  : c_.WriteAsync(remote_, off, local_, off, bw_op_));
          ++issued;
        }
        auto moved = inflight.front().Wait();
        inflight.pop_front();
        if (!moved.ok()) row.error = moved.status().ToString();
        ++done;
      }
      for (auto& f : inflight) (void)f.Wait();
      double s = std::chrono::duration<double>(Clock::now() - start).count();
      row.total_bytes = count * bw_op_;
      if (row.error.empty() && s > 0) row.mbps = static_cast<double>(row.total_bytes) / s / 1e6;
      r_.bandwidth.push_back(std::move(row));
    }
  }

  Status Parse() {
    for (const std::string& s : f_.sizes) {
      uint64_t b = 0;
      if (!ParseByteSize(s, b)) return Status(Code::kInvalid, "--sizes: '" + s + "' is not a size");
      sizes_.push_back(b);
    }
    if (!ParseByteSize(f_.bw_op, bw_op_)) return Status(Code::kInvalid, "--bw-op: not a size");
    if (!ParseByteSize(f_.bw_total, bw_total_))
      return Status(Code::kInvalid, "--bw-total: not a size");
    return Status::Ok();
  }

 private:
  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (char& ch : s) ch = ch == '\n' ? ' ' : ch;
    return s;
  }

  // Runs a perftest pair up to kPerftestAttempts times: under emulation
  // perftest's clock sampling fails and a READ test stalls now and then
  // (bench/README.md), and one bad run says nothing about the link. Every
  // failed attempt is in the notes; `error` gets the last one's when none
  // succeeded.
  static constexpr int kPerftestAttempts = 3;
  void Attempts(const std::string& what, const std::function<Status()>& attempt,
                std::string* error) {
    for (int k = 1; k <= kPerftestAttempts; ++k) {
      Status st = attempt();
      if (st.ok()) return;
      r_.notes.push_back(what + ": attempt " + std::to_string(k) + " of " +
                         std::to_string(kPerftestAttempts) + " failed: " + st.message());
      if (k == kPerftestAttempts) *error = st.message();
    }
  }

  void AddRail(const std::string& local, const std::string& peer) {
    std::string name = local + ">" + peer;
    for (const Rail& r : rails_) {
      if (r.name == name) return;
    }
    rails_.push_back({name, local, peer});
  }

  // perftest's server on the peer (through the responder), then its client
  // here; the client's output.
  Result<ProcessOutput> RunPair(const Rail& rail, const std::string& tool,
                                const std::vector<std::string>& args) {
    std::string request = tool + " " + rail.peer;
    for (const std::string& a : args) request += " " + a;
    auto started = c_.Call(f_.peer + "/" + kPerftestService, std::string_view(request));
    if (!started.ok()) return started.status();
    std::vector<std::string> w = Words(std::string(started->view()));
    if (w.size() != 4 || w[0] != "ok")
      return Status(Code::kUnavailable,
                    "the responder did not start " + tool + ": " + std::string(started->view()));
    auto gid = perftest::RoceV2Ipv4GidIndex(rail.local);
    if (!gid.ok()) return gid.status();
    std::vector<std::string> argv = {tool, "-d", rail.local, "-x", std::to_string(*gid),
                                     "-p", w[1]};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(w[3]);
    if (notes_for_.insert(tool).second) {
      std::string cmd;
      for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
      r_.notes.push_back("perftest " + tool + " (client here; its server on " + f_.peer +
                         " with the same -s/-n/-t/-o): " + cmd);
    }
    auto out = RunCaptured(argv, std::chrono::seconds(f_.perftest_limit_s));
    if (!out.ok()) return out.status();
    if (out->exit_code != 0)
      return Status(Code::kInternal,
                    tool + " exited " + std::to_string(out->exit_code) + ": " +
                        Trim(out->err.substr(0, 300)) + " " +
                        Trim(out->out.substr(out->out.size() > 300 ? out->out.size() - 300 : 0)));
    return out;
  }

  const Flags& f_;
  Client& c_;
  AdminClient& admin_;
  Report& r_;
  std::vector<uint64_t> sizes_;
  uint64_t bw_op_ = 0;
  uint64_t bw_total_ = 0;
  std::vector<Rail> rails_;
  std::set<std::string> notes_for_;
  RemoteBuffer remote_;
  Buffer local_;
};

Status WriteFile(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return Status(Code::kSystem, "cannot write " + path);
  fill(f);
  f.close();
  if (!f) return Status(Code::kSystem, "writing " + path + " failed");
  return Status::Ok();
}

}  // namespace

int Run(const Flags& flags, const std::string& socket, int timeout_ms, std::ostream& out,
        std::ostream& err) {
  ClientOptions options;
  options.app_name = "mcdmactl-validate";
  std::unique_ptr<Client> client =
      ConnectApp(options, socket, timeout_ms, "mcdmactl validate", err);
  if (!client) return kExitFailure;
  Client& c = *client;
  // The responder's reverse check calls this.
  auto echo = c.Serve(kEchoService, [](ServerCall& call) { (void)call.Reply(call.payload()); });
  if (!echo.ok()) {
    err << "mcdmactl validate: serving " << kEchoService << ": " << echo.status().ToString()
        << '\n';
    return kExitFailure;
  }
  AdminClient admin(socket, std::chrono::milliseconds(timeout_ms));
  Report report;
  report.host = c.info().host_id;
  report.peer = flags.peer;
  Runner run(flags, c, admin, report);
  if (Status st = run.Parse(); !st.ok()) {
    err << "mcdmactl validate: " << st.message() << '\n';
    return kExitUsage;
  }
  run.Conditions();
  run.Doctor(socket, timeout_ms);
  if (run.Link() && run.Resolve()) {
    run.ByteChecks();
    run.DaemonLatency();
    run.Perftest();
    run.DaemonBandwidth();
  }
  if (flags.json) {
    RenderJson(report, out);
  } else {
    RenderText(report, out);
  }
  if (!flags.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(flags.out, ec);
    for (const auto& [name, fill] :
         std::vector<std::pair<std::string, std::function<void(std::ostream&)>>>{
             {"report.txt", [&](std::ostream& o) { RenderText(report, o); }},
             {"report.json", [&](std::ostream& o) { RenderJson(report, o); }},
             {"samples.csv", [&](std::ostream& o) { WriteSamples(report, o); }}}) {
      if (Status st = WriteFile(flags.out + "/" + name, fill); !st.ok()) {
        err << "mcdmactl validate: " << st.message() << '\n';
        return kExitFailure;
      }
    }
    err << "mcdmactl validate: report.txt, report.json and samples.csv in " << flags.out << '\n';
  }
  return report.ok() ? kExitOk : kExitFailure;
}

}  // namespace mcdma::tools::validate
