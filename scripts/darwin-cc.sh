#!/usr/bin/env bash
# A C compiler for type-checking the darwin build on Linux (make
# check-darwin): runs gcc (DARWIN_CC, e.g. aarch64-linux-gnu-gcc for
# darwin/arm64) without the Apple-only flags the go command passes, and
# lets runtime/cgo's darwin files compile against Linux headers. The
# objects are never linked: this checks the Go side and compiles the C
# against Linux's headers, not Apple's.
out=()
skip=0
for a in "$@"; do
	if [ "$skip" = 1 ]; then
		skip=0
		continue
	fi
	case "$a" in
	-arch) skip=1; continue ;;
	-mmacosx-version-min=*) continue ;;
	esac
	out+=("$a")
done
# runtime/cgo's darwin/arm64 file includes Apple's TargetConditionals.h.
stub=${TMPDIR:-/tmp}/tapeloop-darwin-cc
if [ ! -f "$stub/TargetConditionals.h" ]; then
	mkdir -p "$stub"
	printf '#define TARGET_OS_IPHONE 0\n#define TARGET_OS_OSX 1\n' >"$stub/TargetConditionals.h.$$"
	mv "$stub/TargetConditionals.h.$$" "$stub/TargetConditionals.h"
fi
exec "${DARWIN_CC:-gcc}" "${out[@]}" -idirafter "$stub" -Wno-error -Wno-implicit-function-declaration -Wno-int-conversion
