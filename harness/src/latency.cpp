#include "harness/latency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "harness/files.hpp"

namespace mcdma::harness {
namespace {

struct SampleFileCloser {
  void operator()(FILE* f) const { fclose(f); }
};
using SampleFile = std::unique_ptr<FILE, SampleFileCloser>;

// Index of the nearest-rank `q` quantile among `n` sorted values (n > 0).
size_t Rank(size_t n, double q) {
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  return std::clamp<size_t>(rank, 1, n) - 1;
}

}  // namespace

Summary Summarize(std::vector<uint64_t> nanos) {
  Summary s;
  s.count = nanos.size();
  if (nanos.empty()) return s;
  std::sort(nanos.begin(), nanos.end());
  auto us = [&](double q) { return static_cast<double>(nanos[Rank(nanos.size(), q)]) / 1000.0; };
  double sum = 0;
  for (uint64_t v : nanos) sum += static_cast<double>(v);
  s.p50_us = us(0.50);
  s.p95_us = us(0.95);
  s.p99_us = us(0.99);
  s.min_us = static_cast<double>(nanos.front()) / 1000.0;
  s.max_us = static_cast<double>(nanos.back()) / 1000.0;
  s.mean_us = sum / static_cast<double>(nanos.size()) / 1000.0;
  return s;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[Rank(values.size(), q)];
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Status WriteSamples(const std::string& path, const std::vector<SampleSet>& sets) {
  SampleFile f(fopen(path.c_str(), "wb"));
  if (!f) return FileError("open", path);
  for (const SampleSet& set : sets) {
    uint64_t header[2] = {set.payload, set.nanos.size()};
    if (fwrite(header, sizeof(header), 1, f.get()) != 1 ||
        fwrite(set.nanos.data(), sizeof(uint64_t), set.nanos.size(), f.get()) != set.nanos.size()) {
      return FileError("write", path);
    }
  }
  // fclose reports a failed flush (disk full); checking it keeps a truncated
  // file from being read as a short, wrong sample set.
  if (fclose(f.release()) != 0) return FileError("close", path);
  return Status::Ok();
}

Result<std::vector<SampleSet>> ReadSamples(const std::string& path) {
  SampleFile f(fopen(path.c_str(), "rb"));
  if (!f) return FileError("open", path);
  std::vector<SampleSet> sets;
  uint64_t header[2];
  while (fread(header, sizeof(header), 1, f.get()) == 1) {
    // The count bounds an allocation: refuse anything no run could produce.
    if (header[1] > (1ull << 32)) return Status(Code::kInvalid, "corrupt sample file " + path);
    SampleSet set{header[0], std::vector<uint64_t>(header[1])};
    if (fread(set.nanos.data(), sizeof(uint64_t), set.nanos.size(), f.get()) != set.nanos.size()) {
      return Status(Code::kInvalid, "truncated sample file " + path);
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

Status WriteSampleCsv(const std::string& path, const std::vector<uint64_t>& nanos) {
  std::string text = "sample_ns\n";
  for (uint64_t ns : nanos) text += std::to_string(ns) + "\n";
  return WriteFile(path, text);
}

}  // namespace mcdma::harness
