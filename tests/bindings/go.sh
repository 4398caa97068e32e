#!/bin/sh
# meson test "bindings-go": builds bindings/go (cgo) and runs its tests against the libstk of
# this build.  Standard library only, no module downloads; Go's caches stay in the build dir.
#   STK_LIB_DIR      directory of libstk.so (meson's build root)
#   STK_SOURCE_ROOT  the source tree
#   GO               the go meson found (default: go on PATH)
set -eu
: "${STK_LIB_DIR:?set STK_LIB_DIR to the directory of libstk.so}"
: "${STK_SOURCE_ROOT:?set STK_SOURCE_ROOT to the source tree}"
export CGO_ENABLED=1
export CGO_CFLAGS="-I${STK_INCLUDE_DIR:-$STK_SOURCE_ROOT/include}"
export CGO_LDFLAGS="-L$STK_LIB_DIR -Wl,-rpath,$STK_LIB_DIR"
export GOCACHE="$STK_LIB_DIR/bindings/go-cache"
export GOPATH="$STK_LIB_DIR/bindings/gopath"
export GOPROXY=off GOFLAGS= GO111MODULE=on
cd "$STK_SOURCE_ROOT/bindings/go"
exec "${GO:-go}" test -count=1 ./...
