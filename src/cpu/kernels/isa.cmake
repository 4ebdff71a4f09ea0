# Per-ISA compile flags of the CPU micro-kernel files. The library as a whole is built for the
# baseline of its architecture (never -march=native); only these files get wider instruction
# sets, and dispatch.c calls into them only when the CPU reports the features.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cpu/kernels/avx2.c
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cpu/kernels/avx512.c
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cpu/kernels/avx512bf16.c
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/cpu/kernels/amx.c
    PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16;-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma;-mf16c")
endif()
