#include "bench_report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "render.hpp"

namespace mcdma::tools {
namespace {

bool IsBandwidth(const BenchRow& row) { return row.test.ends_with("_bw"); }

double Percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1]) / 1e3;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

BenchFigures Summarize(const BenchRow& row) {
  BenchFigures f;
  std::vector<uint64_t> sorted = row.samples_ns;
  std::sort(sorted.begin(), sorted.end());
  f.count = sorted.size();
  if (sorted.empty()) return f;
  f.min_us = static_cast<double>(sorted.front()) / 1e3;
  f.max_us = static_cast<double>(sorted.back()) / 1e3;
  f.median_us = Percentile(sorted, 0.5);
  f.p90_us = Percentile(sorted, 0.90);
  f.p95_us = Percentile(sorted, 0.95);
  f.p99_us = Percentile(sorted, 0.99);
  f.avg_us = static_cast<double>(std::accumulate(sorted.begin(), sorted.end(), uint64_t{0})) /
             static_cast<double>(sorted.size()) / 1e3;
  if (row.elapsed_s > 0) {
    f.mops_per_s = static_cast<double>(f.count) / row.elapsed_s / 1e6;
    f.gbit_per_s = static_cast<double>(f.count * row.bytes) * 8 / row.elapsed_s / 1e9;
  }
  return f;
}

void RenderBenchText(const BenchReport& report, std::ostream& out) {
  out << "mcdma bench: " << report.host << " -> " << report.peer
      << " (through both daemons; us = microseconds)\n";
  bool latency_header = false;
  bool bandwidth_header = false;
  for (const BenchRow& row : report.rows) {
    BenchFigures f = Summarize(row);
    char line[256];
    if (!IsBandwidth(row)) {
      if (!latency_header) {
        out << "\n latency, queue depth 1\n";
        snprintf(line, sizeof line, " %-6s %10s %9s %11s %9s %9s %9s  %s\n", "test", "#bytes",
                 "#samples", "median[us]", "p95[us]", "p99[us]", "max[us]", "transport");
        out << line;
        latency_header = true;
      }
      snprintf(line, sizeof line, " %-6s %10llu %9llu %11.2f %9.2f %9.2f %9.2f  %s",
               row.test.c_str(), static_cast<unsigned long long>(row.bytes),
               static_cast<unsigned long long>(f.count), f.median_us, f.p95_us, f.p99_us, f.max_us,
               row.transport.c_str());
    } else {
      if (!bandwidth_header) {
        out << "\n bandwidth\n";
        snprintf(line, sizeof line, " %-8s %10s %5s %6s %10s %9s %11s %9s %9s %9s  %s\n", "test",
                 "#bytes", "depth", "#ops", "BW[Gb/s]", "Mops/s", "median[us]", "p95[us]",
                 "p99[us]", "max[us]", "transport");
        out << line;
        bandwidth_header = true;
      }
      snprintf(line, sizeof line,
               " %-8s %10llu %5u %6llu %10.3f %9.4f %11.2f %9.2f %9.2f %9.2f  %s", row.test.c_str(),
               static_cast<unsigned long long>(row.bytes), row.depth,
               static_cast<unsigned long long>(f.count), f.gbit_per_s, f.mops_per_s, f.median_us,
               f.p95_us, f.p99_us, f.max_us, row.transport.c_str());
    }
    out << line;
    if (row.link_restarted) out << " (the link restarted during the row)";
    if (!row.error.empty()) out << " STOPPED: " << row.error;
    out << '\n';
  }
}

void RenderBenchJson(const BenchReport& report, std::ostream& out) {
  out << "{\"host\":" << JsonString(report.host) << ",\"peer\":" << JsonString(report.peer)
      << ",\"rows\":[";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const BenchRow& row = report.rows[i];
    BenchFigures f = Summarize(row);
    out << (i ? "," : "") << "{\"test\":" << JsonString(row.test) << ",\"bytes\":" << row.bytes
        << ",\"depth\":" << row.depth << ",\"samples\":" << f.count
        << ",\"min_us\":" << Fixed(f.min_us, 3) << ",\"median_us\":" << Fixed(f.median_us, 3)
        << ",\"p95_us\":" << Fixed(f.p95_us, 3) << ",\"p99_us\":" << Fixed(f.p99_us, 3)
        << ",\"max_us\":" << Fixed(f.max_us, 3) << ",\"avg_us\":" << Fixed(f.avg_us, 3);
    if (IsBandwidth(row)) {
      out << ",\"elapsed_s\":" << Fixed(row.elapsed_s, 6)
          << ",\"gbit_per_s\":" << Fixed(f.gbit_per_s, 4)
          << ",\"mops_per_s\":" << Fixed(f.mops_per_s, 6);
    }
    out << ",\"transport\":" << JsonString(row.transport)
        << ",\"link_restarted\":" << (row.link_restarted ? "true" : "false")
        << ",\"error\":" << JsonString(row.error) << "}";
  }
  out << "]}\n";
}

void WriteBenchRaw(const BenchReport& report, std::ostream& out) {
  out << "test,bytes,depth,index,ns\n";
  for (const BenchRow& row : report.rows) {
    for (size_t i = 0; i < row.samples_ns.size(); ++i) {
      out << row.test << ',' << row.bytes << ',' << row.depth << ',' << i << ','
          << row.samples_ns[i] << '\n';
    }
  }
}

bool ParseByteSize(const std::string& text, uint64_t& bytes) {
  uint64_t n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || n == 0) return false;
  int shift = 0;
  if (p != end) {
    if (p + 1 != end) return false;
    switch (*p) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        return false;
    }
  }
  if (n > (UINT64_MAX >> shift)) return false;
  bytes = n << shift;
  return true;
}

}  // namespace mcdma::tools
