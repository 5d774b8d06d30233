# Run by `cmake --install` (see CMakeLists.txt): installs what depends on the install prefix,
# which is only known at install time (`cmake --install --prefix`, the Makefile's PREFIX):
#   - the default config as <etc>/arbor/arbor.conf, where <etc> is /etc for the prefix /usr
#     and <prefix>/etc otherwise; an existing config is never overwritten
#   - the systemd unit, with ExecStart naming the installed binary and config
#   - the sysusers.d entry for the arbor user
#   - the logrotate snippet as <etc>/logrotate.d/arbor (replaced on every install, as a
#     package's would be)
#   - the Wireshark Lua dissector of MQTT-ST where Wireshark looks for global Lua plugins:
#     <prefix>/lib/<multiarch>/wireshark/plugins for the prefix /usr on a multiarch system
#     (Debian's wireshark: `tshark -G folders`, "Global Lua Plugins"), else
#     <prefix>/lib/wireshark/plugins (point WIRESHARK_PLUGIN_DIR there, or copy the file to
#     ~/.local/lib/wireshark/plugins, see tools/wireshark/README.md)
# DESTDIR is honoured (file(INSTALL) prepends it).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(arbor_etc "/etc")
else()
  set(arbor_etc "${CMAKE_INSTALL_PREFIX}/etc")
endif()

if(EXISTS "$ENV{DESTDIR}${arbor_etc}/arbor/arbor.conf")
  message(STATUS "Keeping existing: $ENV{DESTDIR}${arbor_etc}/arbor/arbor.conf")
else()
  file(INSTALL "${ARBOR_SOURCE_DIR}/config/arbor.conf" DESTINATION "${arbor_etc}/arbor"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()

file(READ "${ARBOR_SOURCE_DIR}/config/arbor.service" unit)
string(REPLACE "/usr/local/sbin/arbor -c /usr/local/etc/arbor/arbor.conf"
       "${CMAKE_INSTALL_PREFIX}/sbin/arbor -c ${arbor_etc}/arbor/arbor.conf" unit "${unit}")
file(WRITE "${ARBOR_BINARY_DIR}/install/arbor.service" "${unit}")
file(INSTALL "${ARBOR_BINARY_DIR}/install/arbor.service"
     DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

file(INSTALL "${ARBOR_SOURCE_DIR}/config/arbor.sysusers"
     DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/sysusers.d" RENAME arbor.conf
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

file(INSTALL "${ARBOR_SOURCE_DIR}/config/arbor.logrotate" DESTINATION "${arbor_etc}/logrotate.d"
     RENAME arbor PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" AND ARBOR_LIBRARY_ARCHITECTURE)
  set(arbor_wireshark_plugins "/usr/lib/${ARBOR_LIBRARY_ARCHITECTURE}/wireshark/plugins")
else()
  set(arbor_wireshark_plugins "${CMAKE_INSTALL_PREFIX}/lib/wireshark/plugins")
endif()
file(INSTALL "${ARBOR_SOURCE_DIR}/tools/wireshark/mqtt-st.lua"
     DESTINATION "${arbor_wireshark_plugins}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
