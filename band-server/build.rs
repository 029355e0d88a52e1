//! band-shim starts once per command inside the sandbox (issue 17, item 4), so it is linked
//! stripped (the kernel maps ~1 MB instead of 100 MB of debug sections) and, on glibc Linux,
//! static: no `ld.so`, no shared libraries to map and relocate. A static-pie of the same Rust
//! code starts in about 0.4 ms of CPU against 0.7 ms dynamically linked (`perf stat -r 300`).
//! band-jail, started once per run in front of the script, is linked the same way (it uses
//! band-server's own modules, whose dependencies are pure Rust too: no C library reaches it).
//!
//! Cargo has no per-binary `-C target-feature=+crt-static` (and setting it for the whole build
//! breaks proc macros), so the shim alone gets `-static-pie` as a link argument. rustc still names
//! the libraries of a dynamic link (`-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`); a directory of
//! links to the static archives, searched before the system's, makes each of those names find its
//! archive (`libgcc_s` → `libgcc_eh.a`, the unwinder a `crt-static` link uses). Where the archives
//! are missing (no libc6-dev) or the build is a cross build, the shim stays dynamic, with a warning.
//!
//! What the static shim links is only the `band-shim` crate and its dependencies (serde,
//! serde_json, libc, anyhow: pure Rust), whatever band-server depends on: `src/bin/band-shim.rs`
//! names no other crate, and rustc links only the crates a target uses. A C library with
//! thread-local storage in band-server's dependencies therefore cannot reach it. The executable
//! stays a target of this package, and this link step with it: Cargo builds only the selected
//! packages' binaries (artifact dependencies are unstable), and `cargo build -p band-server` must
//! keep building all three programs (the VM's install, the run bench, the tests).
use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc links for std on linux-gnu, and the archive each name must find.
const ARCHIVES: &[(&str, &str)] = &[
    ("libgcc_s.a", "libgcc_eh.a"),
    ("libgcc.a", "libgcc.a"),
    ("libc.a", "libc.a"),
    ("libm.a", "libm.a"),
    ("libpthread.a", "libpthread.a"),
    ("libdl.a", "libdl.a"),
    ("librt.a", "librt.a"),
    ("libutil.a", "libutil.a"),
];

fn main() {
    println!("cargo:rustc-link-arg-bin=band-shim=-Wl,--strip-all");
    // band-jail is copied into each state dir's exec cache (execute-only) and started once per
    // run: stripped, that copy is a few MB instead of 55 MB of debug sections.
    println!("cargo:rustc-link-arg-bin=band-jail=-Wl,--strip-all");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(band_shim_bare)");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let static_ok = env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ENV") == "gnu"
        && env("TARGET") == env("HOST");
    if !static_ok {
        return;
    }
    let out = PathBuf::from(env("OUT_DIR")).join("static-shim");
    match link_archives(&out) {
        Ok(()) => {
            for bin in ["band-shim", "band-jail"] {
                println!("cargo:rustc-link-arg-bin={bin}=-static-pie");
                println!("cargo:rustc-link-arg-bin={bin}=-L{}", out.display());
                // libc.a's own helpers (a static link's -lgcc), after -lc; and the unwinder's C
                // personality, which libc.a refers to (`__gcc_personality_v0`, in
                // libgcc_eh.a), as gcc's own static link has `-lgcc -lgcc_eh -lc`. rustup's std
                // happens to pull it in earlier; with Debian's rustc (the in-target build,
                // docs/vm.md) the link fails without it.
                println!("cargo:rustc-link-arg-bin={bin}=-lgcc");
                println!("cargo:rustc-link-arg-bin={bin}=-lgcc_eh");
            }
            // No C runtime start for band-shim either (issue 17, round 6): the entry is its own
            // (`band_shim_start` in `src/bin/band-shim.rs`, then `band_shim::sys::bare`), on
            // x86-64. The C runtime's start files stay linked, unused (a test build's entry
            // jumps to their `_start`: `cargo test --all-targets` builds the binary as a test).
            if env("CARGO_CFG_TARGET_ARCH") == "x86_64" {
                println!("cargo:rustc-link-arg-bin=band-shim=-Wl,-e,band_shim_start");
                println!("cargo:rustc-cfg=band_shim_bare");
            }
        }
        Err(why) => println!("cargo:warning=band-shim is linked dynamically: {why}"),
    }
}

/// The C compiler's path of `archive`, when it has one.
fn archive_path(cc: &str, archive: &str) -> Option<PathBuf> {
    let out = Command::new(cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // An archive the compiler does not know comes back as its bare name.
    (p.is_absolute() && p.is_file()).then_some(p)
}

fn link_archives(dir: &Path) -> Result<(), String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for (name, archive) in ARCHIVES {
        let Some(src) = archive_path(&cc, archive) else {
            return Err(format!("`{cc}` has no {archive} (install libc6-dev)"));
        };
        let link = dir.join(name);
        let _ = fs::remove_file(&link);
        fs::os::unix::fs::symlink(&src, &link).map_err(|e| e.to_string())?;
    }
    Ok(())
}
