#!/bin/sh
# Installs scenelab's build and test dependencies from Debian/Ubuntu packages (only the missing
# ones). The CUDA toolkit is optional and not installed here: without it everything runs on the CPU.
set -eu
pkgs="build-essential cmake pkg-config libeigen3-dev libhdf5-dev libstb-dev libgtest-dev
      libjpeg-dev libpng-dev libdeflate-dev libavformat-dev libavcodec-dev libswscale-dev
      python3 python3-numpy python3-h5py python3-torch"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
