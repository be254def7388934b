# cmake -DBIN=TEST_PROGRAM -DBASE=DIR -P own_tmp.cmake: the program run by hand (TMPDIR unset; TMP=DIR
# is where std::filesystem puts temporary files then) makes a folder of its own under DIR, its tests
# write there, and nothing is left under DIR when it returns (tests/test_main.cpp).
file(REMOVE_RECURSE "${BASE}")
file(MAKE_DIRECTORY "${BASE}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=TMPDIR TMP=${BASE} SCENELAB_EXPECT_TMP_UNDER=${BASE}
                        ${BIN} --gtest_filter=TestMain.*
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\[  PASSED  \\] 1 test")
  message(FATAL_ERROR "own_tmp: ${BIN} failed (rc ${rc}):\n${out}")
endif()
file(GLOB left "${BASE}/*")
if(left)
  message(FATAL_ERROR "own_tmp: ${BIN} left ${left}")
endif()
