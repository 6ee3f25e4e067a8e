# The daemon's service end to end in one process (real gRPC over a unix socket, a fake worker stream),
# and the real xvd binary as a process (kill -9 and restart, SIGTERM, one daemon per state dir).
xv_add_test(NAME daemon_api_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_api_test.cc
            LIBS xv_daemon_api TIMEOUT 90 LABELS daemon integration)
xv_add_test(NAME daemon_restart_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_restart_test.cc
            LIBS xv_store xv_proto TIMEOUT 90 LABELS daemon integration)
if(TARGET daemon_restart_test)
  add_dependencies(daemon_restart_test xvd)
endif()
# Campaigns, rounds and keep/discard decisions over real gRPC with a scripted fake worker.
xv_add_test(NAME daemon_campaign_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_campaign_test.cc
            LIBS xv_daemon_api TIMEOUT 90 LABELS daemon integration)
