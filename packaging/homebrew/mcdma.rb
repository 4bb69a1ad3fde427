# Homebrew formula for mcdma: mcdma-rpcd (the per-host link daemon), mcdmactl
# (its admin tool), the launchd plist and the example configuration.
#
# Homebrew installs formulae only from taps, so put this file in one:
#   brew tap-new --no-git mcdma/local
#   cp packaging/homebrew/mcdma.rb "$(brew --repository mcdma/local)/Formula/"
#   brew install --build-from-source mcdma/local/mcdma         # the release below
#   brew install --HEAD mcdma/local/mcdma                      # the main branch
#
# url and sha256 name a release tarball. The release process replaces both
# with the tagged release's URL and the SHA-256 of that tarball. Until then
# the sha256 below is a placeholder, not a checksum, and installing the
# release fails; --HEAD needs neither.
#
# Not tried on a Mac: nothing in this repository has been built or run on
# macOS (README.md, "Mac").
class Mcdma < Formula
  desc "Per-host RDMA link daemon (mcdma-rpcd) and admin tool (mcdmactl)"
  homepage "https://github.com/mcdma/mcdma"
  url "https://github.com/mcdma/mcdma/archive/refs/tags/v0.1.0.tar.gz"
  # Placeholder: the release process writes the tarball's SHA-256 here.
  sha256 "RELEASE_PROCESS_REPLACES_THIS_WITH_THE_TARBALL_SHA256"
  head "https://github.com/mcdma/mcdma.git", branch: "main"

  depends_on "cmake" => :build
  depends_on "ninja" => :build
  depends_on "pkgconf" => :build
  # The Python package's extension (bindings/python) is built, but
  # `cmake --install` does not install the Python package yet: build-only.
  depends_on "pybind11" => :build
  depends_on "python@3.12" => :build
  depends_on "boost"
  depends_on "cli11"
  depends_on "fmt"
  depends_on "grpc"
  depends_on "openssl@3"
  depends_on "protobuf"
  depends_on "prometheus-cpp"
  depends_on "spdlog"
  depends_on "tomlplusplus"
  depends_on "xxhash"
  # Linux hosts use the systemd unit (docs/operations.md).
  depends_on :macos

  def install
    args = %W[
      -DMCDMA_BUILD_TESTS=OFF
      -DMCDMA_BUILD_BENCH=OFF
      -DMCDMA_PYTHON=#{Formula["python@3.12"].opt_bin}/python3.12
      -DCMAKE_INSTALL_SYSCONFDIR=#{etc}
      -DCMAKE_INSTALL_LOCALSTATEDIR=#{var}
      -DMCDMA_LAUNCHD_DIR=#{pkgshare}/launchd
      -DMCDMA_LAUNCHD_BINDIR=#{opt_bin}
    ]
    # CMAKE_INSTALL_SYSCONFDIR/LOCALSTATEDIR: the config and log live in
    # Homebrew's etc/ and var/, which outlive upgrades; the install step
    # copies rpcd.toml.example to etc/mcdma/rpcd.toml only when there is none.
    # MCDMA_LAUNCHD_DIR: brew must not write outside its prefix, so the plist
    # goes under pkgshare instead of /Library/LaunchDaemons (caveats below).
    # MCDMA_LAUNCHD_BINDIR: the plist runs opt/mcdma/bin/mcdma-rpcd, which
    # survives upgrades.
    system "cmake", "-S", ".", "-B", "build", "-G", "Ninja", *args, *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"
  end

  def caveats
    <<~EOS
      Run the daemon as root, as a LaunchDaemon started at boot:
        sudo brew services start mcdma
      Pinned RDMA memory needs a large locked-memory limit, and only root
      may raise one. brew's service file sets no limits: check
      `sudo launchctl limit memlock` and `mcdmactl doctor`. The plist in
      #{opt_pkgshare}/launchd sets it unlimited (and the open-file limit to
      65536); to use it instead of brew services:
        sudo cp #{opt_pkgshare}/launchd/org.mcdma.rpcd.plist /Library/LaunchDaemons/
        sudo chown root:wheel /Library/LaunchDaemons/org.mcdma.rpcd.plist
        sudo launchctl bootstrap system /Library/LaunchDaemons/org.mcdma.rpcd.plist
      Load one or the other, not both: a second daemon finds the socket taken
      and exits, and launchd restarts it over and over.

      Configuration: #{etc}/mcdma/rpcd.toml (every key with its default:
      rpcd.toml.example next to it). Log: #{var}/log/mcdma-rpcd.log.
      Socket: /var/run/mcdma/rpcd.sock (the daemon creates the directory).
      Only root may connect until socket_group is set in rpcd.toml:
      socket_group = "staff" lets every local user's apps in.

      RDMA over Thunderbolt 5 between Macs (devices rdma_enN, profile
      apple-tb5) is off until enabled once from Recovery: start up in
      Recovery, open Terminal, run `rdma_ctl enable`, restart. Also turn off
      Thunderbolt Bridge (System Settings > Network). `mcdmactl doctor`
      checks both.
    EOS
  end

  service do
    run [opt_bin/"mcdma-rpcd", "--config", etc/"mcdma/rpcd.toml"]
    keep_alive true
    require_root true
    process_type :interactive
    throttle_interval 1
    log_path var/"log/mcdma-rpcd.log"
    error_log_path var/"log/mcdma-rpcd.log"
  end

  test do
    # A --HEAD build's version is HEAD-<commit>; the binaries print the
    # project's (CMakeLists.txt).
    assert_match(/\A\d+\.\d+\.\d+$/, shell_output("#{bin}/mcdma-rpcd --version"))
    assert_match "mcdmactl", shell_output("#{bin}/mcdmactl --help")
    assert_match "configuration OK",
                 shell_output("#{bin}/mcdma-rpcd --config #{etc}/mcdma/rpcd.toml.example --check")
  end
end
