# `cmake --install` and the Debian package (scripts/package runs cpack -G DEB in the build directory).
# Layout: /usr/bin/sandfortd and /usr/bin/sandfort, the agent in /usr/lib/sandfort (bind-mounted
# into sandboxes, never run on the host), the systemd unit, and a default configuration in
# /etc/sandfort (a conffile: an upgrade keeps the operator's edits). docs/operations.md.
include(GNUInstallDirs)
# Installing (and cpack) needs only what is installed, not the tests: `all` is not built first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

install(TARGETS sandfortd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET sandfort)
  install(TARGETS sandfort RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(TARGETS sandfort-agent RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/sandfort)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/sandfortd.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/sandfort.json DESTINATION /etc/sandfort PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operations.md
              ${PROJECT_SOURCE_DIR}/docs/configuration.md ${PROJECT_SOURCE_DIR}/docs/security.md
              ${PROJECT_SOURCE_DIR}/docs/limits.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} OPTIONAL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sandfort)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Sandfort maintainers <sandfort@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Self-hosted isolated sandboxes for AI agents (sandfortd, agent, CLI)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# RelWithDebInfo binaries carry ~200 MB of debug info: the package ships them stripped.
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# Shared libraries found by dpkg-shlibdeps (OpenSSL, SQLite, spdlog, fmt); what it runs beside.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "docker.io | docker-ce, iptables")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/conffiles)
include(CPack)
