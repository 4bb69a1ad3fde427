#include "harness/files.hpp"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace mcdma::harness {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};

}  // namespace

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) {
    path_ = tmpl;
  } else {
    error_ = "mkdtemp " + tmpl + ": " + strerror(errno);
  }
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;  // best effort: a leftover directory in /tmp is harmless
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

Status FileError(const char* what, const std::string& path) {
  return Status(Code::kSystem, std::string(what) + " " + path + ": " + strerror(errno));
}

Status WriteFile(const std::string& path, std::string_view text) {
  std::unique_ptr<FILE, FileCloser> f(fopen(path.c_str(), "w"));
  if (!f) return FileError("open", path);
  if (fwrite(text.data(), 1, text.size(), f.get()) != text.size()) return FileError("write", path);
  // fclose reports a failed flush (disk full); checking it keeps a
  // truncated file from passing for a whole one.
  if (fclose(f.release()) != 0) return FileError("close", path);
  return Status::Ok();
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  size_t nl = text.rfind('\n', end);
  size_t start = nl == std::string::npos ? 0 : nl + 1;
  return text.substr(start, end - start + 1);
}

std::string LastLines(const std::string& text, int lines) {
  std::vector<std::string> kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) kept.push_back(line);
  }
  std::string out;
  size_t first = kept.size() > static_cast<size_t>(lines) ? kept.size() - lines : 0;
  for (size_t i = first; i < kept.size(); ++i) out += kept[i] + "\n";
  return out;
}

std::string FindInPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Result<std::string> SelfExePath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n < 0)
    return Status(Code::kSystem, std::string("readlink(/proc/self/exe): ") + strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

std::string NextTo(const std::string& self, const std::string& relative) {
  return (std::filesystem::path(self).parent_path() / relative).lexically_normal().string();
}

}  // namespace mcdma::harness
