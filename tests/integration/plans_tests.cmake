# Plans end to end in one process: the real DaemonServer (SQLite file, gRPC over a unix socket), a
# scripted fake worker; a 3-phase plan (sweep -> ablation -> confirm) to done across a daemon
# restart, no-op skips, a failure map's boundary, refusals naming the YAML path, cancel.
xv_add_test(NAME daemon_plan_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/daemon_plan_test.cc
            LIBS xv_daemon_api TIMEOUT 120 LABELS daemon integration plans)
