# Man pages for mcdma-rpcd(8) and mcdmactl(1), made by help2man from each
# program's --help and --version when the programs are built (the text is
# the programs' own: nothing to keep in step by hand), installed to
# <mandir>/man8 and <mandir>/man1 (component daemon). Without help2man
# (Debian: apt-get install help2man) they are not made, and the build says so.
find_program(MCDMA_HELP2MAN help2man)
if(NOT MCDMA_HELP2MAN)
  message(STATUS "packaging: help2man not found; the man pages are not made (Debian: apt-get install help2man)")
else()

  set(_mcdma_man_dir ${CMAKE_CURRENT_BINARY_DIR}/man)
  file(MAKE_DIRECTORY ${_mcdma_man_dir})

  # mcdma_man_page(TARGET SECTION DESCRIPTION INCLUDE_FILE)
  function(mcdma_man_page target section description include)
    set(page ${_mcdma_man_dir}/${target}.${section})
    add_custom_command(
      OUTPUT ${page}
      COMMAND ${MCDMA_HELP2MAN} --no-info --no-discard-stderr --section=${section}
              --name=${description} --version-string=${PROJECT_VERSION}
              --include=${include} --output=${page} $<TARGET_FILE:${target}>
      DEPENDS ${target} ${include}
      COMMENT "help2man ${target}.${section}"
      VERBATIM)
    add_custom_target(${target}_man ALL DEPENDS ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT daemon)
  endfunction()

  mcdma_man_page(mcdma-rpcd 8 "the mcdma link daemon (one per host)"
                 ${CMAKE_CURRENT_SOURCE_DIR}/man/mcdma-rpcd.h2m)
  mcdma_man_page(mcdmactl 1 "inspect and manage the host's mcdma-rpcd"
                 ${CMAKE_CURRENT_SOURCE_DIR}/man/mcdmactl.h2m)
endif()
