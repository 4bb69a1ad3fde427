#include "harness/report.hpp"

#include <algorithm>
#include <thread>

#include "harness/endpoint.hpp"

namespace mcdma::harness {

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

// JSON strings here are our own labels and error messages; escaping the
// few characters that matter keeps an odd errno text from breaking a file.
std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string CsvField(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') {
      out += "\"\"";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonList(const std::vector<size_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string RunJson(int iterations, int warmup, const std::vector<size_t>& payloads,
                    const std::string& daemon_path) {
  return "  \"iterations\": " + std::to_string(iterations) +
         ",\n  \"warmup\": " + std::to_string(warmup) + ",\n  \"payloads\": " + JsonList(payloads) +
         ",\n  \"daemon\": " + JsonQuote(daemon_path) +
         ",\n  \"cpus\": " + std::to_string(std::thread::hardware_concurrency()) +
         ",\n  \"kernel\": " + JsonQuote(KernelName()) + ",\n";
}

const Row* FindRow(const std::vector<Row>& rows, const std::string& mechanism, size_t payload) {
  for (const Row& r : rows) {
    if (r.mechanism == mechanism && r.payload == payload) return &r;
  }
  return nullptr;
}

std::optional<double> RatioToReference(const std::vector<Row>& rows, const Row& row,
                                       const std::string& reference) {
  const Row* ref = FindRow(rows, reference, row.payload);
  if (!row.ok || ref == nullptr || !ref->ok || ref->summary.p50_us <= 0) return std::nullopt;
  return row.summary.p50_us / ref->summary.p50_us;
}

void PrintCallTable(FILE* out, const std::vector<Row>& rows, const std::string& reference,
                    int label_width, const std::vector<std::string>& skipped) {
  const std::string ratio_head = "p50 / " + reference;
  fprintf(out, "%-*s %-10s %-8s %10s %10s %14s\n", label_width, "mechanism", "transport", "payload",
          "p50 us", "p99 us", ratio_head.c_str());
  for (const Row& r : rows) {
    if (!r.ok) {
      bool skip = std::find(skipped.begin(), skipped.end(), r.mechanism) != skipped.end();
      fprintf(out, "%-*s %-10s %-8s %s: %s\n", label_width, r.label.c_str(), r.transport.c_str(),
              FormatBytes(r.payload).c_str(), skip ? "SKIPPED" : "FAILED", r.error.c_str());
      continue;
    }
    std::optional<double> ratio = RatioToReference(rows, r, reference);
    std::string ratio_text = ratio ? Fixed(*ratio, 2) + "x" : "n/a";
    fprintf(out, "%-*s %-10s %-8s %10.2f %10.2f %14s\n", label_width, r.label.c_str(),
            r.transport.c_str(), FormatBytes(r.payload).c_str(), r.summary.p50_us, r.summary.p99_us,
            ratio_text.c_str());
  }
}

std::string CallRowsJson(const std::vector<Row>& rows, const std::string& reference) {
  std::string j;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    j += "    {\"mechanism\": " + JsonQuote(r.mechanism) + ", \"label\": " + JsonQuote(r.label) +
         ", \"transport\": " + JsonQuote(r.transport) +
         ", \"payload\": " + std::to_string(r.payload) + ", \"ok\": " + (r.ok ? "true" : "false");
    if (r.ok) {
      const Summary& s = r.summary;
      j += ", \"count\": " + std::to_string(s.count) + ", \"p50_us\": " + Fixed(s.p50_us, 3) +
           ", \"p99_us\": " + Fixed(s.p99_us, 3) + ", \"min_us\": " + Fixed(s.min_us, 3) +
           ", \"mean_us\": " + Fixed(s.mean_us, 3) + ", \"max_us\": " + Fixed(s.max_us, 3);
      if (!reference.empty()) {
        std::optional<double> ratio = RatioToReference(rows, r, reference);
        j += ", \"p50_ratio_to_" + reference + "\": " + (ratio ? Fixed(*ratio, 3) : "null");
      }
    } else {
      j += ", \"error\": " + JsonQuote(r.error);
    }
    j += std::string("}") + (i + 1 < rows.size() ? "," : "") + "\n";
  }
  return j;
}

Verdict MakeVerdict(std::string key, std::string description, bool measured, bool met,
                    const std::string& detail) {
  Verdict v{std::move(key), std::move(description), measured, measured && met, ""};
  v.line = "target: " + v.description + ": " +
           (v.met ? "MET" : (v.measured ? "NOT MET" : "NOT MEASURED")) + " (" + detail + ")";
  return v;
}

std::string VerdictsJson(const std::vector<Verdict>& verdicts) {
  std::string j;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const Verdict& v = verdicts[i];
    j += "    {";
    if (!v.key.empty()) j += "\"key\": " + JsonQuote(v.key) + ", ";
    j += "\"description\": " + JsonQuote(v.description) +
         ", \"measured\": " + (v.measured ? "true" : "false") +
         ", \"met\": " + (v.met ? "true" : "false") + ", \"line\": " + JsonQuote(v.line) + "}" +
         (i + 1 < verdicts.size() ? "," : "") + "\n";
  }
  return j;
}

}  // namespace mcdma::harness
