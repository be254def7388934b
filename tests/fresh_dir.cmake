# cmake -DDIR=PATH -P fresh_dir.cmake: PATH exists and is empty afterwards.
if(NOT DIR)
  message(FATAL_ERROR "fresh_dir.cmake: -DDIR=PATH is required")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
