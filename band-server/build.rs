//! band-shim starts once per command inside the sandbox: link it stripped, so the kernel maps a
//! few MB instead of a 100 MB file of debug sections (issue 17, item 4).
fn main() {
    println!("cargo:rustc-link-arg-bin=band-shim=-Wl,--strip-all");
    println!("cargo:rerun-if-changed=build.rs");
}
