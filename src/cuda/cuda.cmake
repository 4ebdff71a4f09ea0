# The CUDA backend: the objects of src/cuda/*.cu (CUDA C in C style), linked into both
# libflashc archives. Included by the top-level CMakeLists.txt when nvcc is found.
# An OBJECT library rather than a separate static archive: the CUDA code calls back into the
# core (flashc__fail, attn_tile_pairs_per_head) and the core into it, and two archives that
# need each other fail to link whenever a program pulls the core's object only after the
# CUDA archive was scanned (seen with test_rows). Objects inside libflashc.a have no order.
# The top-level CMakeLists.txt adds these objects to both libraries and links the CUDA runtime
# statically (CUDA::cudart_static), so that libflashc.so loads on a host without CUDA.
find_package(CUDAToolkit REQUIRED)

# The machine code built: FLASHC_CUDA_ARCHS lists "80" (every kernel but the Hopper ones, as
# sm_80 code, which runs on every 8.x part: Ampere, Ada) and "90a" (every kernel, the wgmma / TMA
# ones included, for compute capability 9.0 only: sm_80 code does not run on 9.0). Both by
# default; a build for one lent Hopper (bench/gpu/device_call.sh, bench/gpu/prebuild.sh) passes
# -DFLASHC_CUDA_ARCHS=90a and compiles in about half the time. Used by the CLI's CUDA helpers too
# (CMakeLists.txt).
set(FLASHC_CUDA_ARCHS "80;90a" CACHE STRING "CUDA machine code to build: 80 and/or 90a")
set(FLASHC_CUDA_GENCODE "")
foreach(arch IN LISTS FLASHC_CUDA_ARCHS)
  if(NOT arch MATCHES "^(80|90a)$")
    message(FATAL_ERROR "FLASHC_CUDA_ARCHS: '${arch}': expected 80 and/or 90a")
  endif()
  list(APPEND FLASHC_CUDA_GENCODE "-gencode=arch=compute_${arch},code=sm_${arch}")
endforeach()
if(NOT FLASHC_CUDA_GENCODE)
  message(FATAL_ERROR "FLASHC_CUDA_ARCHS is empty: expected 80 and/or 90a")
endif()
# What flashc_build_info() reports ("sm_80 sm_90a"): attn.cu's cuda_build_info, this file only
list(TRANSFORM FLASHC_CUDA_ARCHS PREPEND "sm_" OUTPUT_VARIABLE FLASHC_CUDA_SM_LIST)
list(JOIN FLASHC_CUDA_SM_LIST " " FLASHC_CUDA_SM_STRING)
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cuda/attn.cu PROPERTIES
  COMPILE_DEFINITIONS "FLASHC_CUDA_SM_STRING=\"${FLASHC_CUDA_SM_STRING}\"")

add_library(flashc_cuda OBJECT ${FLASHC_CUDA_SOURCES})
# The directory's C flags (-Wall, sanitizers) mean nothing to nvcc: start from a clean list.
set_property(TARGET flashc_cuda PROPERTY COMPILE_OPTIONS "")
set_target_properties(flashc_cuda PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE ON
  # Architectures are given as explicit -gencode flags below (sm_90a needs that form).
  CUDA_ARCHITECTURES OFF)
target_include_directories(flashc_cuda PRIVATE ${PROJECT_SOURCE_DIR}/include
                                               ${PROJECT_BINARY_DIR}/include
                                               ${PROJECT_SOURCE_DIR}/src/core
                                               ${PROJECT_SOURCE_DIR}/src/cp)
target_compile_options(flashc_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:
    ${FLASHC_CUDA_GENCODE}
    -Xcompiler=-Wall
    -Xptxas=-warn-spills
    --threads=0>)
# The CUDA runtime's headers; what the objects link against is decided by the libraries.
target_link_libraries(flashc_cuda PRIVATE CUDA::cudart_static)
target_compile_definitions(flashc_obj PUBLIC FLASHC_HAVE_CUDA)

# The NCCL transport of context parallelism (src/cp/cp_nccl.cu): built when nccl.h is found (the
# CUDA toolkit's, or Debian's libnccl-dev). Only the header is needed at build time: the
# library opens libnccl.so.2 at run time (dlopen), so nothing here links NCCL.
set(FLASHC_HAVE_NCCL OFF)
if(FLASHC_NCCL)
  find_path(FLASHC_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  if(FLASHC_NCCL_INCLUDE_DIR)
    set(FLASHC_HAVE_NCCL ON)
    target_sources(flashc_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src/cp/cp_nccl.cu)
    target_include_directories(flashc_cuda PRIVATE ${FLASHC_NCCL_INCLUDE_DIR})
    target_compile_definitions(flashc_cuda PRIVATE FLASHC_HAVE_NCCL)
    target_compile_definitions(flashc_obj PUBLIC FLASHC_HAVE_NCCL)
  endif()
endif()
message(STATUS "flashc: NCCL transport for context parallelism ${FLASHC_HAVE_NCCL} (nccl.h: ${FLASHC_NCCL_INCLUDE_DIR})")
