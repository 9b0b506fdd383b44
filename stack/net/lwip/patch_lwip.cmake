# softrdma_patch_lwip(src out name...): writes a copy of the lwIP source src
# to out with, for each name, the text in variable <name>_at replaced by
# <name>_new (both set by the caller). Stops the build if any text is
# missing: the source is not the lwIP 2.1.3 the patch was written against.
function(softrdma_patch_lwip src out)
  file(READ "${src}" text)
  foreach(name ${ARGN})
    string(FIND "${text}" "${${name}_at}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${src}: not lwIP 2.1.3's text (no ${name}_at to patch)")
    endif()
    string(REPLACE "${${name}_at}" "${${name}_new}" text "${text}")
  endforeach()
  file(WRITE "${out}.new" "${text}")
  configure_file("${out}.new" "${out}" COPYONLY)  # touched only when it changes
endfunction()
