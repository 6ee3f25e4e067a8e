# xv-train end to end: runs the real xv-train binary as a child process on a tiny data directory written
# by the tokenizer's shard writer: a short CPU training run (start, step, eval, summary events, exit 0),
# a diverging one (nan event, exit 3) and bad configurations (exit 2 / 5).
if(TARGET xv-train AND TARGET xv_trainer_data)
  xv_add_test(NAME trainer_run_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/trainer_run_test.cc
    LIBS xv_trainer_data xv_tokenizer xv_common
    LABELS integration trainer
    TIMEOUT 240)
  add_dependencies(trainer_run_test xv-train)
endif()
