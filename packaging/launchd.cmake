# The launchd plist (macOS) and, with it, the example config, the config and
# the log directory (packaging/CMakeLists.txt lists them).

# ON by default on macOS only; ON elsewhere too makes and installs the same
# files (e.g. to stage a macOS tree or inspect the configured plist).
if(APPLE)
  set(_mcdma_launchd_default ON)
else()
  set(_mcdma_launchd_default OFF)
endif()
option(MCDMA_INSTALL_LAUNCHD
       "Install the launchd plist, the example config and the log directory (default ON on macOS)"
       ${_mcdma_launchd_default})
# Homebrew builds set this inside the formula's prefix, because brew must
# not write outside it (packaging/homebrew/mcdma.rb: share/mcdma/launchd).
set(MCDMA_LAUNCHD_DIR "/Library/LaunchDaemons" CACHE PATH
    "Directory the launchd plist org.mcdma.rpcd.plist is installed to (macOS)")
# The directory the plist runs mcdma-rpcd from; empty means
# CMAKE_INSTALL_FULL_BINDIR. Homebrew sets its opt/ path, which survives
# upgrades (the versioned prefix the binaries are installed to does not).
set(MCDMA_LAUNCHD_BINDIR "" CACHE PATH
    "Directory of mcdma-rpcd in the launchd plist (empty: CMAKE_INSTALL_FULL_BINDIR)")
if(MCDMA_LAUNCHD_BINDIR)
  set(MCDMA_RPCD_BINDIR "${MCDMA_LAUNCHD_BINDIR}")
else()
  set(MCDMA_RPCD_BINDIR "${CMAKE_INSTALL_FULL_BINDIR}")
endif()

set(MCDMA_LOG_DIR "${CMAKE_INSTALL_FULL_LOCALSTATEDIR}/log")
set(MCDMA_LOG_FILE "${MCDMA_LOG_DIR}/mcdma-rpcd.log")

configure_file(${PROJECT_SOURCE_DIR}/launchd/org.mcdma.rpcd.plist.in
               ${CMAKE_CURRENT_BINARY_DIR}/org.mcdma.rpcd.plist @ONLY)
# The plist is configured on every OS, so ctest Packaging.LaunchdPlist
# checks it on Linux too; it is installed only with MCDMA_INSTALL_LAUNCHD.
if(MCDMA_BUILD_TESTS)
  add_test(NAME Packaging.LaunchdPlist
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_plist.py
            ${CMAKE_CURRENT_BINARY_DIR}/org.mcdma.rpcd.plist ${MCDMA_RPCD_BINDIR}/mcdma-rpcd
            ${MCDMA_CONFIG_DIR}/rpcd.toml)
  set_tests_properties(Packaging.LaunchdPlist PROPERTIES LABELS portability TIMEOUT 60)
endif()

if(MCDMA_INSTALL_LAUNCHD)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/org.mcdma.rpcd.plist
          DESTINATION ${MCDMA_LAUNCHD_DIR}
          PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ COMPONENT daemon)
  mcdma_install_config(daemon)
  install(DIRECTORY DESTINATION ${MCDMA_LOG_DIR} COMPONENT daemon)
endif()
