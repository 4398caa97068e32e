// Finds libstk for the linker.  No dependencies (the crate must build offline):
//   STK_LIB_DIR   directory holding libstk.so (e.g. the meson build dir); also baked in as an
//                 rpath so `cargo test` runs against exactly that library
//   STK_STATIC=1  link libstk.a instead, with its dependencies and the C++ runtime
// Without STK_LIB_DIR, `pkg-config --variable=libdir stk` is tried, then the system linker paths.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=STK_LIB_DIR");
    println!("cargo:rerun-if-env-changed=STK_STATIC");
    println!("cargo:rerun-if-changed=build.rs");

    let lib_dir = env::var("STK_LIB_DIR").ok().filter(|d| !d.is_empty()).or_else(|| {
        let out = Command::new("pkg-config").args(["--variable=libdir", "stk"]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (!dir.is_empty()).then_some(dir)
    });

    let static_link = env::var("STK_STATIC").map(|v| v == "1").unwrap_or(false);
    if let Some(dir) = &lib_dir {
        println!("cargo:rustc-link-search=native={dir}");
        if !static_link {
            // Tests and binaries of this package load the library they were linked against.
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
    if static_link {
        println!("cargo:rustc-link-lib=static=stk");
        // libstk.a's own dependencies (meson.build: stk_deps), then the C++ runtime.
        for dep in ["deflate", "crypto", "isal", "simdjson", "re2", "hwy", "blis", "stdc++"] {
            println!("cargo:rustc-link-lib=dylib={dep}");
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=stk");
    }
}
