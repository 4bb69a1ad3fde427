#include "fabric/fabric_file.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "fabric/host_record.hpp"

namespace mcdma::daemon::fabric {
namespace {

Status BadFile(const std::string& source, const std::string& what) {
  return Status(Code::kInvalid, source + ": " + what);
}

Result<std::vector<std::string>> Strings(const toml::node* node, const std::string& where,
                                         const std::string& source) {
  const toml::array* a = node == nullptr ? nullptr : node->as_array();
  if (a == nullptr) return BadFile(source, where + ": expected an array of strings");
  std::vector<std::string> out;
  for (const auto& v : *a) {
    const auto* s = v.as_string();
    if (s == nullptr) return BadFile(source, where + ": expected an array of strings");
    out.push_back(s->get());
  }
  return out;
}

}  // namespace

Result<FabricFile> ParseFabricFile(const std::string& text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "line " << e.source().begin.line << ": " << e.description();
    return BadFile(source, msg.str());
  }
  for (const auto& [key, node] : doc) {
    if (key != "host" && key != "cable")
      return BadFile(source,
                     "unknown key '" + std::string(key.str()) + "' (expected [[host]], [[cable]])");
  }
  FabricFile out;
  std::set<std::string> ids;
  if (const auto* node = doc.get("host")) {
    const toml::array* list = node->as_array();
    if (list == nullptr) return BadFile(source, "host: expected [[host]] tables");
    if (list->size() > kMaxHosts)
      return BadFile(source, std::to_string(list->size()) + " hosts (at most " +
                                 std::to_string(kMaxHosts) + ")");
    for (size_t i = 0; i < list->size(); ++i) {
      std::string where = "host[" + std::to_string(i) + "]";
      const toml::table* t = (*list)[i].as_table();
      if (t == nullptr) return BadFile(source, where + ": expected a table");
      v1::FabricHostRecord r;
      for (const auto& [k, v] : *t) {
        if (k == "id") {
          if (!v.is_string()) return BadFile(source, where + ".id: expected a string");
          r.set_host(v.as_string()->get());
        } else if (k == "addresses") {
          MCDMA_ASSIGN_OR_RETURN(auto addrs, Strings(&v, where + ".addresses", source));
          for (auto& a : addrs) r.add_addresses(std::move(a));
        } else {
          return BadFile(source, where + ": unknown key '" + std::string(k.str()) + "'");
        }
      }
      if (r.host().empty()) return BadFile(source, where + ".id: missing");
      if (r.addresses().empty()) return BadFile(source, where + ".addresses: missing");
      if (Status st = CheckRecord(r); !st.ok()) return BadFile(source, where + ": " + st.message());
      if (!ids.insert(r.host()).second)
        return BadFile(source, where + ".id: '" + r.host() + "' is listed twice");
      out.hosts.push_back(std::move(r));
    }
  }
  if (const auto* node = doc.get("cable")) {
    const toml::array* list = node->as_array();
    if (list == nullptr) return BadFile(source, "cable: expected [[cable]] tables");
    if (list->size() > kMaxCables)
      return BadFile(source, std::to_string(list->size()) + " cables (at most " +
                                 std::to_string(kMaxCables) + ")");
    std::set<std::pair<std::string, std::string>> seen;
    for (size_t i = 0; i < list->size(); ++i) {
      std::string where = "cable[" + std::to_string(i) + "]";
      const toml::table* t = (*list)[i].as_table();
      if (t == nullptr) return BadFile(source, where + ": expected a table");
      for (const auto& [k, v] : *t) {
        if (k != "hosts")
          return BadFile(source, where + ": unknown key '" + std::string(k.str()) + "'");
      }
      MCDMA_ASSIGN_OR_RETURN(auto ends, Strings(t->get("hosts"), where + ".hosts", source));
      if (ends.size() != 2 || ends[0] == ends[1])
        return BadFile(source, where + ".hosts: expected two different host ids");
      for (const auto& e : ends) {
        if (ids.count(e) == 0)
          return BadFile(
              source,
              where.append(".hosts: '").append(e).append("' is not a [[host]] of the file"));
      }
      std::sort(ends.begin(), ends.end());
      if (!seen.emplace(ends[0], ends[1]).second)
        return BadFile(source, where + ": " + ends[0] + " - " + ends[1] + " is listed twice");
      out.cables.emplace_back(ends[0], ends[1]);
    }
  }
  if (out.hosts.empty()) return BadFile(source, "no [[host]] tables");
  return out;
}

Result<FabricFile> LoadFabricFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kInvalid, "fabric.file: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (4u << 20))
    return Status(Code::kInvalid, "fabric.file: '" + path + "' is over 4 MiB");
  return ParseFabricFile(text.str(), path);
}

}  // namespace mcdma::daemon::fabric
