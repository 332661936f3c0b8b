# Tokenizer tests. The corpus test compares every string of corpus.jsonl with the ids the public
# `tokenizers` library gave (expected_ids.jsonl, made by make_expected_ids.py on the GPU machine).
add_executable(test_tokenizer ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer.c)
target_link_libraries(test_tokenizer PRIVATE vdn_text)
add_test(NAME text_tokenizer COMMAND test_tokenizer ${VDN_QWEN3_TOKENIZER})
add_test(NAME text_tokenizer_corpus
         COMMAND test_tokenizer ${VDN_QWEN3_TOKENIZER} ${CMAKE_CURRENT_LIST_DIR}/corpus.jsonl
                 ${CMAKE_CURRENT_LIST_DIR}/expected_ids.jsonl)
# The same through the CLI, byte for byte: `vdn tokenize` prints what the public library's ids
# serialise to (compact JSON arrays, one per line)
add_test(NAME text_tokenize_cli
         COMMAND sh -c "$<TARGET_FILE:vdn> tokenize --tokenizer '${VDN_QWEN3_TOKENIZER}' < '${CMAKE_CURRENT_LIST_DIR}/corpus.jsonl' | cmp - '${CMAKE_CURRENT_LIST_DIR}/expected_ids.jsonl'")
# tokenizer.json loader and the tokenize path under malformed input: the fuzz target's corpus,
# replayed in normal CI; libFuzzer target with VDN_FUZZ=ON (ops/fuzz.sh)
add_executable(replay_tokenizer ${CMAKE_CURRENT_LIST_DIR}/fuzz_tokenizer.c
                                ${CMAKE_SOURCE_DIR}/ops/test/fuzz_replay_main.c)
target_link_libraries(replay_tokenizer PRIVATE vdn_text)
add_test(NAME text_tokenizer_fuzz_replay COMMAND replay_tokenizer ${CMAKE_CURRENT_LIST_DIR}/corpus_tokenizer)
if(VDN_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_tokenizer ${CMAKE_CURRENT_LIST_DIR}/fuzz_tokenizer.c)
  target_compile_options(fuzz_tokenizer PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_tokenizer PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_tokenizer PRIVATE vdn_text)
endif()
# The encoder (CPU, fp32) against the public transformers Qwen3-VL model's hidden states on the
# tiny random checkpoint (expected_hidden.safetensors, made by reference/make_expected_hidden.py)
add_executable(test_encoder ${CMAKE_CURRENT_LIST_DIR}/test_encoder.c)
target_link_libraries(test_encoder PRIVATE vdn_text vdn_backends)
add_test(NAME text_encoder_vs_transformers
         COMMAND sh -c "rm -rf te_ckpt && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out te_ckpt >/dev/null && $<TARGET_FILE:test_encoder> te_ckpt '${CMAKE_CURRENT_LIST_DIR}/expected_hidden.safetensors' cpu"
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# The same on the CUDA backend (bf16 weights and activations, as the released model runs): against the
# transformers values and against the CPU backend (label gpu; exit 77 without a GPU)
add_test(NAME text_encoder_cuda
         COMMAND sh -c "rm -rf te_ckpt_cuda && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out te_ckpt_cuda >/dev/null && $<TARGET_FILE:test_encoder> te_ckpt_cuda '${CMAKE_CURRENT_LIST_DIR}/expected_hidden.safetensors' cuda 3e-2"
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(text_encoder_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
# fp8 precision (e4m3 Linears with row scales) on the CPU's quantised oracle: against the
# transformers values and the fp32 encoder within bounds argued from e4m3's precision, a lower
# bound that a skipped quantisation fails, the memory it holds and peaks at while loading
add_test(NAME text_encoder_fp8
         COMMAND sh -c "rm -rf te_ckpt_fp8 && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out te_ckpt_fp8 >/dev/null && $<TARGET_FILE:test_encoder> te_ckpt_fp8 '${CMAKE_CURRENT_LIST_DIR}/expected_hidden.safetensors' cpu 1e-4 fp8"
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# The same on CUDA, plus CUDA fp8 against the CPU's fp8 oracle (label gpu; exit 77 without a GPU):
# closer to it (relative L2) than the oracle is to fp32, since bf16 activations change only some
# of the activations' e4m3 roundings (test_encoder.c says why; a max-error bound does not hold:
# one changed code is a whole e4m3 step, 5-7% of max |h| on the H200). TOL is unused at fp8.
add_test(NAME text_encoder_cuda_fp8
         COMMAND sh -c "rm -rf te_ckpt_cuda_fp8 && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out te_ckpt_cuda_fp8 >/dev/null && $<TARGET_FILE:test_encoder> te_ckpt_cuda_fp8 '${CMAKE_CURRENT_LIST_DIR}/expected_hidden.safetensors' cuda 5e-2 fp8"
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(text_encoder_cuda_fp8 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
if(VDN_FARM) # `vdn worker` too
  # --precision at the command line: vdn encode, vdn bench text-encoder, vdn worker
  add_test(NAME text_precision_cli
           COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_precision_cli.py $<TARGET_FILE:vdn>
                   ${VDN_QWEN3_TOKENIZER} ${CMAKE_CURRENT_BINARY_DIR}/precision_cli)
  set_tests_properties(text_precision_cli PROPERTIES TIMEOUT 120)
endif()
# Pictures in (the Qwen3-VL vision path): the processor, the presentation, the vision tower and
# the decoder with DeepStack and multimodal positions, against an independent float64 numpy
# model of the whole path (vision_numpy_ref.py drives `test_vision dump`) on the tiny checkpoint
# with its vision tower, and test_vision's refusals
add_executable(test_vision ${CMAKE_CURRENT_LIST_DIR}/test_vision.c)
target_link_libraries(test_vision PRIVATE vdn_text vdn_backends)
add_test(NAME text_vision_numpy
         COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/vision_numpy_ref.py $<TARGET_FILE:vdn>
                 $<TARGET_FILE:test_vision> ${VDN_QWEN3_TOKENIZER} ${CMAKE_CURRENT_BINARY_DIR}/vision_np)
# The same on CUDA (bf16 weights and activations, as the released model runs) against the float64
# model (label gpu; exit 77 without a GPU)
add_test(NAME text_vision_numpy_cuda
         COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/vision_numpy_ref.py $<TARGET_FILE:vdn>
                 $<TARGET_FILE:test_vision> ${VDN_QWEN3_TOKENIZER} ${CMAKE_CURRENT_BINARY_DIR}/vision_np_cuda
                 cuda 3e-2)
set_tests_properties(text_vision_numpy_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
# the vision path's config parsers (processor/preprocessor_config.json, config.json's
# vision_config) under malformed input: the fuzz target's corpus replayed in normal CI; libFuzzer
# target with VDN_FUZZ=ON
add_executable(replay_vision_config ${CMAKE_CURRENT_LIST_DIR}/fuzz_vision_config.c
                                    ${CMAKE_SOURCE_DIR}/ops/test/fuzz_replay_main.c)
target_link_libraries(replay_vision_config PRIVATE vdn_text)
add_test(NAME text_vision_config_fuzz_replay
         COMMAND replay_vision_config ${CMAKE_CURRENT_LIST_DIR}/corpus_vision_config)
if(VDN_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_vision_config ${CMAKE_CURRENT_LIST_DIR}/fuzz_vision_config.c)
  target_compile_options(fuzz_vision_config PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_vision_config PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_vision_config PRIVATE vdn_text)
endif()
# Against the public transformers model (expected_vision.safetensors, made on the GPU machine by
# ops/reference/qwen3vl_vision_reference.py): CPU fp32 within 1e-4, CUDA bf16 (label gpu)
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/expected_vision.safetensors)
  add_test(NAME text_vision_vs_transformers
           COMMAND sh -c "rm -rf tv_ckpt && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out tv_ckpt >/dev/null && $<TARGET_FILE:test_vision> expected tv_ckpt '${CMAKE_CURRENT_LIST_DIR}/expected_vision.safetensors' cpu 1e-4"
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  add_test(NAME text_vision_cuda
           COMMAND sh -c "rm -rf tv_ckpt_cuda && $<TARGET_FILE:vdn> ckpt init --preset tiny --text-encoder --tokenizer-json '${VDN_QWEN3_TOKENIZER}' --out tv_ckpt_cuda >/dev/null && $<TARGET_FILE:test_vision> expected tv_ckpt_cuda '${CMAKE_CURRENT_LIST_DIR}/expected_vision.safetensors' cuda 3e-2"
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(text_vision_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
