#!/bin/sh
# Installs what make test-arm64 needs, Debian's arm64 cross toolchain and
# user-mode emulator: gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu (the
# CUDA emulator's C++), libc6-dev-arm64-cross and qemu-user. Root and
# apt-get only; a no-op when they are present.
set -eu
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 &&
	command -v qemu-aarch64 >/dev/null 2>&1 &&
	[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-arm64-cross: need root and apt-get to install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user" >&2
	exit 1
fi
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null
