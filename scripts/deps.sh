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
HEAPSNAP_TEST_PACKAGES=(python3-networkx valgrind clang libclang-rt-14-dev golang-go chromium)
# Real programs' own test suites, natively and traced (tests/integration/suite_cases.py, scripts/suites).
HEAPSNAP_TEST_PACKAGES+=(libpython3.11-testsuite sqlite3 git)
# The manual's test renders the generated pages (tests/integration/term_cases.py man).
HEAPSNAP_TEST_PACKAGES+=(groff-base man-db)
# The runtime and allocator matrix (tests/integration/compat_cases.py): other allocators, preloaded
# and linked, and Rust programs.
HEAPSNAP_TEST_PACKAGES+=(libjemalloc2 libtcmalloc-minimal4 rustc redis-server redis-tools)
# Only scripts/bench needs these (the peers it measures against and the workloads it runs);
# scripts/test never installs them.
HEAPSNAP_BENCH_PACKAGES=(
  heaptrack                                  # heaptrack, heaptrack_print
  google-perftools libgoogle-perftools4      # libtcmalloc.so (HEAPPROFILE), google-pprof
  valgrind                                   # massif + ms_print, callgrind
  sqlite3 time g++ python3 util-linux        # workloads; /usr/bin/time; prlimit
)

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

# What scripts/bench runs: the bench packages on top of the build ones.
heapsnap_ensure_bench_packages() {
  heapsnap_ensure_packages "${HEAPSNAP_BUILD_PACKAGES[@]}" "${HEAPSNAP_BENCH_PACKAGES[@]}"
}
