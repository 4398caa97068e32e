#!/bin/sh
# meson test "bindings-consumers": bindings/README.md's "Using the crate / package from your own
# program" files, built in a directory outside the repository against an installed prefix (meson
# install --destdir), as the README says:
#   - Rust, dynamic: STK_LIB_DIR from pkg-config, the README's build.rs gives the rpath;
#   - Rust, STK_STATIC=1: libstk.a, no libstk.so needed;
#   - Go: replace line to bindings/go, CGO flags from pkg-config plus an rpath.
# Each program runs with no LD_LIBRARY_PATH, converts bindings/testdata/tiny-gpt2 and must print
# "31 arrays, 385895 bytes verified".  A language whose toolchain is missing is skipped (CARGO, GO).
#   STK_BUILD_ROOT, STK_SOURCE_ROOT  the build and source trees; MESON, CARGO, GO optional
set -eu
: "${STK_BUILD_ROOT:?}" "${STK_SOURCE_ROOT:?}"
MESON=${MESON:-meson}
unset LD_LIBRARY_PATH  # meson test points it at the build tree; a user's shell does not
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
model="$STK_SOURCE_ROOT/bindings/testdata/tiny-gpt2"
want="31 arrays, 385895 bytes verified"
readme="$STK_SOURCE_ROOT/bindings/README.md"
die() { echo "bindings_consumers: $*" >&2; exit 1; }

# extract NAME DEST: the fenced block after "<!-- file: NAME -->", /path/to/stk made real.
extract() {
  mkdir -p "$(dirname "$2")"
  awk -v tag="<!-- file: $1 -->" '$0 == tag {want = 1; next} want && /^```/ {if (on) exit; on = 1; next} on {print}' \
    "$readme" | sed "s#/path/to/stk#$STK_SOURCE_ROOT#g" >"$2"
  [ -s "$2" ] || die "bindings/README.md has no block for $1"
}

check_run() {  # label, command...
  label=$1
  shift
  out=$("$@" 2>"$tmp/err") || { cat "$tmp/err" >&2; die "$label: the program failed"; }
  [ "$out" = "$want" ] || die "$label: printed '$out', expected '$want'"
  echo "ok: $label"
}

"$MESON" install -C "$STK_BUILD_ROOT" --no-rebuild --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; die "meson install failed"; }
pc=$(find "$tmp/root" -name stk.pc | head -n 1)
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
libdir="$tmp/root$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=libdir stk)"

cargo=${CARGO:-$(command -v cargo || true)}
if [ -n "$cargo" ]; then
  app="$tmp/rust-app"
  extract rust/Cargo.toml "$app/Cargo.toml"
  extract rust/build.rs "$app/build.rs"
  extract rust/src/main.rs "$app/src/main.rs"
  (cd "$app" && STK_LIB_DIR="$libdir" CARGO_TARGET_DIR="$tmp/rust-dyn" "$cargo" build --offline -q) ||
    die "rust: cargo build failed"
  check_run "rust dynamic (rpath from DEP_STK_LIB_DIR)" "$tmp/rust-dyn/debug/convert" "$model" "$tmp/out-rust-dyn"
  (cd "$app" && STK_STATIC=1 STK_LIB_DIR="$libdir" CARGO_TARGET_DIR="$tmp/rust-static" "$cargo" build --offline -q) ||
    die "rust: STK_STATIC=1 cargo build failed"
  if readelf -d "$tmp/rust-static/debug/convert" | grep -q 'libstk\.so'; then die "rust static: still needs libstk.so"; fi
  check_run "rust STK_STATIC=1" "$tmp/rust-static/debug/convert" "$model" "$tmp/out-rust-static"
else
  echo "skip: no cargo"
fi

go=${GO:-$(command -v go || true)}
if [ -n "$go" ]; then
  app="$tmp/go-app"
  extract go/go.mod "$app/go.mod"
  extract go/main.go "$app/main.go"
  (cd "$app" &&
    CGO_ENABLED=1 CGO_CFLAGS="$(pkg-config --cflags stk)" \
    CGO_LDFLAGS="$(pkg-config --libs stk) -Wl,-rpath,$libdir" \
    GOCACHE="$tmp/go-cache" GOPATH="$tmp/gopath" GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on \
    "$go" build -o "$tmp/go-convert" .) || die "go: build failed"
  check_run "go (replace line, rpath)" "$tmp/go-convert" "$model" "$tmp/out-go"
else
  echo "skip: no go"
fi
