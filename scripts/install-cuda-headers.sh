#!/bin/sh
# Installs Debian 12's CUDA 11.8 toolkit (nvcc, headers, libcuda stubs) from
# non-free, for building and vetting the `cuda` build tag on machines
# without a GPU. Root only; a no-op when nvcc and cuda.h are present.
set -eu
if command -v nvcc >/dev/null 2>&1 && [ -f /usr/include/cuda.h ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-cuda-headers: need root and apt-get to install nvidia-cuda-toolkit" >&2
	exit 1
fi
if ! grep -rqs "non-free" /etc/apt/sources.list /etc/apt/sources.list.d/; then
	cat >/etc/apt/sources.list.d/tapeloop-nonfree.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit nvidia-cuda-dev >/dev/null
