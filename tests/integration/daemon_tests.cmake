# The daemon's service end to end in one process: real gRPC over a unix socket, a fake worker stream.
xv_add_test(NAME daemon_api_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_api_test.cc
            LIBS xv_daemon_api TIMEOUT 90 LABELS daemon integration)
