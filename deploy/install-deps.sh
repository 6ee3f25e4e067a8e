#!/usr/bin/env bash
# Installs xv's build and run dependencies from Debian's archive. Idempotent: packages already present
# are not fetched again, and apt-get update runs only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3 libboost-dev libspdlog-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  libpcre2-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libzstd-dev libssl-dev
  fortunes                # the demo corpus: real English text, one fortune per document
  sentencepiece           # the tokenizer benchmark's comparison
  iproute2 procps
  openssl                 # auth_test: the test CA and certificates of the TLS round trip
  clang python3           # .ci/thread-safety-check: clang -Wthread-safety over compile_commands.json
  chromium                # the dashboard e2e test's real browser (headless --dump-dom)
  hipcc                   # trainer_kernels_hip_compile: the fused kernels compiled for AMD GPUs
  slurm-wlm               # deploy_slurm_workers_test: a one-node Slurm runs deploy/slurm/xv-workers.sbatch
  systemd                 # deploy_install_test: systemd-analyze verify on the installed units
  python3-torch python3-numpy  # autoresearch forks: python/xv_autoresearch/prepare.py and its tests
  bubblewrap              # sandboxed command/autoresearch trainers (worker/trainer_sandbox.h)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "xv deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "xv deps: all ${#PACKAGES[@]} packages present"
fi

# Debian's LibTorch uses whatever BLAS the alternative points to; the reference BLAS is ~20x slower.
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
case "$blas" in
  *openblas*) ;;
  *) alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
     if [ -n "$alt" ]; then $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt"; fi ;;
esac
lapack=$(update-alternatives --query liblapack.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
case "$lapack" in
  *openblas*) ;;
  *) alt=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -1 || true)
     if [ -n "$alt" ]; then $SUDO update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$alt"; fi ;;
esac
echo "xv deps: BLAS -> $(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')"
