#include "link_report.hpp"

#include <string.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>

namespace bench {

namespace {

constexpr double kCallVsTcpMax = 1.5;   // daemon p50 / raw TCP p50, at most
constexpr double kCallVsGrpcMin = 2.0;  // gRPC p50 / daemon p50, at least
constexpr double kBulkVsTcpMin = 0.85;  // daemon GB/s / raw TCP GB/s, at least

std::string BulkBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  return FormatBytes(bytes);
}

const Row* FindCall(const CallRows& calls, const std::string& mechanism, size_t payload) {
  for (const Row& r : calls.rows) {
    if (r.mechanism == mechanism && r.payload == payload) return &r;
  }
  return nullptr;
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

LinkTarget Finish(std::string key, std::string description, bool measured, bool met,
                  const std::string& detail) {
  LinkTarget t{std::move(key), std::move(description), measured, measured && met, ""};
  t.line = "target: " + t.description + ": " +
           (t.met ? "MET" : (t.measured ? "NOT MET" : "NOT MEASURED")) + " (" + detail + ")";
  return t;
}

// A per-payload call target: ratio(payload) must satisfy `ok`.
template <typename Ratio, typename Ok>
LinkTarget CallTarget(std::string key, std::string description, const CallRows& calls,
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
  return Finish(std::move(key), std::move(description), measured, met, detail);
}

}  // namespace

std::vector<LinkTarget> EvaluateLinkTargets(const CallRows& calls,
                                            const std::vector<size_t>& payloads,
                                            const std::vector<BulkRow>& bulk) {
  auto p50 = [&](const char* mechanism, size_t payload) -> std::optional<double> {
    const Row* r = FindCall(calls, mechanism, payload);
    if (r == nullptr || !r->ok || r->summary.p50_us <= 0) return std::nullopt;
    return r->summary.p50_us;
  };
  std::vector<LinkTarget> targets;
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
  targets.push_back(
      Finish("bulk_vs_tcp", "bulk at least 85% of raw TCP throughput", measured, met, detail));
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
  fprintf(out, "%-32s %-10s %-8s %10s %10s %14s\n", "mechanism", "transport", "payload", "p50 us",
          "p99 us", "p50 / daemon");
  for (const Row& r : calls.rows) {
    if (!r.ok) {
      bool skipped =
          std::find(calls.skipped.begin(), calls.skipped.end(), r.mechanism) != calls.skipped.end();
      fprintf(out, "%-32s %-10s %-8s %s: %s\n", r.label.c_str(), r.transport.c_str(),
              FormatBytes(r.payload).c_str(), skipped ? "SKIPPED" : "FAILED", r.error.c_str());
      continue;
    }
    std::optional<double> ratio = RatioToReference(calls.rows, r, "daemon");
    std::string ratio_text = ratio ? Fixed(*ratio, 2) + "x" : "n/a";
    fprintf(out, "%-32s %-10s %-8s %10.2f %10.2f %14s\n", r.label.c_str(), r.transport.c_str(),
            FormatBytes(r.payload).c_str(), r.summary.p50_us, r.summary.p99_us, ratio_text.c_str());
  }
}

void PrintBulkTable(FILE* out, const std::vector<BulkRow>& bulk) {
  fprintf(out, "%-32s %-9s %-8s %10s %10s %10s %14s\n", "mechanism", "direction", "size",
          "GB/s med", "GB/s min", "GB/s max", "daemon / row");
  for (const BulkRow& r : bulk) {
    if (!r.ok) {
      fprintf(out, "%-32s %-9s %-8s %s: %s\n", r.label.c_str(), r.direction.c_str(),
              BulkBytes(r.bytes).c_str(), r.skipped ? "SKIPPED" : "FAILED", r.error.c_str());
      continue;
    }
    std::optional<double> share = BulkShare(bulk, r);
    std::string share_text = share ? Fixed(*share, 2) + "x" : "n/a";
    fprintf(out, "%-32s %-9s %-8s %10.2f %10.2f %10.2f %14s\n", r.label.c_str(),
            r.direction.c_str(), BulkBytes(r.bytes).c_str(), Median(r.gbps),
            *std::min_element(r.gbps.begin(), r.gbps.end()),
            *std::max_element(r.gbps.begin(), r.gbps.end()), share_text.c_str());
  }
}

mcdma::Status WriteLinkJson(const std::string& path, const LinkRunInfo& info, const CallRows& calls,
                            const std::vector<BulkRow>& bulk,
                            const std::vector<LinkTarget>& targets) {
  std::string j = "{\n  \"benchmark\": \"link\",\n";
  j += "  \"hosts\": " + JsonQuote(info.hosts) + ",\n";
  j += "  \"link\": " + JsonQuote(info.link) + ",\n";
  j += std::string("  \"loopback\": ") + (info.loopback ? "true" : "false") + ",\n";
  j += "  \"iterations\": " + std::to_string(info.iterations) + ",\n";
  j += "  \"warmup\": " + std::to_string(info.warmup) + ",\n  \"payloads\": [";
  for (size_t i = 0; i < info.payloads.size(); ++i)
    j += (i ? ", " : "") + std::to_string(info.payloads[i]);
  j += "],\n  \"bulk_bytes\": " + std::to_string(info.bulk_bytes) + ",\n";
  j += "  \"bulk_op_bytes\": " + std::to_string(info.op_bytes) + ",\n";
  j += "  \"bulk_repeats\": " + std::to_string(info.repeats) + ",\n";
  j += "  \"daemon\": " + JsonQuote(info.daemon_path) + ",\n";
  j += "  \"cpus\": " + std::to_string(info.cpus) + ",\n";
  j += "  \"kernel\": " + JsonQuote(info.kernel) + ",\n  \"calls\": [\n";
  for (size_t i = 0; i < calls.rows.size(); ++i) {
    const Row& r = calls.rows[i];
    j += "    {\"mechanism\": " + JsonQuote(r.mechanism) + ", \"label\": " + JsonQuote(r.label) +
         ", \"transport\": " + JsonQuote(r.transport) +
         ", \"payload\": " + std::to_string(r.payload) + ", \"ok\": " + (r.ok ? "true" : "false");
    if (r.ok) {
      const Summary& s = r.summary;
      j += ", \"count\": " + std::to_string(s.count) + ", \"p50_us\": " + Fixed(s.p50_us, 3) +
           ", \"p99_us\": " + Fixed(s.p99_us, 3) + ", \"min_us\": " + Fixed(s.min_us, 3) +
           ", \"mean_us\": " + Fixed(s.mean_us, 3) + ", \"max_us\": " + Fixed(s.max_us, 3);
    } else {
      j += ", \"error\": " + JsonQuote(r.error);
    }
    j += std::string("}") + (i + 1 < calls.rows.size() ? "," : "") + "\n";
  }
  j += "  ],\n  \"bulk\": [\n";
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
  j += "  ],\n  \"targets\": [\n";
  for (size_t i = 0; i < targets.size(); ++i) {
    const LinkTarget& t = targets[i];
    j += "    {\"key\": " + JsonQuote(t.key) + ", \"description\": " + JsonQuote(t.description) +
         ", \"measured\": " + (t.measured ? "true" : "false") +
         ", \"met\": " + (t.met ? "true" : "false") + ", \"line\": " + JsonQuote(t.line) + "}" +
         (i + 1 < targets.size() ? "," : "") + "\n";
  }
  j += "  ]\n}\n";

  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "w"), fclose);
  if (!f) return mcdma::Status(mcdma::Code::kSystem, "open " + path + ": " + strerror(errno));
  if (fwrite(j.data(), 1, j.size(), f.get()) != j.size() || fclose(f.release()) != 0) {
    return mcdma::Status(mcdma::Code::kSystem, "write " + path + ": " + strerror(errno));
  }
  return mcdma::Status::Ok();
}

}  // namespace bench
