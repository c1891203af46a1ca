# `cpack -G DEB` in a build directory: the pglock-exporter package (Debian names allow no "_").
# The files are those of cmake/install.cmake installed with the prefix /usr; the maintainer
# scripts, conffiles and lintian overrides are in packaging/debian/. Dependencies come from the
# shared libraries the binary and the shims link (dpkg-shlibdeps, from dpkg-dev).

set(PGLOCK_PACKAGE_MAINTAINER
    "Seed 40d8b289 maintainers <maintainers@users.noreply.a-seed-40d8b289.example>"
    CACHE STRING "Maintainer field of the .deb")
set(PGLOCK_DEB_VERSION "${PROJECT_VERSION}")

set(CPACK_PACKAGE_NAME pglock-exporter)
set(CPACK_PACKAGE_VERSION ${PGLOCK_DEB_VERSION})
set(CPACK_PACKAGE_CONTACT "${PGLOCK_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Prometheus exporter of PostgreSQL advisory lock and lease health")
# CPack puts the summary in front of this as the synopsis line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "pglock_exporter tells on-call when PostgreSQL advisory locks and lease rows are
stuck, about to be lost or already lost: waits with waiter and blocker
identity, lock holders idle in transaction and the time left before a timeout
ends them, losses and takeovers between polls, lease expiry and overlap.
.
The package ships the exporter, its systemd unit, alert rules with promtool
tests and runbooks, and Grafana dashboards.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/pglock-exporter/pglock_exporter")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# adduser creates the system user in postinst.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_STRIP_FILES ON)
# Install with DESTDIR and the prefix /usr, so that the install rules place /etc and
# /lib/systemd/system themselves (see cmake/install.cmake).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

# What Debian wants besides: in /usr/share/doc/<package>/ a changelog and the copyright, a
# manual page, both compressed with gzip -9n; and the lintian overrides (each with its reason).
string(TIMESTAMP PGLOCK_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(packaging/debian/changelog.in ${CMAKE_BINARY_DIR}/packaging/changelog @ONLY)
set(PGLOCK_GZIPPED)
foreach(pair "${CMAKE_BINARY_DIR}/packaging/changelog|changelog.gz"
             "${CMAKE_SOURCE_DIR}/packaging/pglock_exporter.1|pglock_exporter.1.gz")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 src)
  list(GET pair 1 name)
  set(out ${CMAKE_BINARY_DIR}/packaging/${name})
  add_custom_command(OUTPUT ${out}
    COMMAND sh -c "gzip -9nc \"$1\" > \"$2\"" gzip ${src} ${out}
    DEPENDS ${src} VERBATIM)
  list(APPEND PGLOCK_GZIPPED ${out})
endforeach()
add_custom_target(pglock_package_docs ALL DEPENDS ${PGLOCK_GZIPPED})
install(FILES ${CMAKE_BINARY_DIR}/packaging/changelog.gz packaging/debian/copyright
        DESTINATION share/doc/pglock-exporter)
install(FILES ${CMAKE_BINARY_DIR}/packaging/pglock_exporter.1.gz DESTINATION share/man/man1)
install(FILES packaging/debian/lintian-overrides DESTINATION share/lintian/overrides
        RENAME pglock-exporter)

set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst
    ${CMAKE_SOURCE_DIR}/packaging/debian/prerm
    ${CMAKE_SOURCE_DIR}/packaging/debian/postrm
    ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_GENERATOR DEB)
include(CPack)
