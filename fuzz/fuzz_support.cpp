#include "fuzz_support.hpp"

#include <fcntl.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace mcdma::fuzz {

void QuietLogs() {
  auto sink = std::make_shared<spdlog::sinks::null_sink_mt>();
  for (const char* name : {"daemon", "engine", "control", "peer"}) {
    if (spdlog::get(name)) continue;
    auto logger = std::make_shared<spdlog::logger>(name, sink);
    logger->set_level(spdlog::level::off);
    spdlog::register_logger(logger);
  }
}

const std::string& ScratchDir() {
  // Never destroyed, so the exit handler that removes it can still read it.
  static const std::string* dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mcdma-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    auto* d = new std::string(tmpl);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return d;
  }();
  return *dir;
}

bool WriteFile(const std::string& path, std::span<const uint8_t> data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == data.size() && fchmod(fd, 0600) == 0;
  close(fd);
  return ok;
}

}  // namespace mcdma::fuzz
