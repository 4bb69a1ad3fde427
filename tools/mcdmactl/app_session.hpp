// The app session a command opens of its own to the daemon (bench, trace,
// validate), beside its Admin requests.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "mcdma/client.hpp"

namespace mcdma::tools {

// Connects with `options` (app name and anything else set by the caller)
// to `socket`, its connect deadline `timeout_ms`. Null, the error printed
// after "`who`: ", when the daemon does not take it.
std::unique_ptr<Client> ConnectApp(ClientOptions options, const std::string& socket, int timeout_ms,
                                   const char* who, std::ostream& err);

}  // namespace mcdma::tools
