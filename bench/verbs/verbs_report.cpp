#include "verbs_report.hpp"

#include <algorithm>
#include <optional>

#include "harness/files.hpp"
#include "harness/report.hpp"

namespace mcdma::bench {

namespace {

using harness::CsvField;
using harness::Fixed;
using harness::FormatBytes;
using harness::Median;
using harness::Summary;

const LatencyRow* FindLatency(const std::vector<LatencyRow>& rows, const std::string& key,
                              size_t payload) {
  for (const LatencyRow& r : rows) {
    if (r.key == key && r.payload == payload && r.ok && r.stats.count > 0) return &r;
  }
  return nullptr;
}

const BandwidthRow* FindBandwidth(const std::vector<BandwidthRow>& rows, const std::string& key,
                                  const std::string& direction) {
  for (const BandwidthRow& r : rows) {
    if (r.key == key && r.direction == direction && r.ok && !r.mbps.empty()) return &r;
  }
  return nullptr;
}

// daemon median / perftest median in one direction.
std::optional<double> BandwidthRatio(const std::vector<BandwidthRow>& rows,
                                     const std::string& direction) {
  const BandwidthRow* d = FindBandwidth(rows, "daemon", direction);
  const BandwidthRow* p = FindBandwidth(rows, "perftest", direction);
  if (d == nullptr || p == nullptr || Median(p->mbps) <= 0) return std::nullopt;
  return Median(d->mbps) / Median(p->mbps);
}

constexpr char kLatencyRowFormat[] = "%-42s %-8s %10s %10s %10s %10s\n";
constexpr char kBandwidthRowFormat[] = "%-42s %-9s %-8s %10s %10s %10s\n";

}  // namespace

mcdma::Status WriteSummaryCsv(const std::string& path, const std::vector<LatencyRow>& latency,
                              const std::vector<BandwidthRow>& bandwidth) {
  std::string csv =
      "kind,mechanism,label,payload_or_direction,count,p50_us,p95_us,p99_us,max_us,"
      "mbps_median,mbps_min,mbps_max,ok,error\n";
  char figures[160];
  for (const LatencyRow& r : latency) {
    snprintf(figures, sizeof(figures), "%zu,%zu,%.3f,%.3f,%.3f,%.3f,,,,%d,", r.payload,
             r.stats.count, r.stats.p50_us, r.stats.p95_us, r.stats.p99_us, r.stats.max_us,
             r.ok ? 1 : 0);
    csv += "latency," + r.key + "," + CsvField(r.label) + "," + figures + CsvField(r.error) + "\n";
  }
  for (const BandwidthRow& r : bandwidth) {
    double lo = r.mbps.empty() ? 0 : *std::min_element(r.mbps.begin(), r.mbps.end());
    double hi = r.mbps.empty() ? 0 : *std::max_element(r.mbps.begin(), r.mbps.end());
    snprintf(figures, sizeof(figures), "%zu,,,,,%.3f,%.3f,%.3f,%d,", r.mbps.size(), Median(r.mbps),
             lo, hi, r.ok ? 1 : 0);
    csv += "bandwidth," + r.key + "," + CsvField(r.label) + "," + r.direction + "," + figures +
           CsvField(r.error) + "\n";
  }
  return harness::WriteFile(path, csv);
}

void PrintLatencyTable(FILE* out, const std::vector<LatencyRow>& rows,
                       const std::vector<size_t>& payloads) {
  fprintf(out, kLatencyRowFormat, "mechanism", "payload", "p50 us", "p95 us", "p99 us", "max us");
  for (size_t payload : payloads) {
    for (const LatencyRow& r : rows) {
      if (r.payload != payload) continue;
      if (!r.ok) {
        fprintf(out, "%-42s %-8s FAILED: %s\n", r.label.c_str(), FormatBytes(payload).c_str(),
                r.error.c_str());
        continue;
      }
      const Summary& s = r.stats;
      fprintf(out, kLatencyRowFormat, r.label.c_str(), FormatBytes(payload).c_str(),
              Fixed(s.p50_us, 2).c_str(), Fixed(s.p95_us, 2).c_str(), Fixed(s.p99_us, 2).c_str(),
              Fixed(s.max_us, 2).c_str());
    }
    const LatencyRow* d = FindLatency(rows, "daemon", payload);
    const LatencyRow* p = FindLatency(rows, "perftest", payload);
    if (d == nullptr || p == nullptr) continue;
    auto ratio = [](double a, double b) { return b > 0 ? Fixed(a / b, 2) + "x" : "n/a"; };
    fprintf(out, kLatencyRowFormat, "  ratio daemon call / perftest", FormatBytes(payload).c_str(),
            ratio(d->stats.p50_us, p->stats.p50_us).c_str(),
            ratio(d->stats.p95_us, p->stats.p95_us).c_str(),
            ratio(d->stats.p99_us, p->stats.p99_us).c_str(),
            ratio(d->stats.max_us, p->stats.max_us).c_str());
  }
}

void PrintBandwidthTable(FILE* out, const std::vector<BandwidthRow>& rows) {
  fprintf(out, kBandwidthRowFormat, "mechanism", "direction", "WR size", "MB/s med", "MB/s min",
          "MB/s max");
  for (const char* direction : {"WRITE", "READ"}) {
    for (const BandwidthRow& r : rows) {
      if (r.direction != direction) continue;
      if (!r.ok) {
        fprintf(out, "%-42s %-9s FAILED: %s\n", r.label.c_str(), direction, r.error.c_str());
        continue;
      }
      fprintf(out, kBandwidthRowFormat, r.label.c_str(), direction, FormatBytes(r.unit).c_str(),
              Fixed(Median(r.mbps), 1).c_str(),
              Fixed(*std::min_element(r.mbps.begin(), r.mbps.end()), 1).c_str(),
              Fixed(*std::max_element(r.mbps.begin(), r.mbps.end()), 1).c_str());
    }
    if (auto ratio = BandwidthRatio(rows, direction)) {
      fprintf(out, kBandwidthRowFormat, "  ratio daemon / perftest", direction, "",
              (Fixed(*ratio, 2) + "x").c_str(), "", "");
    }
  }
}

void PrintOverhead(FILE* out, const std::vector<LatencyRow>& latency,
                   const std::vector<size_t>& payloads,
                   const std::vector<BandwidthRow>& bandwidth) {
  std::string lat;
  for (size_t payload : payloads) {
    const LatencyRow* d = FindLatency(latency, "daemon", payload);
    const LatencyRow* p = FindLatency(latency, "perftest", payload);
    lat += (lat.empty() ? "" : ", ") + FormatBytes(payload) + " ";
    lat += d != nullptr && p != nullptr && p->stats.p50_us > 0
               ? Fixed(d->stats.p50_us / p->stats.p50_us, 2) + "x"
               : std::string("not measured");
    const LatencyRow* t = FindLatency(latency, "linktest", payload);
    const LatencyRow* l = FindLatency(latency, "local", payload);
    if (p != nullptr && p->stats.p50_us > 0 && (t != nullptr || l != nullptr)) {
      std::string parts;
      if (t != nullptr)
        parts = "daemon-daemon echo alone " + Fixed(t->stats.p50_us / p->stats.p50_us, 2) + "x";
      if (l != nullptr)
        parts += (parts.empty() ? "" : "; ") + std::string("a call through one daemon, no link, ") +
                 Fixed(l->stats.p50_us / p->stats.p50_us, 2) + "x";
      lat += " (" + parts + ")";
    }
  }
  std::string bw;
  for (const char* direction : {"WRITE", "READ"}) {
    auto ratio = BandwidthRatio(bandwidth, direction);
    bw += std::string(bw.empty() ? "" : ", ") + direction + " " +
          (ratio ? Fixed(*ratio, 2) + "x" : std::string("not measured"));
  }
  if (!latency.empty()) {
    fprintf(out,
            "daemon overhead, latency: daemon call p50 / ib_write_lat round-trip p50 "
            "(above 1: the daemon is slower): %s\n",
            lat.c_str());
  }
  if (!bandwidth.empty()) {
    fprintf(out,
            "daemon overhead, bandwidth: daemon median / perftest median (below 1: the daemon is "
            "slower): %s\n",
            bw.c_str());
  }
}

}  // namespace mcdma::bench
