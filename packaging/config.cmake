# The daemon's configuration, installed with the service files (launchd.cmake,
# systemd.cmake):
#   <sysconfdir>/mcdma/rpcd.toml.example   every key with its default
#   <sysconfdir>/mcdma/rpcd.toml           a copy of the example, only when
#                                          there is none (never overwritten)
#
# <sysconfdir> follows GNUInstallDirs' rule for the prefix the files are
# installed under, decided when they are installed, so `cmake --install
# --prefix /usr` and the Debian packages (built from any tree: deb.cmake)
# get /etc: /etc for the prefix /usr, /etc/opt/... for /opt/..., PREFIX/etc
# otherwise; an absolute CMAKE_INSTALL_SYSCONFDIR is used as it is. The
# systemd unit names the same directory (systemd.cmake). The launchd plist
# is configured with the build's prefix (MCDMA_CONFIG_DIR below), so a macOS
# install uses the prefix it was configured with. DESTDIR is honoured.
set(MCDMA_CONFIG_DIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/mcdma")

# Install-time code that sets MCDMA_INSTALL_CONFIG_DIR from the prefix being
# installed to; each rule that needs it starts with it.
if(IS_ABSOLUTE "${CMAKE_INSTALL_SYSCONFDIR}")
  set(MCDMA_INSTALL_TIME_CONFIG_DIR "set(MCDMA_INSTALL_CONFIG_DIR \"${CMAKE_INSTALL_SYSCONFDIR}/mcdma\")")
else()
  set(MCDMA_INSTALL_TIME_CONFIG_DIR "
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(MCDMA_INSTALL_CONFIG_DIR \"/etc/mcdma\")
    elseif(CMAKE_INSTALL_PREFIX MATCHES \"^/opt/\")
      set(MCDMA_INSTALL_CONFIG_DIR \"/etc\${CMAKE_INSTALL_PREFIX}/mcdma\")
    else()
      set(MCDMA_INSTALL_CONFIG_DIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SYSCONFDIR}/mcdma\")
    endif()")
endif()

function(mcdma_install_config component)
  get_property(done GLOBAL PROPERTY MCDMA_CONFIG_INSTALLED)
  if(done)
    return()
  endif()
  set_property(GLOBAL PROPERTY MCDMA_CONFIG_INSTALLED TRUE)
  if(APPLE)
    set(config_dir_code "set(MCDMA_INSTALL_CONFIG_DIR \"${MCDMA_CONFIG_DIR}\")")
  else()
    set(config_dir_code "${MCDMA_INSTALL_TIME_CONFIG_DIR}")
  endif()
  # rpcd.toml: the service starts the daemon with it, and a daemon without
  # its config exits at once. The example sets every key to its default, so
  # the copy changes nothing. The copy is not recorded in
  # install_manifest.txt, so removing the installed files keeps the config
  # (the Debian package marks both conffiles instead: deb.cmake).
  install(CODE "
    ${config_dir_code}
    file(INSTALL DESTINATION \"\${MCDMA_INSTALL_CONFIG_DIR}\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES \"${PROJECT_SOURCE_DIR}/systemd/rpcd.toml.example\")
    set(_mcdma_config \"\$ENV{DESTDIR}\${MCDMA_INSTALL_CONFIG_DIR}/rpcd.toml\")
    if(EXISTS \"\${_mcdma_config}\")
      message(STATUS \"Keeping: \${_mcdma_config} (exists; see rpcd.toml.example for new keys)\")
    else()
      message(STATUS \"Installing: \${_mcdma_config} (a copy of rpcd.toml.example)\")
      file(COPY_FILE \"\$ENV{DESTDIR}\${MCDMA_INSTALL_CONFIG_DIR}/rpcd.toml.example\"
           \"\${_mcdma_config}\")
    endif()
  " COMPONENT ${component})
endfunction()
