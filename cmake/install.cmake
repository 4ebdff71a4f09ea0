# Install rules of the C package (included by the top-level CMakeLists.txt when FLASHC_INSTALL):
#   include/flashc.h, include/flashc_version.h
#   lib/libflashc.so.X.Y.Z (+ soname and dev links), lib/libflashc.a
#   lib/cmake/flashc/flashc{Config,ConfigVersion,Targets,StaticTargets}.cmake
#   lib/pkgconfig/flashc.pc
#   bin/flashc (the CLI, when FLASHC_TOOLS)
# Consumers: find_package(flashc) then flashc::flashc (shared) or flashc::flashc_static;
# pkg-config --cflags --libs flashc (add --static for libflashc.a).
include(CMakePackageConfigHelpers)

set(FLASHC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashc)

install(FILES ${FLASHC_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Two export sets, so that a consumer of the shared library needs none of the static one's
# link dependencies (OpenMP for its compiler, and the CUDA toolkit when built with CUDA).
if(FLASHC_BUILD_SHARED)
  install(TARGETS flashc EXPORT flashcTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT flashcTargets NAMESPACE flashc:: DESTINATION ${FLASHC_CMAKE_DIR})
endif()
install(TARGETS flashc_static EXPORT flashcStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT flashcStaticTargets NAMESPACE flashc:: DESTINATION ${FLASHC_CMAKE_DIR})
if(FLASHC_TOOLS)
  install(TARGETS flashc_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashcConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/flashcConfig.cmake
                              INSTALL_DESTINATION ${FLASHC_CMAKE_DIR})
# 0.x: a minor release may break the ABI, so only the same MAJOR.MINOR is compatible.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(flashc_compat SameMinorVersion)
else()
  set(flashc_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashcConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${flashc_compat})
install(FILES ${PROJECT_BINARY_DIR}/flashcConfig.cmake ${PROJECT_BINARY_DIR}/flashcConfigVersion.cmake
        DESTINATION ${FLASHC_CMAKE_DIR})

# flashc.pc: Libs for the shared library; Libs.private what libflashc.a needs besides
# (pkg-config --static). The prefix is found from the .pc file's own place, so the installed
# tree can be moved.
set(FLASHC_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} -lpthread -lm")
if(FLASHC_HAVE_CUDA)
  # The static CUDA runtime and its own needs (what CMake's CUDA::cudart_static carries: dl,
  # pthread, rt), and the C++ runtime the .cu objects use.
  string(APPEND FLASHC_PC_LIBS_PRIVATE " ${CUDA_cudart_static_LIBRARY} -ldl -lpthread -lrt -lstdc++")
endif()
file(RELATIVE_PATH FLASHC_PC_TO_PREFIX
     ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" FLASHC_PC_TO_PREFIX "${FLASHC_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/flashc.pc.in ${PROJECT_BINARY_DIR}/flashc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/flashc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
