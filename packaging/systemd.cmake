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
# /etc/mcdma/rpcd.toml; the installed one names the binary directory and the
# config directory (config.cmake) of the prefix it is installed under,
# decided when it is installed: `cmake --install --prefix /usr` and the
# Debian packages, built from a tree configured for /usr/local, get /usr/bin
# and /etc.
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

if(MCDMA_INSTALL_SYSTEMD)
  if(IS_ABSOLUTE "${MCDMA_SYSTEMD_UNIT_DIR}")
    set(_mcdma_unit_dest "${MCDMA_SYSTEMD_UNIT_DIR}")
  else()
    set(_mcdma_unit_dest "\${CMAKE_INSTALL_PREFIX}/${MCDMA_SYSTEMD_UNIT_DIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
    set(_mcdma_unit_bindir "${CMAKE_INSTALL_BINDIR}")
  else()
    set(_mcdma_unit_bindir "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}")
  endif()
  set(_mcdma_unit_out "${CMAKE_CURRENT_BINARY_DIR}/install-time/mcdma-rpcd.service")
  install(CODE "
    ${MCDMA_INSTALL_TIME_CONFIG_DIR}
    file(READ \"${PROJECT_SOURCE_DIR}/systemd/mcdma-rpcd.service\" _mcdma_unit)
    string(REPLACE \"/usr/bin/mcdma-rpcd\" \"${_mcdma_unit_bindir}/mcdma-rpcd\"
           _mcdma_unit \"\${_mcdma_unit}\")
    string(REPLACE \"/etc/mcdma/rpcd.toml\" \"\${MCDMA_INSTALL_CONFIG_DIR}/rpcd.toml\"
           _mcdma_unit \"\${_mcdma_unit}\")
    file(WRITE \"${_mcdma_unit_out}\" \"\${_mcdma_unit}\")
    file(INSTALL DESTINATION \"${_mcdma_unit_dest}\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES \"${_mcdma_unit_out}\")
  " COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/mcdma.sysusers
          DESTINATION lib/sysusers.d RENAME mcdma.conf COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/mcdma-rpcd.tmpfiles
          DESTINATION lib/tmpfiles.d RENAME mcdma-rpcd.conf COMPONENT daemon)
  mcdma_install_config(daemon)
endif()
