// libmcdma's default socket paths (mcdma/client.hpp): the platform seam's
// (platform/paths.hpp), so the daemon and apps agree on them.
#include "platform/paths.hpp"

#include "mcdma/client.hpp"

namespace mcdma {

std::string DefaultSocketPath() { return platform::DaemonSocketPath(); }

std::string DefaultClientSocketPath() { return platform::ClientSocketPath(); }

}  // namespace mcdma
