#include "report.hpp"

#include <string.h>

#include <cerrno>
#include <memory>

namespace bench {

namespace {

const Row* Find(const std::vector<Row>& rows, const std::string& mechanism, size_t payload) {
  for (const Row& r : rows) {
    if (r.mechanism == mechanism && r.payload == payload) return &r;
  }
  return nullptr;
}

// JSON strings here are our own labels and error messages; escaping the
// few characters that matter keeps an odd errno text from breaking the file.
std::string Quote(const std::string& s) {
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

std::string JsonNumberOrNull(const std::optional<double>& v, int decimals) {
  return v ? Fixed(*v, decimals) : "null";
}

}  // namespace

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string JsonQuote(const std::string& s) { return Quote(s); }

std::string FormatBytes(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::optional<double> RatioToReference(const std::vector<Row>& rows, const Row& row,
                                       const std::string& reference) {
  const Row* ref = Find(rows, reference, row.payload);
  if (!row.ok || ref == nullptr || !ref->ok || ref->summary.p50_us <= 0) return std::nullopt;
  return row.summary.p50_us / ref->summary.p50_us;
}

Verdict EvaluateTarget(const std::vector<Row>& rows, const std::vector<size_t>& payloads,
                       const Target& target) {
  Verdict v;
  v.measured = !payloads.empty();
  v.met = v.measured;
  std::string detail;
  for (size_t payload : payloads) {
    const Row* o = Find(rows, target.other, payload);
    std::optional<double> ratio = o ? RatioToReference(rows, *o, target.reference) : std::nullopt;
    if (!detail.empty()) detail += ", ";
    detail += FormatBytes(payload) + ": ";
    if (!ratio.has_value()) {
      v.measured = false;
      detail += "not measured";
      continue;
    }
    double r = ratio.value_or(0);
    detail += Fixed(r, target.at_most ? 2 : 1) + "x";
    if (target.at_most ? r > target.factor : r < target.factor) v.met = false;
  }
  if (!v.measured) v.met = false;
  v.description = target.description;
  v.line = "target: " + v.description + ": " +
           (v.met        ? "MET"
            : v.measured ? "NOT MET"
                         : "NOT MEASURED") +
           " (" + detail + ")";
  return v;
}

void PrintTable(FILE* out, const std::vector<Row>& rows, const std::string& reference) {
  fprintf(out, "%-34s %-10s %-8s %10s %10s %14s\n", "mechanism", "transport", "payload", "p50 us",
          "p99 us", "p50 / daemon");
  for (const Row& r : rows) {
    if (!r.ok) {
      fprintf(out, "%-34s %-10s %-8s FAILED: %s\n", r.label.c_str(), r.transport.c_str(),
              FormatBytes(r.payload).c_str(), r.error.c_str());
      continue;
    }
    std::optional<double> ratio = RatioToReference(rows, r, reference);
    std::string ratio_text = ratio ? Fixed(*ratio, 2) + "x" : "n/a";
    fprintf(out, "%-34s %-10s %-8s %10.2f %10.2f %14s\n", r.label.c_str(), r.transport.c_str(),
            FormatBytes(r.payload).c_str(), r.summary.p50_us, r.summary.p99_us, ratio_text.c_str());
  }
}

mcdma::Status WriteJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                        const std::string& reference, const std::vector<Verdict>& verdicts) {
  std::string j = "{\n";
  j += "  \"benchmark\": \"local_call\",\n";
  j += "  \"iterations\": " + std::to_string(info.iterations) + ",\n";
  j += "  \"warmup\": " + std::to_string(info.warmup) + ",\n";
  j += "  \"payloads\": [";
  for (size_t i = 0; i < info.payloads.size(); ++i)
    j += (i ? ", " : "") + std::to_string(info.payloads[i]);
  j += "],\n";
  j += "  \"daemon\": " + Quote(info.daemon_path) + ",\n";
  j += "  \"cpus\": " + std::to_string(info.cpus) + ",\n";
  j += "  \"kernel\": " + Quote(info.kernel) + ",\n";
  j += "  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    j += "    {\"mechanism\": " + Quote(r.mechanism) + ", \"label\": " + Quote(r.label) +
         ", \"transport\": " + Quote(r.transport) + ", \"payload\": " + std::to_string(r.payload) +
         ", \"ok\": " + (r.ok ? "true" : "false");
    if (r.ok) {
      const Summary& s = r.summary;
      j +=
          ", \"count\": " + std::to_string(s.count) + ", \"p50_us\": " + Fixed(s.p50_us, 3) +
          ", \"p99_us\": " + Fixed(s.p99_us, 3) + ", \"min_us\": " + Fixed(s.min_us, 3) +
          ", \"mean_us\": " + Fixed(s.mean_us, 3) + ", \"max_us\": " + Fixed(s.max_us, 3) +
          ", \"p50_ratio_to_daemon\": " + JsonNumberOrNull(RatioToReference(rows, r, reference), 3);
    } else {
      j += ", \"error\": " + Quote(r.error);
    }
    j += std::string("}") + (i + 1 < rows.size() ? "," : "") + "\n";
  }
  j += "  ],\n";
  j += "  \"targets\": [\n";
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const Verdict& v = verdicts[i];
    j += "    {\"description\": " + Quote(v.description) +
         ", \"measured\": " + std::string(v.measured ? "true" : "false") +
         ", \"met\": " + (v.met ? "true" : "false") + ", \"line\": " + Quote(v.line) + "}" +
         (i + 1 < verdicts.size() ? "," : "") + "\n";
  }
  j += "  ]\n";
  j += "}\n";

  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "w"), fclose);
  if (!f) return mcdma::Status(mcdma::Code::kSystem, "open " + path + ": " + strerror(errno));
  if (fwrite(j.data(), 1, j.size(), f.get()) != j.size() || fclose(f.release()) != 0) {
    return mcdma::Status(mcdma::Code::kSystem, "write " + path + ": " + strerror(errno));
  }
  return mcdma::Status::Ok();
}

}  // namespace bench
