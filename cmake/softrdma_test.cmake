# softrdma_test(NAME SOURCES... [LIBS ...] [LABELS ...] [TIMEOUT s]); LABELS default: engine
# One googletest executable per test file (eRPC's layout), registered with
# ctest under its own name so a failure names the unit that broke.
function(softrdma_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE softrdma_stack GTest::gtest GTest::gtest_main ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS engine)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()
