#!/bin/sh
# meson test "bindings-rust": builds bindings/rust and runs its tests against the libstk of this
# build.  Offline (the crate has no dependencies); cargo's output stays in the build dir.
#   STK_LIB_DIR      directory of libstk.so (meson's build root)
#   STK_SOURCE_ROOT  the source tree
#   CARGO            the cargo meson found (default: cargo on PATH)
set -eu
: "${STK_LIB_DIR:?set STK_LIB_DIR to the directory of libstk.so}"
: "${STK_SOURCE_ROOT:?set STK_SOURCE_ROOT to the source tree}"
export STK_LIB_DIR
export STK_INCLUDE_DIR="${STK_INCLUDE_DIR:-$STK_SOURCE_ROOT/include}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$STK_LIB_DIR/bindings/rust-target}"
export CARGO_TERM_COLOR=never
cd "$STK_SOURCE_ROOT/bindings/rust"
exec "${CARGO:-cargo}" test --offline --locked --no-fail-fast
