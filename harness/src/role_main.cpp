#include "harness/role_main.hpp"

#include <signal.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace mcdma::harness {
namespace {

std::mutex g_say_mu;

}  // namespace

bool Args::Parse(const std::string& program, int argc, char** argv, Args& out, std::string& error) {
  out.program_ = program;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) {
      error = "unexpected argument '" + a + "'";
      return false;
    }
    std::string key = a.substr(2);
    if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      out.values_[key] = argv[++i];
    } else {
      out.values_[key] = "1";
    }
  }
  return true;
}

std::string Args::Str(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

uint64_t Args::U64(const std::string& key, uint64_t def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : std::stoull(it->second, nullptr, 0);
}

double Args::Double(const std::string& key, double def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : std::stod(it->second);
}

std::string Args::Need(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    std::fprintf(stderr, "%s: missing --%s\n", program_.c_str(), key.c_str());
    std::exit(2);
  }
  return it->second;
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void Say(const char* fmt, ...) {
  std::lock_guard lock(g_say_mu);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int RoleMain(const char* program, const char* usage, const std::map<std::string, Role>& roles,
             int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s %s\n", program, usage);
    return 2;
  }
  std::string role = argv[1];
  Args args;
  std::string error;
  if (!Args::Parse(program, argc - 2, argv + 2, args, error)) {
    std::fprintf(stderr, "%s %s: %s\n", program, role.c_str(), error.c_str());
    return 2;
  }
  auto it = roles.find(role);
  if (it == roles.end()) {
    std::fprintf(stderr, "%s: unknown role '%s'\n", program, role.c_str());
    return 2;
  }
  return it->second(args);
}

}  // namespace mcdma::harness
