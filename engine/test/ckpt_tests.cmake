# Checkpoints, file formats, prompt caches, LoRA (owner: e1). Included from engine/CMakeLists.txt.
set(VDN_CKPT_SOURCES safetensors.c prompt.c ckpt_config.c ckpt_names.c lora.c ckpt.c ckpt_init.c)
target_sources(vdn_engine PRIVATE ${VDN_CKPT_SOURCES})
# Paths are built in fixed buffers and checked where it matters; GCC's guesses are noise here.
set_source_files_properties(${VDN_CKPT_SOURCES} PROPERTIES COMPILE_OPTIONS -Wno-format-truncation)

add_executable(ckpt_test_formats test/ckpt_test_formats.c)
target_link_libraries(ckpt_test_formats vdn_engine)
add_test(NAME ckpt_formats COMMAND ckpt_test_formats ${CMAKE_CURRENT_BINARY_DIR}/ckpt_formats_tmp)

add_executable(ckpt_test_load test/ckpt_test_load.c)
target_link_libraries(ckpt_test_load vdn_engine)
add_test(NAME ckpt_load COMMAND ckpt_test_load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_load_tmp)
