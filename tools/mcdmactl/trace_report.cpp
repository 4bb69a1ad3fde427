#include "trace_report.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "bench_report.hpp"
#include "render.hpp"

namespace mcdma::tools {
namespace {

// b - a, or nothing when either is unknown or they run backwards.
bool Span(uint64_t a, uint64_t b, uint64_t* out) {
  if (a == 0 || b == 0 || b < a) return false;
  *out = b - a;
  return true;
}

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

double MeanUs(const std::vector<uint64_t>& v) {
  if (v.empty()) return 0;
  return static_cast<double>(std::accumulate(v.begin(), v.end(), uint64_t{0})) /
         static_cast<double>(v.size()) / 1e3;
}

}  // namespace

TraceBreakdown BreakDown(const std::vector<v1::TraceCall>& calls,
                         const std::vector<uint64_t>& seen_ns) {
  TraceBreakdown b;
  b.calls = calls.size();
  enum { kSubmit, kPost, kLink, kPeerDaemon, kPeerApp, kComplete, kSeen, kTotal, kStages };
  b.stages.resize(kStages);
  b.stages[kSubmit] = {"app -> engine", "the app wrote its submission; the engine took it", {}};
  b.stages[kPost] = {
      "engine: post", "the engine took it; the call was wholly posted on the link", {}};
  b.stages[kLink] = {"link, both ways",
                     "posted; reply received whole, less the peer daemon's time: both wires, "
                     "both transports, both completions",
                     {}};
  b.stages[kPeerDaemon] = {
      "peer daemon", "the peer's engine: call received to inbox, REPLY taken to posted", {}};
  b.stages[kPeerApp] = {
      "peer app", "the call in the serving app's inbox until its REPLY was taken", {}};
  b.stages[kComplete] = {
      "engine: complete", "reply received whole; completion in the app's ring", {}};
  b.stages[kSeen] = {"engine -> app", "completion in the ring; the app had it", {}};
  b.stages[kTotal] = {"total", "the app wrote its submission; it had the completion", {}};
  for (size_t i = 0; i < calls.size(); ++i) {
    const v1::TraceCall& c = calls[i];
    b.peer = c.peer();
    b.transport = c.transport();
    b.request_bytes = c.request_bytes();
    uint64_t d = 0;
    if (Span(c.submit_ns(), c.pickup_ns(), &d)) b.stages[kSubmit].samples_ns.push_back(d);
    if (Span(c.pickup_ns(), c.posted_ns(), &d)) b.stages[kPost].samples_ns.push_back(d);
    if (c.remote_timed()) {
      if (Span(c.posted_ns(), c.reply_ns(), &d) && d >= c.remote_ns())
        b.stages[kLink].samples_ns.push_back(d - c.remote_ns());
      if (c.remote_ns() >= c.remote_app_ns())
        b.stages[kPeerDaemon].samples_ns.push_back(c.remote_ns() - c.remote_app_ns());
      b.stages[kPeerApp].samples_ns.push_back(c.remote_app_ns());
    }
    if (Span(c.reply_ns(), c.completed_ns(), &d)) b.stages[kComplete].samples_ns.push_back(d);
    const uint64_t seen = i < seen_ns.size() ? seen_ns[i] : 0;
    if (Span(c.completed_ns(), seen, &d)) b.stages[kSeen].samples_ns.push_back(d);
    if (Span(c.submit_ns(), seen != 0 ? seen : c.completed_ns(), &d))
      b.stages[kTotal].samples_ns.push_back(d);
  }
  if (seen_ns.empty()) {
    b.stages.erase(b.stages.begin() + kSeen);
    b.stages.back().what = "the app wrote its submission; its completion was in the ring";
  }
  return b;
}

void RenderTraceText(const TraceBreakdown& b, std::ostream& out) {
  out << "mcdma trace: " << b.host << " -> " << b.peer << " " << b.service << ", "
      << b.request_bytes << " B calls over " << (b.transport.empty() ? "?" : b.transport) << ", "
      << b.calls << " traced (us = microseconds)\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-18s %9s %9s %9s %9s %7s  %s\n", "stage", "p50 us", "p90 us",
                "p99 us", "mean us", "share", "from; to");
  out << line;
  const double total = b.stages.empty() ? 0 : MeanUs(b.stages.back().samples_ns);
  for (const TraceStage& s : b.stages) {
    BenchRow row;
    row.samples_ns = s.samples_ns;
    BenchFigures f = Summarize(row);
    if (s.samples_ns.empty()) {
      std::snprintf(line, sizeof line, "%-18s %9s %9s %9s %9s %7s  %s (not timed)\n",
                    s.name.c_str(), "-", "-", "-", "-", "-", s.what.c_str());
    } else {
      std::string share = total > 0 ? Us(100.0 * f.avg_us / total) + "%" : "-";
      std::snprintf(line, sizeof line, "%-18s %9s %9s %9s %9s %7s  %s\n", s.name.c_str(),
                    Us(f.median_us).c_str(), Us(f.p90_us).c_str(), Us(f.p99_us).c_str(),
                    Us(f.avg_us).c_str(), share.c_str(), s.what.c_str());
    }
    out << line;
  }
  out << "shares are of the mean total; stages' medians need not add up to the total's\n";
}

void RenderTraceJson(const TraceBreakdown& b, std::ostream& out) {
  out << "{\"host\":" << JsonString(b.host) << ",\"peer\":" << JsonString(b.peer)
      << ",\"service\":" << JsonString(b.service) << ",\"transport\":" << JsonString(b.transport)
      << ",\"request_bytes\":" << b.request_bytes << ",\"calls\":" << b.calls << ",\"stages\":[";
  bool first = true;
  for (const TraceStage& s : b.stages) {
    BenchRow row;
    row.samples_ns = s.samples_ns;
    BenchFigures f = Summarize(row);
    out << (first ? "" : ",") << "{\"stage\":" << JsonString(s.name)
        << ",\"what\":" << JsonString(s.what) << ",\"count\":" << f.count
        << ",\"p50_us\":" << f.median_us << ",\"p90_us\":" << f.p90_us << ",\"p99_us\":" << f.p99_us
        << ",\"mean_us\":" << f.avg_us << ",\"max_us\":" << f.max_us << "}";
    first = false;
  }
  out << "]}\n";
}

void WriteTraceRaw(const TraceBreakdown& b, std::ostream& out) {
  out << "stage,index,ns\n";
  for (const TraceStage& s : b.stages) {
    for (size_t i = 0; i < s.samples_ns.size(); ++i)
      out << s.name << ',' << i << ',' << s.samples_ns[i] << '\n';
  }
}

}  // namespace mcdma::tools
