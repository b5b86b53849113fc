#!/usr/bin/env bash
# Installs every Debian package attnscope needs to build, test, run and benchmark.
# Idempotent: packages already present are skipped, and apt is not touched at all then.
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format git
  # fuzz targets (tests/fuzz): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # compute core
  libeigen3-dev nlohmann-json3-dev libcli11-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy libopenblas0-pthread
  # models: formats, tokenizers, images
  libpcre2-dev libsentencepiece-dev libstb-dev libzip-dev zlib1g-dev libicu-dev
  # image datasets: Fashion-MNIST (IDX, gzip), the default vision model's test set
  dataset-fashion-mnist
  # session file hashes (SHA-256)
  libssl-dev
  # model-file tests: SentencePiece reference (npm, for fetching real vocabularies, is added below)
  python3-sentencepiece
  # architecture goldens (tests/ref/make_goldens.py, not run by CI) and the forward-pass bench
  # against PyTorch (tests/bench/forward_vs_torch.py)
  python3-torch python3-pil
  # Vulkan compute and rendering (lavapipe is the CPU device used in CI)
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  # GUI
  qt6-base-dev qt6-svg-dev libimgui-dev fonts-dejavu-core
  # GUI tests, screenshots, figure checks
  xvfb xauth imagemagick ghostscript poppler-utils libxml2-utils
  # one font for every figure (text metrics and golden images depend on it)
  fonts-dejavu-core
  # the Debian package (`make package`): man page, icons, and the checks of tests/package
  help2man librsvg2-bin desktop-file-utils appstream shared-mime-info bash-completion
)

# Machines that carry Node.js from another source already have npm, and Debian's npm conflicts
# with it: ask apt for npm only where no npm exists.
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
