# The worker protocol's edge in xvd (issue 11): unreadable messages named by field, trainer text
# repaired, Register bounded, over real gRPC with an in-process daemon.
xv_add_test(NAME worker_protocol_edge_test
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/worker_protocol_edge_test.cc
            LIBS xv_daemon_api TIMEOUT 90 LABELS daemon integration)
