#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries BINARY links against (and, in a
# build with the GPU backend, the cuBLAS it opens at run time), one a line:
# what the Dockerfile's slim runtime stage installs (so it follows the build, never a hand list).
#
# usage: cluster/runtime-packages.sh BINARY
set -euo pipefail
if (($# != 1)) || [[ ! -x $1 ]]; then
  echo "usage: cluster/runtime-packages.sh BINARY (an executable, got '${1:-}')" >&2
  exit 2
fi
# The GPU driver (libcuda, libnvidia-*) comes from the host at run time (NVIDIA container toolkit).
missing=$(ldd "$1" | awk '/not found/ && $1 !~ /^lib(cuda|nvidia-)/ {print $1}' | tr '\n' ' ')
if [[ -n $missing ]]; then
  echo "runtime-packages: $1 needs libraries that are not installed: $missing" >&2
  exit 1
fi
# The CUDA runtime and cuBLAS of a build with the GPU backend come from the CUDA toolkit, which
# may be installed outside Debian's packages (/usr/local/cuda); the GPU image variant installs
# them itself, so they are left out here (and named on stderr).
libs=$(ldd "$1" | awk '$3 ~ /^\// {print $3}')
# cuBLAS is opened at run time by the GPU backend (worker/gpu/cublas_api.hpp), so ldd does not
# list it: a binary with the CUDA runtime needs it as well, of the same major version.
cudart=$(grep -m1 '/libcudart\.so\.' <<<"$libs" || true)
if [[ -n $cudart ]]; then
  major=${cudart##*.so.}
  major=${major%%.*}
  for name in libcublas libcublasLt; do
    lib="$(dirname "$cudart")/$name.so.$major"
    [[ -e $lib ]] || lib=$(ldconfig -p | awk -v n="$name.so.$major" '$1 == n {print $NF; exit}')
    if [[ -z $lib || ! -e $lib ]]; then
      echo "runtime-packages: $name.so.$major (opened by the GPU backend) is not installed" >&2
      exit 1
    fi
    libs+=$'\n'"$lib"
  done
fi
while read -r lib; do
  if [[ $(basename "$lib") =~ ^lib(cudart|cublas|cublasLt)\.so ]] && ! dpkg -S "$lib" >/dev/null 2>&1; then
    echo "runtime-packages: $lib is from the CUDA toolkit, not a Debian package: left to the GPU image" >&2
    continue
  fi
  # /lib is a link to /usr/lib on merged-/usr systems; dpkg knows one of the two spellings.
  dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
    { echo "runtime-packages: no Debian package holds $lib" >&2; exit 1; }
done <<<"$libs" | cut -d: -f1 | sort -u
