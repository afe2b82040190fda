# Sourced by scripts/heapsnap and scripts/test: makes sure the Debian packages heapsnap needs are
# installed. As root, installs what is missing; otherwise prints the one apt-get line to run.

HEAPSNAP_BUILD_PACKAGES=(
  g++ meson ninja-build pkg-config
  protobuf-compiler libprotobuf-dev
  libzstd-dev zstd zlib1g-dev
  libmimalloc-dev libmimalloc2.0
  libunwind-dev libdw-dev libelf-dev
  doctest-dev nlohmann-json3-dev libcli11-dev
  python3
)
# Only the test suite needs these (reference implementations and peers to compare against).
HEAPSNAP_TEST_PACKAGES=(python3-networkx valgrind clang libclang-rt-14-dev golang-go)

heapsnap_missing_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]}"
}

heapsnap_ensure_packages() {
  local missing
  missing=$(heapsnap_missing_packages "$@")
  [[ -z $missing ]] && return 0
  if [[ $(id -u) -eq 0 ]]; then
    echo "heapsnap: installing missing packages: $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq $missing >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get install -y -qq $missing >&2 || { echo "heapsnap: apt-get install failed" >&2; return 1; }
    fi
  else
    echo "heapsnap: missing packages. Run:" >&2
    echo "  sudo apt-get install -y $missing" >&2
    return 1
  fi
}

# Configures (first time) and builds the tree in $1 (default: build) with extra meson args.
heapsnap_build() {
  local dir=${1:-build}; shift || true
  local top; top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ ! -f $top/$dir/build.ninja ]]; then
    meson setup "$top/$dir" "$top" "$@" >/dev/null || { echo "heapsnap: meson setup failed" >&2; return 1; }
  fi
  ninja -C "$top/$dir" >/dev/null || { ninja -C "$top/$dir" >&2; return 1; }
}
