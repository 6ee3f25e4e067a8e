# Work bounded per request and per caller (issue 11): Status during the largest submit, the cap on
# runs per submit, Watch streams without a thread each and their cap, per-caller rate limits, the
# state dir's permissions. One in-process daemon per test.
xv_add_test(NAME daemon_load_bounds_test
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_load_bounds_test.cc
            LIBS xv_daemon_api TIMEOUT 180 LABELS daemon integration)
