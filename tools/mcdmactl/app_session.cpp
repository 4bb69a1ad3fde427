#include "app_session.hpp"

#include <chrono>

namespace mcdma::tools {

std::unique_ptr<Client> ConnectApp(ClientOptions options, const std::string& socket, int timeout_ms,
                                   const char* who, std::ostream& err) {
  options.socket = socket;
  options.connect_timeout = std::chrono::milliseconds(timeout_ms);
  auto client = Client::Connect(options);
  if (!client.ok()) {
    err << who << ": " << client.status().ToString() << '\n';
    return nullptr;
  }
  return std::move(*client);
}

}  // namespace mcdma::tools
