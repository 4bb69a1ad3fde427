#include "link_report.hpp"

#include <algorithm>
#include <optional>

#include "harness/files.hpp"

namespace mcdma::bench {

namespace {

using harness::Fixed;
using harness::FormatBytes;
using harness::JsonQuote;
using harness::Median;
using harness::Row;
using harness::Verdict;

constexpr double kCallVsTcpMax = 1.5;   // daemon p50 / raw TCP p50, at most
constexpr double kCallVsGrpcMin = 2.0;  // gRPC p50 / daemon p50, at least
constexpr double kBulkVsTcpMin = 0.85;  // daemon GB/s / raw TCP GB/s, at least

const Row* FindCall(const CallRows& calls, const std::string& mechanism, size_t payload) {
  return harness::FindRow(calls.rows, mechanism, payload);
}

const BulkRow* FindBulk(const std::vector<BulkRow>& bulk, const std::string& mechanism,
                        const std::string& direction) {
  for (const BulkRow& r : bulk) {
    if (r.mechanism == mechanism && r.direction == direction) return &r;
  }
  return nullptr;
}

// Daemon median over `other`'s median in one direction.
std::optional<double> BulkShare(const std::vector<BulkRow>& bulk, const BulkRow& other) {
  const BulkRow* daemon = FindBulk(bulk, "daemon", other.direction);
  if (daemon == nullptr || !daemon->ok || !other.ok) return std::nullopt;
  double theirs = Median(other.gbps);
  if (theirs <= 0) return std::nullopt;
  return Median(daemon->gbps) / theirs;
}

// A per-payload call target: ratio(payload) must satisfy `ok`.
template <typename Ratio, typename Ok>
Verdict CallTarget(std::string key, std::string description, const CallRows& calls,
                   const std::vector<size_t>& payloads, Ratio&& ratio, Ok&& ok) {
  bool measured = !payloads.empty();
  bool met = true;
  std::string detail;
  for (size_t payload : payloads) {
    std::optional<double> r = ratio(payload);
    detail += (detail.empty() ? "" : ", ") + FormatBytes(payload) + ": ";
    if (!r) {
      measured = false;
      detail += "not measured";
      continue;
    }
    detail += Fixed(*r, 2) + "x";
    met = met && ok(*r);
  }
  return harness::MakeVerdict(std::move(key), std::move(description), measured, met, detail);
}

}  // namespace

std::vector<Verdict> EvaluateLinkTargets(const CallRows& calls, const std::vector<size_t>& payloads,
                                         const std::vector<BulkRow>& bulk) {
  auto p50 = [&](const char* mechanism, size_t payload) -> std::optional<double> {
    const Row* r = FindCall(calls, mechanism, payload);
    if (r == nullptr || !r->ok || r->summary.p50_us <= 0) return std::nullopt;
    return r->summary.p50_us;
  };
  std::vector<Verdict> targets;
  targets.push_back(CallTarget(
      "call_vs_tcp",
      "call p50 within 1.5x of raw TCP ping-pong p50, the faster of blocking and spinning "
      "(daemon / TCP)",
      calls, payloads,
      [&](size_t p) -> std::optional<double> {
        auto d = p50("daemon", p), t = p50("tcp", p), ts = p50("tcpspin", p);
        if (ts && (!t || *ts < *t)) t = ts;
        if (!d || !t) return std::nullopt;
        return *d / *t;
      },
      [](double r) { return r <= kCallVsTcpMax; }));
  targets.push_back(CallTarget(
      "call_vs_grpc", "call p50 at least 2x faster than gRPC unary p50 (gRPC / daemon)", calls,
      payloads,
      [&](size_t p) -> std::optional<double> {
        auto d = p50("daemon", p), g = p50("grpc", p);
        if (!d || !g) return std::nullopt;
        return *g / *d;
      },
      [](double r) { return r >= kCallVsGrpcMin; }));

  bool measured = true;
  bool met = true;
  std::string detail;
  for (const char* direction : {"A->B", "B->A"}) {
    const BulkRow* tcp = FindBulk(bulk, "tcp", direction);
    std::optional<double> share = tcp ? BulkShare(bulk, *tcp) : std::nullopt;
    detail += std::string(detail.empty() ? "" : ", ") +
              (std::string(direction) == "A->B" ? "write A->B: " : "read B->A: ");
    if (!share) {
      measured = false;
      detail += "not measured";
      continue;
    }
    double fraction = share.value_or(0);
    detail += Fixed(fraction * 100, 0) + "%";
    met = met && fraction >= kBulkVsTcpMin;
  }
  targets.push_back(harness::MakeVerdict("bulk_vs_tcp", "bulk at least 85% of raw TCP throughput",
                                         measured, met, detail));
  return targets;
}

std::string RelayFloorLine(const CallRows& calls, const std::vector<size_t>& payloads) {
  std::string parts;
  for (size_t p : payloads) {
    const Row* d = FindCall(calls, "daemon", p);
    const Row* relay = FindCall(calls, "tcprelay", p);
    const Row* spin = FindCall(calls, "tcpspin", p);
    if (relay == nullptr || spin == nullptr || !relay->ok || !spin->ok ||
        spin->summary.p50_us <= 0 || relay->summary.p50_us <= 0) {
      continue;
    }
    parts += (parts.empty() ? "" : ", ") + FormatBytes(p) + ": relays " +
             Fixed(relay->summary.p50_us / spin->summary.p50_us, 2) + "x spinning TCP";
    if (d != nullptr && d->ok) {
      parts += ", daemon " + Fixed(d->summary.p50_us / relay->summary.p50_us, 2) + "x relays";
    }
  }
  if (parts.empty()) return "";
  return "floor: one relay process per host, nothing else (tcprelay p50 / tcpspin p50; daemon "
         "p50 / tcprelay p50): " +
         parts;
}

void PrintCallTable(FILE* out, const CallRows& calls) {
  harness::PrintCallTable(out, calls.rows, "daemon", 32, calls.skipped);
}

void PrintBulkTable(FILE* out, const std::vector<BulkRow>& bulk) {
  fprintf(out, "%-32s %-9s %-8s %10s %10s %10s %14s\n", "mechanism", "direction", "size",
          "GB/s med", "GB/s min", "GB/s max", "daemon / row");
  for (const BulkRow& r : bulk) {
    if (!r.ok) {
      fprintf(out, "%-32s %-9s %-8s %s: %s\n", r.label.c_str(), r.direction.c_str(),
              FormatBytes(r.bytes).c_str(), r.skipped ? "SKIPPED" : "FAILED", r.error.c_str());
      continue;
    }
    std::optional<double> share = BulkShare(bulk, r);
    std::string share_text = share ? Fixed(*share, 2) + "x" : "n/a";
    fprintf(out, "%-32s %-9s %-8s %10.2f %10.2f %10.2f %14s\n", r.label.c_str(),
            r.direction.c_str(), FormatBytes(r.bytes).c_str(), Median(r.gbps),
            *std::min_element(r.gbps.begin(), r.gbps.end()),
            *std::max_element(r.gbps.begin(), r.gbps.end()), share_text.c_str());
  }
}

Status WriteLinkJson(const std::string& path, const LinkRunInfo& info, const LinkPlan& plan,
                     const CallRows& calls, const std::vector<BulkRow>& bulk,
                     const std::vector<Verdict>& targets) {
  std::string j = "{\n  \"benchmark\": \"link\",\n";
  j += "  \"hosts\": " + JsonQuote(info.hosts) + ",\n";
  j += "  \"link\": " + JsonQuote(info.link) + ",\n";
  j += std::string("  \"loopback\": ") + (info.loopback ? "true" : "false") + ",\n";
  j += harness::RunJson(plan.iterations, plan.warmup, plan.payloads, plan.daemon_path);
  j += "  \"bulk_bytes\": " + std::to_string(plan.bulk_bytes) + ",\n";
  j += "  \"bulk_op_bytes\": " + std::to_string(plan.op_bytes) + ",\n";
  j += "  \"bulk_repeats\": " + std::to_string(plan.repeats) + ",\n";
  j += "  \"calls\": [\n" + harness::CallRowsJson(calls.rows, "") + "  ],\n";
  j += "  \"bulk\": [\n";
  for (size_t i = 0; i < bulk.size(); ++i) {
    const BulkRow& r = bulk[i];
    j += "    {\"mechanism\": " + JsonQuote(r.mechanism) + ", \"label\": " + JsonQuote(r.label) +
         ", \"direction\": " + JsonQuote(r.direction) + ", \"bytes\": " + std::to_string(r.bytes) +
         ", \"ok\": " + (r.ok ? "true" : "false") +
         ", \"skipped\": " + (r.skipped ? "true" : "false");
    if (r.ok) {
      j += ", \"gbps_median\": " + Fixed(Median(r.gbps), 3) + ", \"gbps\": [";
      for (size_t k = 0; k < r.gbps.size(); ++k) j += (k ? ", " : "") + Fixed(r.gbps[k], 3);
      j += "]";
    } else {
      j += ", \"error\": " + JsonQuote(r.error);
    }
    j += std::string("}") + (i + 1 < bulk.size() ? "," : "") + "\n";
  }
  j += "  ],\n  \"targets\": [\n" + harness::VerdictsJson(targets) + "  ]\n}\n";
  return harness::WriteFile(path, j);
}

}  // namespace mcdma::bench
