# attnlab_layer(NAME SOURCES ... [PAGE_SOURCES ...] [BELOW lower_layer...]): one layer of attnlab as a static
# library `attnlab_NAME`, aliased `attnlab::NAME`, with the public headers under
# include/attnlab/, linked to the layers below it that it uses (and so to what they use):
# the scenario layer uses core alone, so a scenario's reader does not bring the model
# runtime (OpenBLAS, PCRE2) with it.
function(attnlab_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;PAGE_SOURCES;BELOW" ${ARGN})
  add_library(attnlab_${name} STATIC ${L_SOURCES} ${L_PAGE_SOURCES})
  # PAGE_SOURCES are the layer's files that the page's WebAssembly engine compiles too
  # (src/wasm/), collected here so that no second list of them is kept.
  list(TRANSFORM L_PAGE_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set_property(GLOBAL APPEND PROPERTY ATTNLAB_PAGE_SOURCES ${L_PAGE_SOURCES})
  add_library(attnlab::${name} ALIAS attnlab_${name})
  set_target_properties(attnlab_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(attnlab_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Designated initializers that leave fields at their defaults are intended, not a mistake.
  target_compile_options(attnlab_${name} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(ATTNLAB_NATIVE)
    target_compile_options(attnlab_${name} PRIVATE -march=native)
  endif()
  attnlab_unity_build(attnlab_${name})
  foreach(below IN LISTS L_BELOW)  # the layers it uses, each below it in the order
    target_link_libraries(attnlab_${name} PUBLIC attnlab::${below})
  endforeach()
endfunction()

# Warnings for the faces and tests, which are not layers.
set(ATTNLAB_WARNINGS -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
