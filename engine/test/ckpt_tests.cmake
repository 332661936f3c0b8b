# Checkpoints, file formats, prompt caches, LoRA (owner: e1). Included from engine/CMakeLists.txt.
# The sources are engine/dit's (ckpt*, lora, prompt) and engine/core's safetensors.

add_executable(ckpt_test_formats test/ckpt_test_formats.c)
target_link_libraries(ckpt_test_formats vdn_engine)
add_test(NAME ckpt_formats COMMAND ckpt_test_formats ${CMAKE_CURRENT_BINARY_DIR}/ckpt_formats_tmp)

add_executable(ckpt_test_load test/ckpt_test_load.c)
target_link_libraries(ckpt_test_load vdn_engine)
add_test(NAME ckpt_load COMMAND ckpt_test_load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_load_tmp)

# LoRA folds (default / turbo with rank_pattern / external original-layout adapter) and the
# native layout rules, against an independent numpy reference
add_executable(ckpt_dump test/ckpt_dump.c)
target_link_libraries(ckpt_dump vdn_engine)
add_test(NAME ckpt_lora_numpy
         COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test/ckpt_test_lora.py $<TARGET_FILE:vdn>
                 $<TARGET_FILE:ckpt_dump> ${CMAKE_CURRENT_BINARY_DIR}/ckpt_lora_tmp)

# Fuzzing: the safetensors header and config parsers. The replay test runs everywhere.
add_executable(ckpt_fuzz_replay test/ckpt_fuzz_replay.c test/ckpt_fuzz.c)
target_link_libraries(ckpt_fuzz_replay vdn_engine)
add_test(NAME ckpt_fuzz_replay
         COMMAND ckpt_fuzz_replay ${CMAKE_CURRENT_SOURCE_DIR}/test/ckpt_corpus 20000)
if(VDN_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(_ckpt_abs)
  foreach(f prompt.c ckpt_config.c ckpt_names.c lora.c ckpt.c ckpt_init.c)
    list(APPEND _ckpt_abs ${CMAKE_CURRENT_SOURCE_DIR}/dit/${f})
  endforeach()
  add_executable(ckpt_fuzz test/ckpt_fuzz.c ${_ckpt_abs} core/safetensors.c core/vdn_util.c)
  target_compile_definitions(ckpt_fuzz PRIVATE VDN_LIBFUZZER)
  target_include_directories(ckpt_fuzz PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/dit ${CMAKE_CURRENT_SOURCE_DIR}/core)
  target_compile_options(ckpt_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(ckpt_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(ckpt_fuzz PkgConfig::CJSON m Threads::Threads)
endif()

# ops/convert-prompt-cache.py on .pt files built in torch's zip format (no torch), and the
# engine's reader on what it writes
add_executable(ckpt_prompt_info test/ckpt_prompt_info.c)
target_link_libraries(ckpt_prompt_info vdn_engine)
add_test(NAME ckpt_convert_prompt
         COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test/ckpt_test_convert_prompt.py
                 ${CMAKE_SOURCE_DIR}/ops/convert-prompt-cache.py $<TARGET_FILE:ckpt_prompt_info>
                 ${CMAKE_CURRENT_BINARY_DIR}/ckpt_convert_tmp)

# vdn ckpt init / vdn inspect from the command line, and a render on both layouts
add_test(NAME ckpt_cli COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test/ckpt_test_cli.py
                               $<TARGET_FILE:vdn> ${CMAKE_CURRENT_BINARY_DIR}/ckpt_cli_tmp)

# the schema at the real H3 config against the released checkpoints' numbers
add_executable(ckpt_test_schema test/ckpt_test_schema.c)
target_link_libraries(ckpt_test_schema vdn_engine)
add_test(NAME ckpt_schema COMMAND ckpt_test_schema)
