//! Issue 40: band-server reads the site policy of its own machine (`site_policy` in its config)
//! and applies it to every request, whatever client sent it: a request that asks for more is
//! refused before anything is built, naming the band rule, the site rule and the tier; a request
//! inside the ceiling runs, with the site's deny rules joined to its own.

use std::path::{Path, PathBuf};

use band::proto::{Layer, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

/// A server config in `dir` whose `site_policy` is a file holding `site`.
fn config_with_site(dir: &Path, site: &str) -> PathBuf {
    let site_path = dir.join("site.md");
    fs_err::write(&site_path, site).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("server.toml");
    fs_err::write(&cfg, format!("site_policy = \"{}\"\n", site_path.display()))
        .unwrap_or_else(|e| panic!("{e}"));
    cfg
}

fn cli_policy(allow: &[&str]) -> band::policy::Policy {
    let mut p = policy();
    p.allow.cli = strs(allow);
    p
}

#[test]
fn privileged_a_band_allowing_curl_under_a_site_denying_curl_is_refused() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(dir.path(), "---\ndeny:\n  cli: [\"curl *\"]\n---\n");
    // A raw request (no client checked it): the band allows `curl *`.
    let req = request("#!/bin/bash\necho ran\n", cli_policy(&["curl *"]));
    let o = finish(spawn_with_config(&req, &cfg));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert_eq!(
        err.message,
        format!(
            "refused: the band's allow.cli `curl *` is refused by the site policy's deny.cli \
             `curl *` ({}:3) (tier local)",
            dir.path().join("site.md").display()
        )
    );
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
    assert_eq!(o.result.metrics.run_ms, 0, "nothing ran: {o:#?}");
}

#[test]
fn privileged_a_band_inside_the_ceiling_runs_and_the_site_deny_holds_inside_the_sandbox() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(
        dir.path(),
        "---\nallow:\n  cli: [\"sed *\", \"cat *\"]\ndeny:\n  cli: [\"sed -i *\"]\n---\n",
    );
    let script = "#!/bin/bash\necho hello > /tmp/f\nsed -i s/hello/owned/ /tmp/f >/dev/null 2>&1; echo \"sed_i=$?\"\necho \"content=$(cat /tmp/f)\"\necho \"sed_n=$(sed -n 1p /tmp/f)\"\n";
    let mut req = request(script, cli_policy(&["sed *", "cat *"]));
    req.trace = true;
    let o = finish(spawn_with_config(&req, &cfg));
    let kv = o.kv();
    assert_eq!(
        kv.get("content").map(String::as_str),
        Some("hello"),
        "{o:#?}"
    );
    assert_ne!(kv.get("sed_i").map(String::as_str), Some("0"), "{o:#?}");
    assert_eq!(kv.get("sed_n").map(String::as_str), Some("hello"), "{o:#?}");
    // The site's deny is what refused `sed -i`: the band alone allows it.
    let refused: Vec<_> = o
        .result
        .cli_calls
        .iter()
        .filter(|c| c.argv.first().map(String::as_str) == Some("sed") && !c.allowed)
        .map(|c| c.rule.clone())
        .collect();
    assert_eq!(refused, vec![Some("sed -i *".to_string())], "{o:#?}");
}

#[test]
fn privileged_a_site_ceiling_refuses_what_lies_above_it() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(dir.path(), "---\nallow:\n  cli: [\"jq *\"]\n---\n");
    let req = request(
        "#!/bin/bash\necho ran\n",
        cli_policy(&["jq *", "python3 *"]),
    );
    let o = finish(spawn_with_config(&req, &cfg));
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert!(
        err.message.starts_with(
            "refused: the band's allow.cli `python3 *` is refused by the site policy's \
             allow.cli ceiling [`jq *`]"
        ),
        "{err:?}"
    );
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
}

#[test]
fn privileged_an_invalid_site_policy_refuses_every_run_with_its_line() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(
        dir.path(),
        "---\ndeny:\n  cli: [\"curl *\"]\n  nett: [x.test]\n---\n",
    );
    let o = finish(spawn_with_config(
        &request("#!/bin/bash\necho ran\n", policy()),
        &cfg,
    ));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert!(
        err.message.contains("site.md:4:3: unknown key `deny.nett`"),
        "{err:?}"
    );
}
