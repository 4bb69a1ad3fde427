#include "validate/validate_report.hpp"

#include <cstdio>

#include "bench_report.hpp"
#include "render.hpp"

namespace mcdma::tools::validate {
namespace {

BenchFigures Figures(const std::vector<uint64_t>& samples) {
  BenchRow row;
  row.samples_ns = samples;
  return Summarize(row);
}

std::string Fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The perftest row a daemon row is compared with: the two-sided ping-pong
// for calls, the one-sided one for WRITE and READ.
const char* PerftestFor(const std::string& test) {
  if (test == "call") return "ib_send_lat";
  if (test == "write") return "ib_write_lat";
  if (test == "read") return "ib_read_lat";
  return nullptr;
}

const LatencyRow* Find(const Report& r, const std::string& test, uint64_t bytes) {
  for (const LatencyRow& row : r.latency) {
    if (row.test == test && row.bytes == bytes && row.error.empty() && !row.samples_ns.empty())
      return &row;
  }
  return nullptr;
}

}  // namespace

bool Report::ok() const {
  for (const Check& c : checks) {
    if (!c.ok) return false;
  }
  for (const LatencyRow& row : latency) {
    if (!row.error.empty()) return false;
  }
  for (const BandwidthRow& row : bandwidth) {
    if (!row.error.empty()) return false;
  }
  return true;
}

void RenderText(const Report& r, std::ostream& out) {
  out << "mcdma validate: " << r.host << " -> " << r.peer << "\n";
  for (const std::string& c : r.conditions) out << "  " << c << "\n";
  out << "\nchecks\n";
  for (const Check& c : r.checks) {
    out << "  " << (c.ok ? "PASS " : "FAIL ") << c.name;
    if (!c.detail.empty()) out << ": " << c.detail;
    out << "\n";
  }
  char line[240];
  out << "\nlatency, QD1 round trip (us = microseconds; perftest's ping-pong samples x2)\n";
  std::snprintf(line, sizeof line, "  %-14s %-28s %8s %9s %9s %9s %9s %7s\n", "test", "rail",
                "bytes", "p50 us", "p99 us", "max us", "samples", "x p50");
  out << line;
  for (const LatencyRow& row : r.latency) {
    if (!row.error.empty()) {
      std::snprintf(line, sizeof line, "  %-14s %-28s %8llu  error: ", row.test.c_str(),
                    row.rail.c_str(), static_cast<unsigned long long>(row.bytes));
      out << line << row.error << "\n";
      continue;
    }
    BenchFigures f = Figures(row.samples_ns);
    std::string ratio = "-";
    if (const char* pt = PerftestFor(row.test)) {
      const LatencyRow* base = Find(r, pt, row.bytes);
      if (base != nullptr) {
        BenchFigures b = Figures(base->samples_ns);
        if (b.median_us > 0) ratio = Fixed(f.median_us / b.median_us, 2) + "x";
      }
    }
    std::snprintf(line, sizeof line, "  %-14s %-28s %8llu %9s %9s %9s %9llu %7s\n",
                  row.test.c_str(), row.rail.c_str(), static_cast<unsigned long long>(row.bytes),
                  Fixed(f.median_us, 1).c_str(), Fixed(f.p99_us, 1).c_str(),
                  Fixed(f.max_us, 1).c_str(), static_cast<unsigned long long>(f.count),
                  ratio.c_str());
    out << line;
  }
  out << "  (x p50: the daemons' p50 over perftest's: call/ib_send_lat, write/ib_write_lat, "
         "read/ib_read_lat, same size)\n";
  out << "\nbandwidth (MB/s = 10^6 B/s)\n";
  std::snprintf(line, sizeof line, "  %-14s %-28s %10s %12s %10s %7s\n", "test", "rail", "op bytes",
                "total bytes", "MB/s", "x");
  out << line;
  for (const BandwidthRow& row : r.bandwidth) {
    if (!row.error.empty()) {
      std::snprintf(line, sizeof line, "  %-14s %-28s %10llu  error: ", row.test.c_str(),
                    row.rail.c_str(), static_cast<unsigned long long>(row.op_bytes));
      out << line << row.error << "\n";
      continue;
    }
    std::string ratio = "-";
    const std::string base_test = row.test == "write"  ? "ib_write_bw"
                                  : row.test == "read" ? "ib_read_bw"
                                                       : "";
    for (const BandwidthRow& b : r.bandwidth) {
      if (!base_test.empty() && b.test == base_test && b.error.empty() && b.mbps > 0) {
        ratio = Fixed(row.mbps / b.mbps, 2) + "x";
        break;
      }
    }
    std::snprintf(line, sizeof line, "  %-14s %-28s %10llu %12llu %10s %7s\n", row.test.c_str(),
                  row.rail.c_str(), static_cast<unsigned long long>(row.op_bytes),
                  static_cast<unsigned long long>(row.total_bytes), Fixed(row.mbps, 1).c_str(),
                  ratio.c_str());
    out << line;
  }
  if (!r.notes.empty()) {
    out << "\nnotes\n";
    for (const std::string& n : r.notes) out << "  " << n << "\n";
  }
  out << "\nverdict: " << (r.ok() ? "PASS" : "FAIL") << "\n";
}

void RenderJson(const Report& r, std::ostream& out) {
  out << "{\"host\":" << JsonString(r.host) << ",\"peer\":" << JsonString(r.peer)
      << ",\"verdict\":" << JsonString(r.ok() ? "PASS" : "FAIL") << ",\"conditions\":[";
  for (size_t i = 0; i < r.conditions.size(); ++i)
    out << (i ? "," : "") << JsonString(r.conditions[i]);
  out << "],\"checks\":[";
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const Check& c = r.checks[i];
    out << (i ? "," : "") << "{\"name\":" << JsonString(c.name)
        << ",\"ok\":" << (c.ok ? "true" : "false") << ",\"detail\":" << JsonString(c.detail) << "}";
  }
  out << "],\"latency\":[";
  for (size_t i = 0; i < r.latency.size(); ++i) {
    const LatencyRow& row = r.latency[i];
    BenchFigures f = Figures(row.samples_ns);
    out << (i ? "," : "") << "{\"test\":" << JsonString(row.test)
        << ",\"rail\":" << JsonString(row.rail) << ",\"bytes\":" << row.bytes
        << ",\"samples\":" << f.count << ",\"p50_us\":" << f.median_us << ",\"p99_us\":" << f.p99_us
        << ",\"max_us\":" << f.max_us << ",\"error\":" << JsonString(row.error) << "}";
  }
  out << "],\"bandwidth\":[";
  for (size_t i = 0; i < r.bandwidth.size(); ++i) {
    const BandwidthRow& row = r.bandwidth[i];
    out << (i ? "," : "") << "{\"test\":" << JsonString(row.test)
        << ",\"rail\":" << JsonString(row.rail) << ",\"op_bytes\":" << row.op_bytes
        << ",\"total_bytes\":" << row.total_bytes << ",\"mbps\":" << row.mbps
        << ",\"error\":" << JsonString(row.error) << "}";
  }
  out << "],\"notes\":[";
  for (size_t i = 0; i < r.notes.size(); ++i) out << (i ? "," : "") << JsonString(r.notes[i]);
  out << "]}\n";
}

void WriteSamples(const Report& r, std::ostream& out) {
  out << "test,rail,bytes,index,ns\n";
  for (const LatencyRow& row : r.latency) {
    for (size_t i = 0; i < row.samples_ns.size(); ++i)
      out << row.test << ',' << row.rail << ',' << row.bytes << ',' << i << ',' << row.samples_ns[i]
          << '\n';
  }
}

}  // namespace mcdma::tools::validate
