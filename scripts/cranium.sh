#!/bin/sh
# cranium.sh [DIR]: puts the real skull CT that Debian ships in the
# invesalius-examples package ("Cranium": 256×256×108 int16 Hounsfield
# units, x fastest, 0.957×0.957×1.5 mm) at DIR/matrix.dat (default
# /tmp/tapeloop-cranium), installing the package when it is missing and
# apt-get can, and prints the path. Read it with
#   --volume DIR/matrix.dat --shape 256,256,108 --dtype int16 --order xyz --spacing 0.95703125,0.95703125,1.5 --hu
set -eu
dir=${1:-/tmp/tapeloop-cranium}
src=/usr/share/doc/invesalius-examples/examples/Cranium.inv3
if [ ! -f "$dir/matrix.dat" ]; then
	if [ ! -f "$src" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q invesalius-examples >/dev/null
		else
			echo "cranium.sh: $src is missing: install Debian's invesalius-examples (as root: apt-get install invesalius-examples)" >&2
			exit 1
		fi
	fi
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/.x.XXXXXX")
	tar -xzf "$src" -C "$tmp"
	mv "$(find "$tmp" -name matrix.dat | head -n 1)" "$dir/matrix.dat.part"
	rm -rf "$tmp"
	mv "$dir/matrix.dat.part" "$dir/matrix.dat"
fi
echo "$dir/matrix.dat"
