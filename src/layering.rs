//! Dependencies point one way: a cheap lint over the source of the modules that must stay low
//! (the wire types that band-server compiles, the policy model). It reads each file's non-test,
//! non-comment code for paths that start at `crate::` or `super::` and fails on a back-edge.

use std::collections::BTreeSet;
use std::path::Path;

/// The crate-absolute module paths (`policy::spell`, `learn::exact_cli_rule`) that the file at
/// `file` (under `src/`), the module `module` (`["vm", "mux"]`), names in its code before its
/// `#[cfg(test)]` module.
fn named_paths(file: &str, module: &[&str]) -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = fs_err::read_to_string(&path).unwrap();
    let code: String = text
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let before_ok = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let rest: String = chars[i..chars.len().min(i + 7)].iter().collect();
        let base: Option<(Vec<String>, usize)> = if before_ok && rest.starts_with("crate::") {
            Some((vec![], 7))
        } else if before_ok && rest.starts_with("super::") {
            let parent = &module[..module.len().saturating_sub(1)];
            Some((parent.iter().map(|s| s.to_string()).collect(), 7))
        } else {
            None
        };
        match base {
            Some((prefix, skip)) => {
                i = use_tree(&chars, i + skip, prefix, &mut out);
            }
            None => i += 1,
        }
    }
    out
}

/// Reads one use tree (`a::b`, `a::{b, c::d}`, `a::*`) at `i`, adding each full path to `out`;
/// returns where it ends.
fn use_tree(
    chars: &[char],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut BTreeSet<String>,
) -> usize {
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) == Some(&'{') {
            i += 1;
            loop {
                while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    i += 1;
                }
                match chars.get(i) {
                    Some('}') | None => return i + 1,
                    _ => i = use_tree(chars, i, prefix.clone(), out),
                }
            }
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        if i > start {
            let seg: String = chars[start..i].iter().collect();
            if seg != "self" {
                prefix.push(seg);
            }
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
            continue;
        }
        if !prefix.is_empty() {
            out.insert(prefix.join("::"));
        }
        return i;
    }
}

/// The paths `file` names that start with one of `forbidden`.
fn back_edges(file: &str, module: &[&str], forbidden: &[&str]) -> Vec<String> {
    named_paths(file, module)
        .into_iter()
        .filter(|p| {
            forbidden
                .iter()
                .any(|f| p == f || p.starts_with(&format!("{f}::")))
        })
        .collect()
}

#[test]
fn the_reader_sees_plain_grouped_and_super_paths() {
    let got = named_paths("learn/observe.rs", &["learn", "observe"]);
    for p in ["learn::Connect", "policy::place::place", "proto::Denial"] {
        assert!(got.contains(p), "{p}: {got:?}");
    }
}

/// The wire types are a leaf: band-server compiles them, and they build on the policy model
/// alone, never on what the host does with a run (learn, manifests, the client).
#[test]
fn proto_names_nothing_of_the_crate_but_the_policy_model() {
    let named = named_paths("proto.rs", &["proto"]);
    let above: Vec<&String> = named
        .iter()
        .filter(|p| !p.starts_with("policy::") && !p.starts_with("proto::"))
        .collect();
    assert_eq!(above, Vec::<&String>::new());
    assert_eq!(
        back_edges("proto.rs", &["proto"], &["learn", "manifest", "client"]),
        Vec::<String>::new()
    );
}

/// The policy model names nothing outside `policy`.
#[test]
fn policy_names_nothing_above_it() {
    for (file, module) in [
        ("policy/mod.rs", &["policy"][..]),
        ("policy/cli.rs", &["policy", "cli"]),
        ("policy/compose.rs", &["policy", "compose"]),
        ("policy/fs.rs", &["policy", "fs"]),
        ("policy/net.rs", &["policy", "net"]),
        ("policy/options.rs", &["policy", "options"]),
        ("policy/place.rs", &["policy", "place"]),
        ("policy/spell.rs", &["policy", "spell"]),
    ] {
        let above: Vec<String> = named_paths(file, module)
            .into_iter()
            .filter(|p| !p.starts_with("policy"))
            .collect();
        assert_eq!(above, Vec::<String>::new(), "{file}");
    }
}

/// Inside `vm`, the warm channel sits below the transport, and the install below the drivers:
/// what both need (the endpoint, the framing, [`crate::vm::Progress`]) sits below them.
#[test]
fn vm_modules_point_one_way() {
    for (file, module, forbidden) in [
        (
            "vm/endpoint.rs",
            &["vm", "endpoint"][..],
            &["vm::mux", "vm::ssh", "vm::driver"][..],
        ),
        (
            "vm/framing.rs",
            &["vm", "framing"],
            &["vm::mux", "vm::ssh", "vm::driver"],
        ),
        (
            "vm/mux.rs",
            &["vm", "mux"],
            &["vm::ssh", "vm::driver", "vm::install"],
        ),
        ("vm/ssh.rs", &["vm", "ssh"], &["vm::driver", "vm::install"]),
        ("vm/install.rs", &["vm", "install"], &["vm::driver"]),
    ] {
        assert_eq!(
            back_edges(file, module, forbidden),
            Vec::<String>::new(),
            "{file}"
        );
    }
}
