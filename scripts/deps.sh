#!/bin/sh
# Installs every Debian 12 package moetrain's build, demo and tests need (make included, so
# this runs on a fresh machine). Uses sudo when not run as root.
set -e
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  make g++ pkg-config libtomlplusplus-dev libcli11-dev doctest-dev libhdf5-dev hdf5-tools \
  libopenmpi-dev openmpi-bin libopenblas-dev fortunes >/dev/null
echo "deps: Debian packages installed"
