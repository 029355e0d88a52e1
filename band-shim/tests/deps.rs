//! band-shim is linked static (`band-server/build.rs`): a C library in what it links (one with
//! thread-local storage breaks a static-pie) would break it, and its startup cost is per command.
//! What it links is this crate's normal dependencies, with the features the whole workspace
//! resolves (Cargo unifies them): none of them may build or link C code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

/// The host's target triple (`rustc -vV`): the rustc beside this cargo, else the one on PATH.
fn host_triple() -> String {
    let beside = std::path::Path::new(env!("CARGO")).with_file_name("rustc");
    let rustc = if beside.is_file() {
        beside
    } else {
        "rustc".into()
    };
    let out = std::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", rustc.display()));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names its host")
        .to_string()
}

#[test]
fn the_shim_links_no_c_library_whatever_the_workspace_resolves() {
    // Offline, for this host only: the lock file also holds other platforms' crates (chrono's
    // android_system_properties), which no build here downloads, so a whole-graph `cargo
    // metadata --offline` failed on a fresh cargo home.
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages: BTreeMap<&str, &serde_json::Value> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let shim = packages
        .values()
        .find(|p| p["name"] == "band-shim")
        .expect("band-shim in the workspace");
    let is_proc_macro = |p: &serde_json::Value| {
        p["targets"].as_array().unwrap().iter().any(|t| {
            t["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "proc-macro")
        })
    };
    // The normal dependencies, transitively, except proc macros (they run in the compiler).
    let mut linked = BTreeSet::new();
    let mut todo = vec![shim["id"].as_str().unwrap()];
    while let Some(id) = todo.pop() {
        if !linked.insert(id) {
            continue;
        }
        for d in nodes[id]["deps"].as_array().unwrap() {
            let normal = d["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let pkg = d["pkg"].as_str().unwrap();
            if normal && !is_proc_macro(packages[pkg]) {
                todo.push(pkg);
            }
        }
    }
    let names: BTreeSet<&str> = linked
        .iter()
        .map(|id| packages[id]["name"].as_str().unwrap())
        .collect();
    // Sanity: the walk found the crates the shim uses.
    for n in ["band-shim", "serde_json", "libc"] {
        assert!(names.contains(n), "{names:?}");
    }
    // Nothing of band's other crates, nothing that links a native library (`links`) or builds C
    // code (a `cc` or `pkg-config` build dependency).
    let mut wrong = Vec::new();
    for id in &linked {
        let p = packages[id];
        let name = p["name"].as_str().unwrap();
        if ["band", "band-server", "band-test"].contains(&name) {
            wrong.push(format!("{name}: one of band's other crates"));
        }
        if !p["links"].is_null() {
            wrong.push(format!("{name}: links {}", p["links"]));
        }
        for d in p["dependencies"].as_array().unwrap() {
            if d["kind"] == "build"
                && ["cc", "pkg-config", "cmake"].contains(&d["name"].as_str().unwrap())
            {
                wrong.push(format!("{name}: builds with {}", d["name"]));
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "band-shim links {names:?}");
}
