// Finds libstk for the linker.  No dependencies (the crate must build offline):
//   STK_LIB_DIR   directory holding libstk.so / libstk.a (e.g. the meson build dir); also baked
//                 in as an rpath for this crate's own tests and examples
//   STK_STATIC=1  link libstk.a instead, with its dependencies, the C++ runtime and libm: the
//                 program then needs no libstk.so at run time
// Without STK_LIB_DIR, `pkg-config --variable=libdir stk` is tried, then the system linker paths.
//
// The directory is also handed to the build scripts of crates that depend on this one, as
// DEP_STK_LIB_DIR (Cargo.toml has `links = "stk"`): cargo does not pass this crate's link
// arguments on to their binaries, so a program that links libstk.so dynamically adds its own
// rpath from it (bindings/README.md shows the three-line build.rs).
use std::env;
use std::process::Command;

// libstk.a's own dependencies: the same list as stk_static_link_flags in meson.build (which
// pkg-config --static --libs stk prints), in link order: the shared ones, then the numeric
// archives linked statically (docs/decisions.md, "The numeric mode": reference LAPACK over
// reference BLAS, which Debian keeps in <libdir>/blas/, and BLIS), then what those need.
const STATIC_DEPS: [&str; 7] = ["deflate", "crypto", "isal", "simdjson", "re2", "hwy", "utf8proc"];
const NUMERIC_ARCHIVES: [&str; 4] = ["liblapacke.a", "liblapack_pic.a", "libblas.a", "libblis.a"];
const NUMERIC_TAIL: [&str; 5] = ["gfortran", "gomp", "stdc++", "m", "pthread"];

// The directories of those archives: the C compiler's multiarch libdir and Debian's reference
// BLAS beside it (<libdir>/blas/libblas.a: the system libblas.so.3 may be another BLAS).
fn numeric_archive_dirs() -> Vec<String> {
    let multiarch = Command::new("cc")
        .arg("-print-multiarch")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let libdir = if multiarch.is_empty() { "/usr/lib".to_string() } else { format!("/usr/lib/{multiarch}") };
    if !std::path::Path::new(&format!("{libdir}/blas/libblas.a")).exists() {
        panic!("STK_STATIC=1: no reference BLAS archive {libdir}/blas/libblas.a (Debian's libblas-dev)");
    }
    vec![libdir.clone(), format!("{libdir}/blas")]
}

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
        println!("cargo:lib_dir={dir}");
        if !static_link {
            // Tests and binaries of this package load the library they were linked against.
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
    println!("cargo:static={}", if static_link { "1" } else { "0" });
    if static_link {
        println!("cargo:rustc-link-lib=static=stk");
        for dep in STATIC_DEPS {
            println!("cargo:rustc-link-lib=dylib={dep}");
        }
        for dir in numeric_archive_dirs() {
            println!("cargo:rustc-link-search=native={dir}");
        }
        for archive in NUMERIC_ARCHIVES {
            println!("cargo:rustc-link-lib=static:+verbatim={archive}");
        }
        for dep in NUMERIC_TAIL {
            println!("cargo:rustc-link-lib=dylib={dep}");
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=stk");
    }
}
