#include "relay_report.hpp"

#include <algorithm>
#include <optional>
#include <thread>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"

namespace mcdma::bench {

// Named, not anonymous: the target is a unity build (see link_rails.cpp).
namespace relay_report {

namespace {

using harness::Fixed;
using harness::JsonQuote;

// Bulk through 1 relay at least this many times the direct link.
constexpr double kRelayTarget = 0.9;
const char* const kCableDirections[] = {"a>b", "b>a", "b>c", "c>b", "c>d", "d>c"};

// "1.07 GB", "312 kB", "0 B" (10^3 steps).
std::string Decimal(uint64_t bytes) {
  if (bytes >= 1000000000) return Fixed(bytes / 1e9, 2) + " GB";
  if (bytes >= 1000000) return Fixed(bytes / 1e6, 1) + " MB";
  if (bytes >= 1000) return Fixed(bytes / 1e3, 1) + " kB";
  return std::to_string(bytes) + " B";
}

const std::vector<double>& Pick(const RelayBulk& b, int dir) {
  return dir == 0 ? b.write_mbps : b.read_mbps;
}

const RelayBulk* FindBulk(const RelayResults& r, const std::string& key) {
  if (key == "tcp") return r.tcp.ran ? &r.tcp : nullptr;
  for (const RelayBulk& b : r.bulk) {
    if (b.key == key) return &b;
  }
  return nullptr;
}

// Median of `num` over median of `den` in direction `dir`; none unless
// both ran and verified.
std::optional<double> BulkRatio(const RelayResults& r, const std::string& num,
                                const std::string& den, int dir) {
  const RelayBulk* a = FindBulk(r, num);
  const RelayBulk* b = FindBulk(r, den);
  if (a == nullptr || b == nullptr || !a->ok || !b->ok) return std::nullopt;
  double d = harness::Median(Pick(*b, dir));
  if (d <= 0) return std::nullopt;
  return harness::Median(Pick(*a, dir)) / d;
}

std::string Times(std::optional<double> x) { return x ? Fixed(*x, 2) + "x" : "-"; }
std::string JsonNumber(std::optional<double> x, int digits) {
  return x ? Fixed(*x, digits) : "null";
}

std::string Range(const std::vector<double>& v) {
  if (v.empty()) return "";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return "(" + Fixed(*lo, 1) + " - " + Fixed(*hi, 1) + ")";
}

void PrintBulkRow(const RelayResults& r, const RelayBulk& b) {
  for (int dir = 0; dir < 2; ++dir) {
    const char* direction = dir == 0 ? "write a->" : "read ->a";
    if (!b.ok) {
      if (dir == 0) printf("%-27s %-10s FAILED (below)\n", b.label.c_str(), direction);
      continue;
    }
    const bool daemon = b.key != "tcp";
    printf("%-27s %-10s %9.1f %-17s %9s %10s\n", dir == 0 ? b.label.c_str() : "", direction,
           harness::Median(Pick(b, dir)), ("  " + Range(Pick(b, dir))).c_str(),
           daemon ? Times(BulkRatio(r, b.key, "direct", dir)).c_str() : "-",
           daemon ? Times(BulkRatio(r, b.key, "tcp", dir)).c_str() : "-");
  }
}

std::string Relayed(const RelayCounters* c) {
  std::string out;
  for (size_t k = 0; k < 2; ++k) {
    out += k ? "; " : "";
    out += k ? "host-c " : "host-b ";
    if (!c[k].read) {
      out += "not read";
      continue;
    }
    out += "forwarded " + std::to_string(c[k].forwarded) + " messages (" +
           Decimal(c[k].forwarded_bytes) + "), dropped " + std::to_string(c[k].dropped);
  }
  return out;
}

void PrintBulk(const RelayOptions& o, const RelayResults& r) {
  if (r.bulk.empty() && !r.tcp.ran) return;
  printf(
      "\nbulk from host-a: %s per transfer, median of %d timed transfers after 1 untimed, each "
      "byte-verified (written, zeroed here, read back, checked); MB/s = 10^6 B/s; daemon: "
      "WriteBatch/ReadBatch in %s pieces into an export on the host\n",
      harness::FormatBytes(o.bulk_bytes).c_str(), o.repeats,
      harness::FormatBytes(o.op_bytes).c_str());
  printf("%-27s %-10s %9s %-17s %9s %10s\n", "to", "direction", "MB/s med", "  (min - max)",
         "x direct", "x raw TCP");
  for (const RelayBulk& b : r.bulk) PrintBulkRow(r, b);
  if (r.tcp.ran) PrintBulkRow(r, r.tcp);
  std::vector<const RelayBulk*> all;
  all.reserve(r.bulk.size() + 1);
  for (const RelayBulk& b : r.bulk) all.push_back(&b);
  if (r.tcp.ran) all.push_back(&r.tcp);
  for (const RelayBulk* b : all) {
    if (b->ran && !b->ok) printf("  %s: FAILED: %s\n", b->label.c_str(), b->error.c_str());
  }
  printf(
      "bytes each cable sent during each row (set-up included; the transfers alone move %s each "
      "way: %d rounds x %s):\n",
      Decimal(o.bulk_bytes * static_cast<uint64_t>(o.repeats + 1)).c_str(), o.repeats + 1,
      harness::FormatBytes(o.bulk_bytes).c_str());
  for (const RelayBulk* b : all) {
    if (b->cable_tx.size() != 6) {
      printf("  %-27s counters not read\n", b->label.c_str());
      continue;
    }
    std::string line;
    for (size_t k = 0; k < 6; ++k)
      line += (k ? ", " : "") + std::string(kCableDirections[k]) + " " + Decimal(b->cable_tx[k]);
    printf("  %-27s %s\n", b->label.c_str(), line.c_str());
  }
  if (r.bulk.size() > 1)
    printf("relays during the relayed bulk: %s\n", Relayed(r.bulk_relayed).c_str());
}

// The faster raw TCP ping-pong at `payload` (its p50), if any ran.
const harness::Row* RawCall(const RelayResults& r, size_t payload) {
  const harness::Row* best = nullptr;
  for (const char* key : {"tcp", "tcpspin"}) {
    const harness::Row* row = harness::FindRow(r.calls, key, payload);
    if (row != nullptr && row->ok &&
        (best == nullptr || row->summary.p50_us < best->summary.p50_us))
      best = row;
  }
  return best;
}

void PrintCalls(const RelayOptions& o, const RelayResults& r) {
  if (r.calls.empty()) return;
  printf(
      "\ncalls from host-a: echo, %d timed after %d warm-up per payload, every reply compared; "
      "+hop = p50 minus the p50 one hop nearer; raw TCP = the faster of the two ping-pongs\n",
      o.iterations, o.warmup);
  printf("%-29s %-8s %9s %9s %9s %9s %10s\n", "to", "payload", "p50 us", "p99 us", "+hop us",
         "x direct", "x raw TCP");
  for (const harness::Row& row : r.calls) {
    if (!row.ok) {
      printf("%-29s %-8s FAILED: %s\n", row.label.c_str(),
             harness::FormatBytes(row.payload).c_str(), row.error.c_str());
      continue;
    }
    std::string hop = "-", direct = "-", raw = "-";
    if (row.mechanism == "daemon-c" || row.mechanism == "daemon-d") {
      const harness::Row* nearer = harness::FindRow(
          r.calls, row.mechanism == "daemon-c" ? "daemon-b" : "daemon-c", row.payload);
      if (nearer != nullptr && nearer->ok)
        hop = (row.summary.p50_us >= nearer->summary.p50_us ? "+" : "") +
              Fixed(row.summary.p50_us - nearer->summary.p50_us, 1);
    }
    if (row.mechanism.rfind("daemon", 0) == 0) {
      direct = Times(harness::RatioToReference(r.calls, row, "daemon-b"));
      const harness::Row* tcp = RawCall(r, row.payload);
      if (tcp != nullptr) raw = Times(row.summary.p50_us / tcp->summary.p50_us);
    }
    printf("%-29s %-8s %9.1f %9.1f %9s %9s %10s\n", row.label.c_str(),
           harness::FormatBytes(row.payload).c_str(), row.summary.p50_us, row.summary.p99_us,
           hop.c_str(), direct.c_str(), raw.c_str());
  }
  for (size_t payload : o.payloads) {
    const harness::Row* b = harness::FindRow(r.calls, "daemon-b", payload);
    const harness::Row* c = harness::FindRow(r.calls, "daemon-c", payload);
    const harness::Row* d = harness::FindRow(r.calls, "daemon-d", payload);
    if (b == nullptr || c == nullptr || d == nullptr || !b->ok || !c->ok || !d->ok) continue;
    const double h1 = c->summary.p50_us - b->summary.p50_us;
    const double h2 = d->summary.p50_us - c->summary.p50_us;
    printf(
        "per added hop, %s: +%.1f us (relay b), +%.1f us (relay c), mean +%.1f us, on a direct "
        "call p50 of %.1f us\n",
        harness::FormatBytes(payload).c_str(), h1, h2, (h1 + h2) / 2, b->summary.p50_us);
  }
  printf("relays during the calls: %s\n", Relayed(r.calls_relayed).c_str());
}

}  // namespace

void Print(const RelayOptions& o, const RelayResults& r, std::vector<harness::Verdict>& verdicts) {
  printf(
      "link relay: host-a to host-b (direct), host-c (1 relay) and host-d (2 relays); %s; %u "
      "CPUs, %s\n",
      r.setup.c_str(), std::thread::hardware_concurrency(), harness::KernelName().c_str());
  printf("routes: %s; host-a's (mcdmactl fabric --json): %s\n",
         r.routes_after_s < 0 ? "NOT every host had one to every other in time"
                              : ("every host had one to every other " + Fixed(r.routes_after_s, 1) +
                                 " s after the daemons started")
                                    .c_str(),
         r.routes.c_str());
  PrintBulk(o, r);
  PrintCalls(o, r);

  printf("\n");
  if (!r.bulk.empty()) {
    for (const char* key : {"relay1", "relay2"}) {
      if (FindBulk(r, key) == nullptr) continue;
      printf("bulk %s / direct: write %s, read %s\n", key,
             Times(BulkRatio(r, key, "direct", 0)).c_str(),
             Times(BulkRatio(r, key, "direct", 1)).c_str());
    }
    if (r.tcp.ran) {
      printf("bulk direct daemon / raw TCP on the a-b cable: write %s, read %s\n",
             Times(BulkRatio(r, "direct", "tcp", 0)).c_str(),
             Times(BulkRatio(r, "direct", "tcp", 1)).c_str());
    }
    std::optional<double> w = BulkRatio(r, "relay1", "direct", 0);
    std::optional<double> rd = BulkRatio(r, "relay1", "direct", 1);
    verdicts.push_back(harness::MakeVerdict(
        "relay1_bulk_vs_direct",
        "bulk through 1 relay >= " + Fixed(kRelayTarget, 2) + "x the direct link (write and read)",
        w && rd, w && rd && *w >= kRelayTarget && *rd >= kRelayTarget,
        "write " + Times(w) + ", read " + Times(rd)));
  }
  for (const harness::Verdict& v : verdicts) printf("%s\n", v.line.c_str());
  if (!r.failures.empty()) {
    printf("failed (%zu):\n", r.failures.size());
    for (const std::string& f : r.failures) printf("  %s\n", f.c_str());
  }
}

std::string BulkJson(const RelayBulk& b) {
  std::string j = "    {\"key\": " + JsonQuote(b.key) + ", \"label\": " + JsonQuote(b.label) +
                  ", \"relays\": " + std::to_string(b.relays) +
                  ", \"ok\": " + (b.ok ? "true" : "false");
  auto list = [](const std::vector<double>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Fixed(v[i], 2);
    return out + "]";
  };
  if (b.ok) {
    j += ", \"write_mbps\": " + list(b.write_mbps) + ", \"read_mbps\": " + list(b.read_mbps) +
         ", \"write_mbps_median\": " + Fixed(harness::Median(b.write_mbps), 2) +
         ", \"read_mbps_median\": " + Fixed(harness::Median(b.read_mbps), 2);
  } else {
    j += ", \"error\": " + JsonQuote(b.error);
  }
  if (b.cable_tx.size() == 6) {
    j += ", \"cable_tx_bytes\": {";
    for (size_t k = 0; k < 6; ++k)
      j += (k ? ", " : "") + JsonQuote(kCableDirections[k]) + ": " + std::to_string(b.cable_tx[k]);
    j += "}";
  }
  return j + "}";
}

std::string CountersJson(const RelayCounters* c) {
  std::string j = "{";
  for (size_t k = 0; k < 2; ++k) {
    j += std::string(k ? ", " : "") + (k ? "\"host-c\": " : "\"host-b\": ");
    j += !c[k].read ? "null"
                    : "{\"forwarded\": " + std::to_string(c[k].forwarded) +
                          ", \"forwarded_bytes\": " + std::to_string(c[k].forwarded_bytes) +
                          ", \"dropped\": " + std::to_string(c[k].dropped) + "}";
  }
  return j + "}";
}

Status WriteJson(const std::string& path, const RelayOptions& o, const RelayResults& r,
                 const std::vector<harness::Verdict>& verdicts) {
  std::string j = "{\n  \"benchmark\": \"link-relay\",\n";
  j += harness::RunJson(o.iterations, o.warmup, o.payloads, r.daemon_path);
  j += "  \"setup\": " + JsonQuote(r.setup) + ",\n";
  j += "  \"routes\": " + JsonQuote(r.routes) + ",\n";
  j += "  \"routes_after_s\": " +
       (r.routes_after_s < 0 ? std::string("null") : Fixed(r.routes_after_s, 2)) + ",\n";
  j += "  \"rate\": " + JsonQuote(o.rate) + ",\n  \"bytes\": " + std::to_string(o.bulk_bytes) +
       ",\n  \"op_bytes\": " + std::to_string(o.op_bytes) +
       ",\n  \"repeats\": " + std::to_string(o.repeats) + ",\n  \"bulk\": [\n";
  std::vector<const RelayBulk*> all;
  all.reserve(r.bulk.size() + 1);
  for (const RelayBulk& b : r.bulk) all.push_back(&b);
  if (r.tcp.ran) all.push_back(&r.tcp);
  for (size_t i = 0; i < all.size(); ++i)
    j += BulkJson(*all[i]) + (i + 1 < all.size() ? "," : "") + "\n";
  j += "  ],\n  \"bulk_ratios\": {";
  const char* pairs[][2] = {{"relay1", "direct"}, {"relay2", "direct"}, {"direct", "tcp"}};
  for (size_t i = 0; i < 3; ++i) {
    j += std::string(i ? ", " : "") + "\"" + pairs[i][0] + "_over_" + pairs[i][1] +
         "\": {\"write\": " + JsonNumber(BulkRatio(r, pairs[i][0], pairs[i][1], 0), 3) +
         ", \"read\": " + JsonNumber(BulkRatio(r, pairs[i][0], pairs[i][1], 1), 3) + "}";
  }
  j += "},\n  \"bulk_relayed\": " + CountersJson(r.bulk_relayed) + ",\n";
  j += "  \"calls\": [\n" + harness::CallRowsJson(r.calls, "daemon-b") + "  ],\n";
  j += "  \"calls_per_hop\": [";
  bool first = true;
  for (size_t payload : o.payloads) {
    const harness::Row* b = harness::FindRow(r.calls, "daemon-b", payload);
    const harness::Row* c = harness::FindRow(r.calls, "daemon-c", payload);
    const harness::Row* d = harness::FindRow(r.calls, "daemon-d", payload);
    const harness::Row* raw = RawCall(r, payload);
    auto p50 = [](const harness::Row* row) -> std::optional<double> {
      if (row == nullptr || !row->ok) return std::nullopt;
      return row->summary.p50_us;
    };
    auto diff = [](std::optional<double> x, std::optional<double> y) -> std::optional<double> {
      if (!x || !y) return std::nullopt;
      return *x - *y;
    };
    std::optional<double> over_raw;
    const std::optional<double> direct_p50 = p50(b);
    const std::optional<double> raw_p50 = p50(raw);
    if (direct_p50 && raw_p50 && *raw_p50 > 0) over_raw = *direct_p50 / *raw_p50;
    j += std::string(first ? "\n" : ",\n") + "    {\"payload\": " + std::to_string(payload) +
         ", \"direct_p50_us\": " + JsonNumber(p50(b), 3) +
         ", \"relay_b_added_p50_us\": " + JsonNumber(diff(p50(c), p50(b)), 3) +
         ", \"relay_c_added_p50_us\": " + JsonNumber(diff(p50(d), p50(c)), 3) +
         ", \"raw_tcp_p50_us\": " + JsonNumber(p50(raw), 3) +
         ", \"direct_over_raw_tcp\": " + JsonNumber(over_raw, 3) + "}";
    first = false;
  }
  j += "\n  ],\n  \"calls_relayed\": " + CountersJson(r.calls_relayed) + ",\n";
  j += "  \"verdicts\": [\n" + harness::VerdictsJson(verdicts) + "  ],\n  \"failures\": [";
  for (size_t i = 0; i < r.failures.size(); ++i) j += (i ? ", " : "") + JsonQuote(r.failures[i]);
  j += "]\n}\n";
  return harness::WriteFile(path, j);
}

}  // namespace relay_report

void PrintRelayReport(const RelayOptions& o, const RelayResults& r,
                      std::vector<harness::Verdict>& verdicts) {
  relay_report::Print(o, r, verdicts);
}

Status WriteRelayJson(const std::string& path, const RelayOptions& o, const RelayResults& r,
                      const std::vector<harness::Verdict>& verdicts) {
  return relay_report::WriteJson(path, o, r, verdicts);
}

}  // namespace mcdma::bench
