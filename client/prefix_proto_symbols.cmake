# Renames the protobuf-c generated symbols in the static libkubelease from
# kubelease__v1__* to kl__v1__*, definitions and references alike, so that
# the archive defines no global outside kl_ (an application that links its
# own copy of the generated code, like kubeleased, cannot clash with it).
# The shared library needs no renaming: it exports only the kl_ API.
#
#   cmake -DNM=nm -DOBJCOPY=objcopy -DARCHIVE=libkubelease.a -P prefix_proto_symbols.cmake
foreach(var NM OBJCOPY ARCHIVE)
  if(NOT ${var})
    message(FATAL_ERROR "prefix_proto_symbols.cmake: ${var} is not set")
  endif()
endforeach()

execute_process(COMMAND ${NM} -g --defined-only ${ARCHIVE}
  OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${ARCHIVE} failed")
endif()
# Also names the toolchain derives from them, such as ASan's ODR indicators
# (__odr_asan.kubelease__v1__...), which its runtime finds by address.
string(REGEX MATCHALL "[A-Za-z0-9_.]*kubelease__v1__[A-Za-z0-9_]+" names "${symbols}")
if(NOT names)
  return() # already renamed
endif()
list(REMOVE_DUPLICATES names)
set(map "")
foreach(name ${names})
  string(REPLACE "kubelease__v1__" "kl__v1__" renamed "${name}")
  string(APPEND map "${name} ${renamed}\n")
endforeach()
file(WRITE ${ARCHIVE}.renames "${map}")
execute_process(COMMAND ${OBJCOPY} --redefine-syms=${ARCHIVE}.renames ${ARCHIVE} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OBJCOPY} --redefine-syms ${ARCHIVE} failed")
endif()
