# What `cmake --install` puts in place, and the package that lets another CMake project (a
# vendor shim, the LLM service's adapter) or a pkg-config user find it:
#   include/calrt/abi/         calrt.h, calrt_ext.h, the call table and the header-only C++
#                              wrapper and loader, included as "abi/calrt.h" as inside this
#                              tree
#   lib/                       libcalrt_sim.so, libcalrt_client.so, libcalrt_validate.so,
#                              each with SONAME lib*.so.<ABI major> and version <ABI version>
#   bin/                       calrt and simdev
#   share/calrt/               the scenario library, the default device config, the
#                              vendor-shim skeleton (builds on its own against this package)
#   share/doc/calrt/           the documentation
#   include/calrt/llm/         the LLM adapter's headers (llm/README.md), with the one
#                              calbin header they include
#   lib/                       libcalrt_llm.so, the LLM adapter (calrt::llm)
#   lib/cmake/calrt/           find_package(calrt CONFIG): calrt::abi, calrt::sim,
#                              calrt::client, calrt::validate, calrt::llm, calrt::calrt,
#                              calrt::simdev
#   lib/pkgconfig/calrt.pc     the ABI headers' flags, and the libraries' paths as variables
# tests/install/ checks all of it from a consumer project built against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The ABI's version, from calrt.h: the libraries' version, their SONAME's major, and the
# package's version.
file(STRINGS ${PROJECT_SOURCE_DIR}/abi/calrt.h calrt_abi_lines
     REGEX "^#define CALRT_ABI_(MAJOR|MINOR|PATCH) [0-9]+$")
foreach(line IN LISTS calrt_abi_lines)
  string(REGEX MATCH "CALRT_ABI_([A-Z]+) ([0-9]+)" _ ${line})
  set(CALRT_ABI_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endforeach()
set(CALRT_ABI_VERSION ${CALRT_ABI_MAJOR}.${CALRT_ABI_MINOR}.${CALRT_ABI_PATCH})

set(calrt_runtime_libraries calrt_sim calrt_client_runtime calrt_validate_runtime)
set_target_properties(${calrt_runtime_libraries} PROPERTIES
  VERSION ${CALRT_ABI_VERSION}
  SOVERSION ${CALRT_ABI_MAJOR})
set_target_properties(calrt_abi PROPERTIES EXPORT_NAME abi)
set_target_properties(calrt_sim PROPERTIES EXPORT_NAME sim)
set_target_properties(calrt_client_runtime PROPERTIES EXPORT_NAME client)
set_target_properties(calrt_validate_runtime PROPERTIES EXPORT_NAME validate)

set(calrt_include_dir ${CMAKE_INSTALL_INCLUDEDIR}/calrt)
install(FILES abi/calrt.h abi/calrt_ext.h abi/calrt.hpp abi/calrt_ext.hpp abi/calrt_loader.hpp
              abi/call_table.hpp
        DESTINATION ${calrt_include_dir}/abi COMPONENT development)
# The LLM adapter: its public headers only (contract, sequence and engine_impl are internal).
install(FILES llm/engine.hpp llm/error.hpp llm/ledger.hpp llm/request.hpp
        DESTINATION ${calrt_include_dir}/llm COMPONENT development)
install(FILES llm/host/ranking.hpp llm/host/sampling.hpp llm/host/tensor_io.hpp
        DESTINATION ${calrt_include_dir}/llm/host COMPONENT development)
install(FILES calbin/splitmix64.hpp DESTINATION ${calrt_include_dir}/calbin
        COMPONENT development)
set_target_properties(calrt_llm PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0)
# calrt links the adapter: found next to it once installed.
set_target_properties(calrt PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS calrt_abi ${calrt_runtime_libraries} calrt_llm calrt simdev
        EXPORT calrt_targets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development
        INCLUDES DESTINATION ${calrt_include_dir})

set(calrt_data_dir ${CMAKE_INSTALL_DATADIR}/calrt)
set(calrt_doc_dir ${CMAKE_INSTALL_DATAROOTDIR}/doc/calrt)  # the package's name, not the project's
install(DIRECTORY scenarios/ DESTINATION ${calrt_data_dir}/scenarios COMPONENT runtime
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.md")
install(FILES simdev/config/calculet-default.yaml DESTINATION ${calrt_data_dir}/config
        COMPONENT runtime)
install(FILES abi/shim_skeleton/CMakeLists.txt abi/shim_skeleton/calrt_shim_skeleton.cpp
              abi/shim_skeleton/calrt_shim.map
        DESTINATION ${calrt_data_dir}/shim_skeleton COMPONENT development)
install(FILES README.md REFERENCE.md abi/CONFORMANCE.md abi/VENDOR_SHIM.md calbin/FORMAT.md
              calbin/MODEL.md scenarios/README.md simdev/device/FAULTS.md
              simdev/device/STATE_MACHINE.md simdev/service/PROTOCOL.md
        DESTINATION ${calrt_doc_dir} COMPONENT runtime)
# The runner's and the device's README would both be README.md there.
install(FILES simdev/device/README.md DESTINATION ${calrt_doc_dir} RENAME DEVICE.md
        COMPONENT runtime)
install(FILES runner/README.md DESTINATION ${calrt_doc_dir} RENAME RUNNER.md
        COMPONENT runtime)

set(calrt_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/calrt)
install(EXPORT calrt_targets NAMESPACE calrt:: FILE calrtTargets.cmake
        DESTINATION ${calrt_cmake_dir} COMPONENT development)
configure_package_config_file(cmake/calrtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/calrtConfig.cmake
                              INSTALL_DESTINATION ${calrt_cmake_dir} PATH_VARS calrt_data_dir)
# Any newer minor of the same major: the ABI only appends within a major.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/calrtConfigVersion.cmake
                                 VERSION ${CALRT_ABI_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/calrtConfig.cmake ${PROJECT_BINARY_DIR}/calrtConfigVersion.cmake
        DESTINATION ${calrt_cmake_dir} COMPONENT development)

# Relocatable: the prefix is found from the .pc file's own place, so that an install with
# `cmake --install --prefix DIR` (or a .deb) needs no edit.
file(RELATIVE_PATH calrt_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/calrt.pc.in ${PROJECT_BINARY_DIR}/calrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/calrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT development)

# `cpack -G DEB` in a build directory: one .deb of everything above, named and versioned
# as Debian does (calrt_<version>_<arch>.deb), its library dependencies found by
# dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME calrt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "calrt maintainers <calrt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "CalRT runner and simulated Calculet NPU: bring-up smoke, fault scenarios, ABI conformance")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
