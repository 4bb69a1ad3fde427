# The systemd service (Linux), with MCDMA_INSTALL_SYSTEMD (default ON on
# Linux), `cmake --install` puts, under the prefix:
#   lib/systemd/system/mcdma-rpcd.service   from systemd/mcdma-rpcd.service
#   lib/sysusers.d/mcdma.conf               from systemd/mcdma.sysusers
#   lib/tmpfiles.d/mcdma-rpcd.conf          from systemd/mcdma-rpcd.tmpfiles
# and the config (config.cmake). systemd reads units, sysusers.d and
# tmpfiles.d from /usr/lib (and /lib): the prefix /usr (the Debian packages)
# puts them where it looks. Under another prefix they are staged for a
# package or copied by hand (docs/operations.md).
#
# The unit in the source tree names /usr/bin/mcdma-rpcd and
# /etc/mcdma/rpcd.toml; the installed one names this build's
# CMAKE_INSTALL_FULL_BINDIR and config directory, fixed when CMake
# configures the build (as the launchd plist).
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(_mcdma_systemd_default ON)
else()
  set(_mcdma_systemd_default OFF)
endif()
option(MCDMA_INSTALL_SYSTEMD
       "Install the systemd unit, sysusers.d and tmpfiles.d files and the config (default ON on Linux)"
       ${_mcdma_systemd_default})
set(MCDMA_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Directory of the systemd unit, relative to the prefix (or absolute)")

file(READ ${PROJECT_SOURCE_DIR}/systemd/mcdma-rpcd.service _mcdma_unit)
string(REPLACE "/usr/bin/mcdma-rpcd" "${CMAKE_INSTALL_FULL_BINDIR}/mcdma-rpcd"
       _mcdma_unit "${_mcdma_unit}")
string(REPLACE "/etc/mcdma/rpcd.toml" "${MCDMA_CONFIG_DIR}/rpcd.toml" _mcdma_unit "${_mcdma_unit}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/mcdma-rpcd.service.new "${_mcdma_unit}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/mcdma-rpcd.service.new
               ${CMAKE_CURRENT_BINARY_DIR}/mcdma-rpcd.service COPYONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/systemd/mcdma-rpcd.service)

if(MCDMA_INSTALL_SYSTEMD)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mcdma-rpcd.service
          DESTINATION ${MCDMA_SYSTEMD_UNIT_DIR} COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/mcdma.sysusers
          DESTINATION lib/sysusers.d RENAME mcdma.conf COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/mcdma-rpcd.tmpfiles
          DESTINATION lib/tmpfiles.d RENAME mcdma-rpcd.conf COMPONENT daemon)
  mcdma_install_config(daemon)
endif()
