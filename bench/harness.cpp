#include "harness.hpp"

#include <poll.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>

namespace bench {

mcdma::Status FileError(const char* what, const std::string& path) {
  return mcdma::Status(mcdma::Code::kSystem,
                       std::string(what) + " " + path + ": " + strerror(errno));
}

void FillPattern(std::span<std::byte> request) {
  for (size_t i = 0; i < request.size(); ++i)
    request[i] = static_cast<std::byte>((i * 7 + 1) & 0xff);
}

void StampIteration(std::span<std::byte> request, uint64_t iteration) {
  std::memcpy(request.data(), &iteration, std::min(request.size(), sizeof(iteration)));
}

mcdma::Status WriteSamples(const std::string& path, const std::vector<SampleSet>& sets) {
  File f(fopen(path.c_str(), "wb"));
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
  return mcdma::Status::Ok();
}

mcdma::Result<std::vector<SampleSet>> ReadSamples(const std::string& path) {
  File f(fopen(path.c_str(), "rb"));
  if (!f) return FileError("open", path);
  std::vector<SampleSet> sets;
  uint64_t header[2];
  while (fread(header, sizeof(header), 1, f.get()) == 1) {
    // The count bounds an allocation: refuse anything no run could produce.
    if (header[1] > (1ull << 32))
      return mcdma::Status(mcdma::Code::kInvalid, "corrupt sample file " + path);
    SampleSet set{header[0], std::vector<uint64_t>(header[1])};
    if (fread(set.nanos.data(), sizeof(uint64_t), set.nanos.size(), f.get()) != set.nanos.size()) {
      return mcdma::Status(mcdma::Code::kInvalid, "truncated sample file " + path);
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

void SignalReady(int ready_fd) {
  char byte = 'R';
  ssize_t n;
  do {
    n = write(ready_fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(ready_fd);
}

void SignalReadyPort(int ready_fd, uint16_t port) {
  std::string text = "P";
  text += std::to_string(port);
  ssize_t n;
  do {
    n = write(ready_fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  close(ready_fd);
}

void WaitForLifeline(int lifeline_fd, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return;
    pollfd p{lifeline_fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc != 0) return;  // EOF / hang-up: the orchestrator says stop (or died)
  }
}

Summary Summarize(std::vector<uint64_t> nanos) {
  Summary s;
  s.count = nanos.size();
  if (nanos.empty()) return s;
  std::sort(nanos.begin(), nanos.end());
  auto rank = [&](double q) {
    size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(nanos.size())));
    return static_cast<double>(nanos[std::clamp<size_t>(idx, 1, nanos.size()) - 1]) / 1000.0;
  };
  double sum = 0;
  for (uint64_t v : nanos) sum += static_cast<double>(v);
  s.p50_us = rank(0.50);
  s.p95_us = rank(0.95);
  s.p99_us = rank(0.99);
  s.min_us = static_cast<double>(nanos.front()) / 1000.0;
  s.max_us = static_cast<double>(nanos.back()) / 1000.0;
  s.mean_us = sum / static_cast<double>(nanos.size()) / 1000.0;
  return s;
}

std::string KernelName() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release;
}

int GuardedMain(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: %s\n", program, e.what());
  } catch (...) {
    fprintf(stderr, "%s: unknown exception\n", program);
  }
  return 1;
}

}  // namespace bench
