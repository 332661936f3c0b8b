# engine_vs_official_reference: the engine (CPU backend, `vdn render`) against expected values computed
# by the public PyTorch reference code (diffusers MiniMax-H3 + the ComfyUI-VDN-H3 torch port), stored
# in expected_*.safetensors next to this file. How they were made: docs/reference-check.md.
add_test(NAME engine_vs_official_reference
         COMMAND ${VDN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_official_reference.py $<TARGET_FILE:vdn>
                 ${CMAKE_CURRENT_BINARY_DIR}/official_reference_tmp)
