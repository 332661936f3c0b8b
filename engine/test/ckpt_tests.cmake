# Checkpoints, file formats, prompt caches, LoRA (owner: e1). Included from engine/CMakeLists.txt.
target_sources(vdn_engine PRIVATE safetensors.c prompt.c ckpt_config.c)
