#!/bin/sh
# Installs HAProxy (Debian package "haproxy", 2.6 on Debian 12) for the
# overhead benchmark's comparison row. The benchmark itself never runs this:
# without haproxy on PATH it measures direct and prefixgate only.
set -eu
if command -v haproxy >/dev/null 2>&1; then
	haproxy -v | head -n 1
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-haproxy.sh: run as root (apt-get install)" >&2
	exit 1
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy
# The package enables a system service with its default config; the
# benchmark starts its own process, so stop the service if one is running.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet haproxy 2>/dev/null; then
	systemctl stop haproxy || true
fi
haproxy -v | head -n 1
