// mcdma_soak's entry point: the mode and its arguments (soak.hpp).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "soak.hpp"

namespace mcdma::soak {

bool Args::Parse(int argc, char** argv, Args& out, std::string& error) {
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
    std::fprintf(stderr, "mcdma_soak: missing --%s\n", key.c_str());
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

}  // namespace mcdma::soak

int main(int argc, char** argv) {
  using namespace mcdma::soak;
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    std::fprintf(stderr, "usage: mcdma_soak run --minutes M [--seed N] | app --socket S ...\n");
    return 2;
  }
  Args args;
  std::string error;
  if (!Args::Parse(argc - 2, argv + 2, args, error)) {
    std::fprintf(stderr, "mcdma_soak: %s\n", error.c_str());
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "run") return RunDriver(args);
  if (mode == "app") return RunApp(args);
  std::fprintf(stderr, "mcdma_soak: unknown mode '%s'\n", mode.c_str());
  return 2;
}
