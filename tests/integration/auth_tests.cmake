# Tokens, roles, worker credentials, audit and TLS of xvd (issue 15), one process, real gRPC.
xv_add_test(NAME auth_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/auth_test.cc
            LIBS xv_daemon_api xv_daemon_channel TIMEOUT 120 LABELS daemon integration)
if(TARGET auth_test)
  add_dependencies(auth_test xvctl)
endif()
