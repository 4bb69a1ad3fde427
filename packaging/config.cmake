# The daemon's configuration, installed with the service files (launchd.cmake,
# systemd.cmake):
#   <sysconfdir>/mcdma/rpcd.toml.example   every key with its default
#   <sysconfdir>/mcdma/rpcd.toml           a copy of the example, only when
#                                          there is none (never overwritten)
# <sysconfdir> is CMAKE_INSTALL_FULL_SYSCONFDIR: /etc for the prefix /usr,
# PREFIX/etc otherwise. The service files name it, so it is fixed when CMake
# configures the build; DESTDIR is honoured.
set(MCDMA_CONFIG_DIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/mcdma")

function(mcdma_install_config component)
  get_property(done GLOBAL PROPERTY MCDMA_CONFIG_INSTALLED)
  if(done)
    return()
  endif()
  set_property(GLOBAL PROPERTY MCDMA_CONFIG_INSTALLED TRUE)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/rpcd.toml.example
          DESTINATION ${MCDMA_CONFIG_DIR}
          PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
          COMPONENT ${component})
  # rpcd.toml: the service starts the daemon with it, and a daemon without
  # its config exits at once. The example sets every key to its default, so
  # this copy changes nothing. Not recorded in install_manifest.txt, so
  # removing the installed files keeps the config (the Debian package marks
  # it a conffile instead: deb.cmake).
  install(CODE "
    set(_mcdma_config \"\$ENV{DESTDIR}${MCDMA_CONFIG_DIR}/rpcd.toml\")
    if(EXISTS \"\${_mcdma_config}\")
      message(STATUS \"Keeping: \${_mcdma_config} (exists; see rpcd.toml.example for new keys)\")
    else()
      message(STATUS \"Installing: \${_mcdma_config} (a copy of rpcd.toml.example)\")
      file(COPY_FILE \"\$ENV{DESTDIR}${MCDMA_CONFIG_DIR}/rpcd.toml.example\"
           \"\${_mcdma_config}\")
    endif()
  " COMPONENT ${component})
endfunction()
