# What `cmake --install` (and so the .deb, see cmake/package.cmake) puts where.
#
# Relative to the prefix, wherever it is:
#   bin/pglock_exporter
#   lib/pglock_exporter/        the TLS shims; the binary loads them from ../lib/pglock_exporter
#                               relative to its own location (PGLOCK_SHIM_DIR_FROM_BIN)
#   share/pglock_exporter/      alerts/ (rules, promtool tests, runbooks), dashboards/
#   share/doc/pglock-exporter/  README.md, and docs/: the pages and pictures the README links
# Configuration and the systemd unit are placed at install time, from the prefix the install
# runs with: /usr (the package, or a system install) puts them where Debian has them,
# /etc/pglock_exporter/config.toml, /etc/default/pglock_exporter and
# /lib/systemd/system/pglock_exporter.service; any other prefix keeps them inside it
# (<prefix>/etc/..., <prefix>/lib/systemd/system/), so a staging install never writes outside it.

install(TARGETS pglock_exporter RUNTIME DESTINATION bin)
install(TARGETS pglock_ssl_compat pglock_crypto_compat
        LIBRARY DESTINATION ${PGLOCK_SHIM_DIR}
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

install(FILES alerts/pglock.rules.yml alerts/pglock.replicas.rules.yml
        DESTINATION share/pglock_exporter/alerts)
install(DIRECTORY alerts/tests alerts/runbooks DESTINATION share/pglock_exporter/alerts)
file(GLOB PGLOCK_DASHBOARDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/dashboards/*.json)
install(FILES ${PGLOCK_DASHBOARDS} dashboards/README.md
        DESTINATION share/pglock_exporter/dashboards)
install(DIRECTORY dashboards/provisioning DESTINATION share/pglock_exporter/dashboards)
install(FILES README.md DESTINATION share/doc/pglock-exporter)
file(GLOB PGLOCK_DOCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md ${CMAKE_SOURCE_DIR}/docs/*.png)
install(FILES ${PGLOCK_DOCS} DESTINATION share/doc/pglock-exporter/docs)

install(CODE "set(PGLOCK_PACKAGING_SRC \"${CMAKE_SOURCE_DIR}/packaging\")
set(PGLOCK_PACKAGING_OUT \"${CMAKE_BINARY_DIR}/packaging\")")
install(CODE [[
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(etc_dir "/etc")
    set(unit_dir "/lib/systemd/system")
  else()
    set(etc_dir "${CMAKE_INSTALL_PREFIX}/etc")
    set(unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
  endif()
  # The unit and the defaults file name the installed binary and config.
  set(PGLOCK_BINARY "${CMAKE_INSTALL_PREFIX}/bin/pglock_exporter")
  set(PGLOCK_CONFIG "${etc_dir}/pglock_exporter/config.toml")
  set(PGLOCK_DEFAULTS "${etc_dir}/default/pglock_exporter")
  set(PGLOCK_DOCDIR "${CMAKE_INSTALL_PREFIX}/share/doc/pglock-exporter")
  configure_file("${PGLOCK_PACKAGING_SRC}/pglock_exporter.service"
                 "${PGLOCK_PACKAGING_OUT}/pglock_exporter.service" @ONLY)
  configure_file("${PGLOCK_PACKAGING_SRC}/pglock_exporter.default"
                 "${PGLOCK_PACKAGING_OUT}/default/pglock_exporter" @ONLY)
  file(INSTALL "${PGLOCK_PACKAGING_SRC}/config.toml" DESTINATION "${etc_dir}/pglock_exporter")
  file(INSTALL "${PGLOCK_PACKAGING_OUT}/default/pglock_exporter" DESTINATION "${etc_dir}/default")
  file(INSTALL "${PGLOCK_PACKAGING_OUT}/pglock_exporter.service" DESTINATION "${unit_dir}")
]])
