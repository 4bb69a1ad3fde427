# The Debian packages (CPack's DEB generator), one per install component
# (packaging/CMakeLists.txt), built by scripts/build-debs.sh from a built
# tree:
#   mcdma-rpcd     daemon   mcdma-rpcd, mcdmactl, the systemd unit, the
#                           sysusers.d and tmpfiles.d files, /etc/mcdma,
#                           the man pages
#   libmcdma1      lib      libmcdma.so.1 (shlibs, ldconfig trigger)
#   libmcdma-dev   dev      headers, libmcdma.so, CMake package, mcdma.pc
#   python3-mcdma  python   the mcdma package in /usr/lib/python3/dist-packages
#
# The packages install under /usr whatever prefix the tree was configured
# with (CPACK_SET_DESTDIR: the install rules run with the prefix /usr into
# a staging DESTDIR), so the unit, the config directory (/etc/mcdma) and the
# Python directory are the ones /usr gives (decided when installing:
# config.cmake, systemd.cmake, bindings/python). The libraries go to the
# tree's CMAKE_INSTALL_LIBDIR under /usr.
#
# mcdma-rpcd's maintainer scripts (packaging/debian/): postinst creates the
# user and group mcdma (systemd-sysusers, or useradd where systemd is not
# installed), /run/mcdma and /etc/mcdma's owner and mode (systemd-tmpfiles),
# and reloads systemd; it does not enable or start the unit: the admin sets
# up /etc/mcdma/rpcd.toml first (docs/operations.md). prerm stops and
# disables the unit on removal, so removing the package leaves no unit
# enabled; postinst restarts it on upgrade if it was running. Both config
# files are conffiles (an edited rpcd.toml survives upgrades; purge removes
# them).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mcdma)
set(CPACK_PACKAGE_VENDOR "mcdma")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "mcdma link daemon for heterogeneous RDMA clusters")
set(CPACK_PACKAGE_CONTACT "mcdma developers <mcdma@localhost>")
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/debs)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon lib dev)
if(TARGET mcdma_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/mcdma/mcdma")
# Depends from the ELF files' libraries (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/client)
set(_mcdma_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME mcdma-rpcd)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "mcdma link daemon (one per host) and mcdmactl
 mcdma-rpcd holds the host's RDMA queue pairs and memory registrations and
 lets local apps exchange calls, replies and bulk data with apps on other
 hosts through shared-memory mailboxes and zero-copy buffers, over verbs or
 TCP links. Includes the systemd unit and mcdmactl, the admin tool.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "ibverbs-providers, rdma-core")
set(_mcdma_deb_scripts ${CMAKE_CURRENT_BINARY_DIR}/debian)
file(MAKE_DIRECTORY ${_mcdma_deb_scripts})
foreach(script postinst prerm postrm)
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/debian/mcdma-rpcd.${script}
                 ${_mcdma_deb_scripts}/${script} COPYONLY FILE_PERMISSIONS
                 OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                 WORLD_READ WORLD_EXECUTE)
endforeach()
file(WRITE ${_mcdma_deb_scripts}/conffiles "/etc/mcdma/rpcd.toml\n/etc/mcdma/rpcd.toml.example\n")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${_mcdma_deb_scripts}/postinst ${_mcdma_deb_scripts}/prerm
    ${_mcdma_deb_scripts}/postrm ${_mcdma_deb_scripts}/conffiles)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libmcdma1)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_LIB_DESCRIPTION
    "mcdma client library
 libmcdma is what apps link to reach the host's mcdma-rpcd: sessions,
 calls, services, notifications, zero-copy buffers and one-sided reads and
 writes, through a C++ API and a C ABI.")
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
file(WRITE ${_mcdma_deb_scripts}/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${_mcdma_deb_scripts}/triggers)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libmcdma-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libmcdma1 (= ${_mcdma_deb_version})")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "mcdma client library: development files
 Headers (mcdma/client.hpp, the C ABI mcdma/mcdma.h), the CMake package
 (find_package(mcdma CONFIG), target mcdma::mcdma) and mcdma.pc.")

if(TARGET mcdma_python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-mcdma)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  # The extension is built for one interpreter (its ABI tag is in its name).
  math(EXPR _mcdma_python_next "${MCDMA_PYTHON_MINOR} + 1")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "python3 (>= ${MCDMA_PYTHON_MAJOR}.${MCDMA_PYTHON_MINOR}), python3 (<< ${MCDMA_PYTHON_MAJOR}.${_mcdma_python_next}), python3-numpy")
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION
      "mcdma client library: Python package
   The mcdma package: sessions, calls, services and buffers as numpy arrays,
   and mcdma.kv, the KV-cache hand-off with layer streaming.")
endif()

include(CPack)
