//! The band format, strict and editable: unknown keys are errors in lint and at run, `band fmt`
//! keeps comments and layout, `band explain --band`, the JSON Schema, SARIF help links, and shell
//! builtins in `cli` rules.

use std::path::Path;

use band_test::band_snapshot;

use crate::common::{band, output, repo};

/// A skill `typo` whose BAND.md misspells a key at every level band reads.
fn misspelt_skill() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("typo");
    fs_err::create_dir_all(root.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(root.join("schemas/input")).expect("mkdir");
    fs_err::write(
        root.join("SKILL.md"),
        "---\nname: typo\ndescription: A skill with typos\n---\n",
    )
    .expect("write");
    write_band(
        &root,
        "---\nband: typo\ndescription: Typos at every level\nallow:\n  cli: [\"cat *\"]\n  reed: [data/]\ndney:\n  cli: [\"rm *\"]\ndeny: {wrte: [\"**/.env\"]}\nenv:\n  secret: [TOKEN]\nrequires:\n  network: {egres: [a.test]}\nlimit:\n  maxRuntime: 5s\nexecution:\n  targte: host\n---\n",
    );
    fs_err::write(root.join("scripts/go.sh"), "#!/bin/sh\necho '{}'\n").expect("write");
    fs_err::set_permissions(
        root.join("scripts/go.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    fs_err::write(root.join("schemas/input/go.json"), "{\"type\":\"object\"}").expect("write");
    t
}

fn write_band(root: &Path, text: &str) {
    fs_err::write(root.join("BAND.md"), text).expect("write");
}

#[test]
fn lint_refuses_every_misspelt_key() {
    let t = misspelt_skill();
    band_snapshot!(output(&["lint", "."], t.path()), "strict_keys_lint");
}

#[test]
fn run_refuses_a_misspelt_key_with_the_same_diagnostic() {
    let t = misspelt_skill();
    let out = output(&["run", "typo/go", "--skills", "."], t.path());
    assert_eq!(out.code, 2);
    band_snapshot!(out, "strict_keys_run");
}

/// Every band file the project ships: the skills' band files, the README's example and the
/// `band init` scaffold, as (name, text).
fn shipped_bands() -> Vec<(String, String)> {
    let mut files = Vec::new();
    band::manifest::format::collect(&repo().join("skills"), &mut files);
    assert!(files.len() >= 12, "{files:?}");
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let name = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
            (name, fs_err::read_to_string(f).expect("read"))
        })
        .collect();
    let readme = fs_err::read_to_string(repo().join("README.md")).expect("readme");
    let example = readme
        .split("```yaml\n---\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a ```yaml band example");
    out.push(("README.md example".into(), format!("---\n{example}")));
    let t = tempfile::tempdir().expect("tmp");
    let (code, _, err) = band(&["init", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    let scaffold = fs_err::read_to_string(t.path().join("demo/BAND.md")).expect("scaffold");
    out.push(("band init scaffold".into(), scaffold));
    out
}

/// A band written the way people write them: comments everywhere, mixed styles, keys out of
/// order, a duplicate rule.
const COMMENTED: &str = "---\n# yaml-language-server: $schema=../schemas/band.schema.json\ndescription: >\n  Fetch issues. # not a comment: inside a folded scalar\nband: commented   # the name\n\n# What may run.\nallow:\n  # hosts first, by mistake\n  net:\n    - api.github.com   # the API\n    - 'api.github.com'\n  cli: [\"gh issue list *\", \"jq *\"]  # two tools\n\nlimit: {maxRuntimeMs: 30s}   # short\ndeny:\n  read: [\"**/.env*\"]\n# trailing comment\n---\nThe body stays.\n";

#[test]
fn every_shipped_band_is_formatted() {
    for (name, text) in shipped_bands() {
        let formatted =
            band::manifest::format::format_band(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(formatted, text, "{name} is not formatted");
    }
}

#[test]
fn fmt_twice_is_fmt_once() {
    let mut cases = shipped_bands();
    cases.push(("commented".into(), COMMENTED.into()));
    for (name, text) in cases {
        let once = band::manifest::format::format_band(&text).expect("formats");
        let twice = band::manifest::format::format_band(&once).expect("formats");
        assert_eq!(once, twice, "{name}: fmt is not idempotent");
    }
}

#[test]
fn fmt_keeps_comments_and_layout() {
    let t = tempfile::tempdir().expect("tmp");
    let f = t.path().join("x.band.md");
    fs_err::write(&f, COMMENTED).expect("write");
    band_snapshot!(output(&["fmt", "--check", "."], t.path()), "fmt_check_diff");
    assert_eq!(
        fs_err::read_to_string(&f).expect("read"),
        COMMENTED,
        "--check writes nothing"
    );
    band_snapshot!(output(&["fmt", "."], t.path()), "fmt_write");
    insta::assert_snapshot!("fmt_commented", fs_err::read_to_string(&f).expect("read"));
    assert_eq!(band(&["fmt", "--check", "."], t.path()).0, 0);
}

#[test]
fn fmt_json_lists_each_file_its_diff_and_the_locks_to_redo() {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("demo");
    let (code, _, err) = band(&["init", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    let text = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let swapped = text
        .replacen("band: demo\ndescription: ", "description: ", 1)
        .replacen("version: 1\n", "version: 1\nband: demo\n", 1);
    fs_err::write(root.join("BAND.md"), &swapped).expect("write");
    let (code, _, err) = band(&["lock", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    band_snapshot!(
        output(&["fmt", "--check", "--json", "demo"], t.path()),
        "fmt_check_json"
    );
    assert_eq!(
        fs_err::read_to_string(root.join("BAND.md")).expect("read"),
        swapped,
        "--check --json writes nothing"
    );
    band_snapshot!(
        output(&["fmt", "--json", "demo"], t.path()),
        "fmt_write_json"
    );
    assert_eq!(
        fs_err::read_to_string(root.join("BAND.md")).expect("read"),
        text
    );
}

#[test]
fn fmt_says_when_a_locked_skill_needs_band_lock() {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("demo");
    let (code, _, err) = band(&["init", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    let text = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let swapped = text
        .replacen("band: demo\ndescription: ", "description: ", 1)
        .replacen("version: 1\n", "version: 1\nband: demo\n", 1);
    assert_ne!(swapped, text);
    fs_err::write(root.join("BAND.md"), &swapped).expect("write");
    // Locked as it is, unformatted.
    let (code, _, err) = band(&["lock", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    band_snapshot!(
        output(&["fmt", "--check", "demo"], t.path()),
        "fmt_check_locked"
    );
    assert_eq!(band(&["lock", "--check", "demo"], t.path()).0, 0);
    band_snapshot!(output(&["fmt", "demo"], t.path()), "fmt_write_locked");
    assert_eq!(
        fs_err::read_to_string(root.join("BAND.md")).expect("read"),
        text
    );
    assert_ne!(
        band(&["lock", "--check", "demo"], t.path()).0,
        0,
        "fmt broke the lock, as it said"
    );
    // Formatting a formatted skill says nothing about its lock.
    assert_eq!(band(&["lock", "demo"], t.path()).0, 0);
    let (code, out, _) = band(&["fmt", "demo"], t.path());
    assert_eq!((code, out.as_str()), (0, ""));
}

/// A standalone band file that references another, as agents pass to `band exec --band`.
fn standalone_bands() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::create_dir_all(t.path().join("shared")).expect("mkdir");
    fs_err::write(
        t.path().join("shared/base.band.md"),
        "---\nband: base\ndescription: Shared rules\nallow:\n  cli: [\"jq *\", \"wc *\"]\n  net: [api.example.test:443]\n  read: [data/]\ndeny:\n  read: [\"**/.env*\"]\nenv:\n  secrets: [TOKEN]\nlimit:\n  maxRuntimeMs: 5s\nexecution:\n  target: host\n---\n",
    )
    .expect("write");
    fs_err::write(
        t.path().join("agent.band.md"),
        "---\npath: shared/base.band.md\n---\n",
    )
    .expect("write");
    fs_err::write(
        t.path().join("typo.band.md"),
        "---\nband: typo\ndescription: d\nallow: {cli: [\"jq *\"], nett: [a.test]}\n---\n",
    )
    .expect("write");
    t
}

#[test]
fn explain_band_shows_a_standalone_band_file() {
    let t = standalone_bands();
    band_snapshot!(
        output(&["explain", "--band", "agent.band.md"], t.path()),
        "explain_band_human"
    );
    band_snapshot!(
        output(&["explain", "--band", "agent.band.md", "--json"], t.path()),
        "explain_band_json"
    );
}

#[test]
fn explain_band_refuses_what_exec_refuses() {
    let t = standalone_bands();
    band_snapshot!(
        output(&["explain", "--band", "typo.band.md"], t.path()),
        "explain_band_errors"
    );
    band_snapshot!(
        output(&["explain", "--band", "shared"], t.path()),
        "explain_band_not_a_file"
    );
    let (code, _, _) = band(&["explain", "--band", "agent.band.md", "text"], t.path());
    assert_eq!(code, 2, "a skill and --band together are a usage error");
}

fn band_schema() -> serde_json::Value {
    let text = fs_err::read_to_string(repo().join("schemas/band.schema.json")).expect("schema");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// The frontmatter of a band file's text, as JSON.
fn frontmatter_json(text: &str) -> serde_json::Value {
    let (yaml, _, _) = band::manifest::split_frontmatter(text).expect("frontmatter");
    yaml_serde::from_str::<Option<serde_json::Value>>(yaml)
        .expect("yaml")
        .unwrap_or(serde_json::json!({}))
}

#[test]
fn every_shipped_band_matches_the_json_schema() {
    let validator = jsonschema::validator_for(&band_schema()).expect("the schema compiles");
    for (name, text) in shipped_bands() {
        let doc = frontmatter_json(&text);
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}

/// The keys the schema names at each level are the keys the parser reads
/// (`band::manifest::KEY_SETS`), and every object in it refuses other keys.
#[test]
fn the_json_schema_names_exactly_the_keys_the_parser_reads() {
    use band::manifest::{IGNORED_RULE_KEYS, KEY_SETS, RULE_KEYS};
    let schema = band_schema();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    let sorted = |k: &[&str]| -> Vec<String> {
        let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    for (path, expected) in KEY_SETS {
        let mut node = &schema;
        for step in path.split('.').filter(|s| !s.is_empty()) {
            node = &node["properties"][step];
        }
        assert_eq!(keys(node), sorted(expected), "keys of `{path}`");
        assert_eq!(
            node["additionalProperties"], false,
            "`{path}` refuses other keys"
        );
    }
    let rules = &schema["$defs"]["rules"];
    let all: Vec<&str> = RULE_KEYS.iter().chain(IGNORED_RULE_KEYS).copied().collect();
    assert_eq!(keys(rules), sorted(&all));
    assert_eq!(rules["additionalProperties"], false);
    for column in ["allow", "deny", "insist"] {
        assert_eq!(schema["properties"][column]["$ref"], "#/$defs/rules");
    }
    // Every object of the schema that lists properties refuses others, and documents each one.
    fn walk(v: &serde_json::Value, at: &str) {
        if let Some(props) = v.get("properties").and_then(|p| p.as_object()) {
            assert_eq!(v["additionalProperties"], false, "{at} refuses other keys");
            for (k, p) in props {
                assert!(
                    p.get("description").and_then(|d| d.as_str()).is_some(),
                    "{at}.{k} has a description"
                );
            }
        }
        match v {
            serde_json::Value::Object(m) => {
                m.iter().for_each(|(k, c)| walk(c, &format!("{at}.{k}")))
            }
            serde_json::Value::Array(a) => a.iter().for_each(|c| walk(c, at)),
            _ => {}
        }
    }
    walk(&schema, "schema");
}

/// Frontmatter the parser accepts without errors, and frontmatter it refuses for a key or a
/// type: the schema says the same of each.
#[test]
fn the_json_schema_and_the_parser_agree() {
    let validator = jsonschema::validator_for(&band_schema()).expect("the schema compiles");
    let good = [
        "band: a\ndescription: d\n",
        "path: ../base.band.md\n",
        "band: a\ndescription: d\na: {repo: x, channels: {allow: [x]}}\n",
        "band: a\ndescription: d\nicon: x\nversion: 3\nextends: [p.band.md]\nincludes: [i.band.md]\n",
        "band: a\ndescription: d\nallow: {cli: [\"jq *\"], net: [a.test], read: [data/, 2024], write: [out/], tools: [x], fs: [x]}\ndeny: {read: [\"**/.env*\"]}\ninsist: {cli: [\"jq *\"]}\n",
        "band: a\ndescription: d\nenv: {secrets: [A_B], variables: [X=1]}\nrequires: {secrets: [A_B], network: {egress: [a.test]}}\n",
        "band: a\ndescription: d\nlimit: {maxRuntimeMs: 30s, maxInputBytes: 1k, maxOutputBytes: 1048576, maxMemoryBytes: 512m, maxPids: 16, maxCpus: 0.5, maxDiskBytes: 1g, maxLogBytes: 64KiB, maxCostDollars: $0.50}\n",
        "band: a\ndescription: d\nexecution: {target: ssh://me@build.example:2222, lima: {vmName: v, port: 1}, cloudflare: {workerName: w, accountId: a, customDomain: c}}\n",
        "band: a\ndescription: d\nexecution: {target: local-dangerously}\nprovides: {apis: [], tools: [], skills: [], mcps: []}\ncontract: {input: {}, output: ./o.json}\n",
    ];
    let bad = [
        "{}\n",
        "band: a\n",
        "description: d\n",
        "band: A_B\ndescription: d\n",
        "band: a\ndescription: d\ndney: [x]\n",
        "band: a\ndescription: d\nalow: x\n",
        "band: a\ndescription: d\ndeny: {reed: [x]}\n",
        "band: a\ndescription: d\nallow: {cli: \"jq *\"}\n",
        "band: a\ndescription: d\nenv: {secret: [A]}\n",
        "band: a\ndescription: d\nenv: {secrets: [\"1A\"]}\n",
        "band: a\ndescription: d\nrequires: {network: {egres: [a]}}\n",
        "band: a\ndescription: d\nlimit: {maxRuntime: 5s}\n",
        "band: a\ndescription: d\nlimit: {maxRuntimeMs: soon}\n",
        "band: a\ndescription: d\nexecution: {targte: host}\n",
        "band: a\ndescription: d\nexecution: {target: cloudflare}\n",
        "band: a\ndescription: d\nexecution: {lima: {vmname: x}}\n",
        "band: a\ndescription: d\nprovides: {tool: []}\n",
        "band: a\ndescription: d\ncontract: {inputs: {}}\n",
        "band: a\ndescription: d\nversion: 0\n",
        "band: a\ndescription: d\nurl: https://example.test/b.md\n",
        "band: a\ndescription: d\nzzz: 1\n",
    ];
    // The one difference, documented in the schema and docs/band-format.md: JSON Schema cannot
    // compare a key with the `band` value, so a misspelt key holding a mapping looks like the
    // config block to an editor. The parser refuses it.
    let text = "---\nband: a\ndescription: d\ndney: {cli: [x]}\n---\n";
    assert!(validator.is_valid(&frontmatter_json(text)));
    let parsed = band::manifest::parse_band(Path::new("BAND.md"), text);
    assert!(parsed.diagnostics.iter().any(|d| d.is_error()));
    for yaml in good {
        let text = format!("---\n{yaml}---\n");
        let parsed = band::manifest::parse_band(Path::new("BAND.md"), &text);
        let errors: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect();
        assert!(
            errors.is_empty(),
            "parser refuses good {yaml:?}: {errors:#?}"
        );
        let doc = frontmatter_json(&text);
        let schema_errors: Vec<String> =
            validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(
            schema_errors.is_empty(),
            "schema refuses good {yaml:?}: {schema_errors:#?}"
        );
    }
    for yaml in bad {
        let text = format!("---\n{yaml}---\n");
        let parsed = band::manifest::parse_band(Path::new("BAND.md"), &text);
        assert!(
            parsed.diagnostics.iter().any(|d| d.is_error()),
            "parser accepts bad {yaml:?}"
        );
        assert!(
            !validator.is_valid(&frontmatter_json(&text)),
            "schema accepts bad {yaml:?}"
        );
    }
}

/// The anchors a Markdown file has: GitHub's slug of every heading, and every `<a id="…">`.
fn anchors(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && let Some(heading) = line.strip_prefix('#') {
            let text = heading.trim_start_matches('#').trim();
            let slug: String = text
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            out.push(slug);
        }
        for part in line.split("<a id=\"").skip(1) {
            if let Some(id) = part.split('"').next() {
                out.push(id.to_string());
            }
        }
    }
    out
}

#[test]
fn every_sarif_help_link_points_at_an_anchor_that_exists() {
    let t = misspelt_skill();
    let (_, out, _) = band(&["lint", "--format", "sarif", "."], t.path());
    let v: serde_json::Value = serde_json::from_str(&out).expect("sarif");
    let rules = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    assert_eq!(rules.len(), band::diag::Code::ALL.len());
    for rule in rules {
        let uri = rule["helpUri"].as_str().expect("helpUri");
        let rel = uri
            .strip_prefix(band::diag::DOCS_BASE_URL)
            .unwrap_or_else(|| panic!("{uri} is not under the docs"));
        let (file, anchor) = rel.split_once('#').expect("an anchor");
        let doc = fs_err::read_to_string(repo().join("docs").join(file)).expect("the doc exists");
        assert!(
            anchors(&doc).iter().any(|a| a == anchor),
            "{uri}: docs/{file} has no anchor `{anchor}`"
        );
    }
}

#[test]
fn lint_says_when_a_cli_rule_names_a_shell_builtin() {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::write(
        t.path().join("audit.band.md"),
        "---\nband: audit\ndescription: Upstream's audit idiom and other builtins\nallow:\n  cli: [\"jq *\", \"cd *\", \"printf *\"]\ninsist:\n  cli:\n    - echo AUDIT:*\n    - read *\n---\n",
    )
    .expect("write");
    band_snapshot!(output(&["lint", "."], t.path()), "builtin_lint");
}

/// The documented idiom, run for real: `insist.cli: ["echo AUDIT:*"]` is met by the echo
/// program (`env echo`, `/usr/bin/echo`) and never by the builtin (`echo`, `command echo`).
#[test]
fn privileged_the_echo_program_satisfies_an_insist_and_the_builtin_does_not() {
    band_test::privileged!(crate::common::sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("audit");
    fs_err::create_dir_all(root.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(root.join("schemas/input")).expect("mkdir");
    fs_err::write(
        root.join("SKILL.md"),
        "---\nname: audit\ndescription: The audit idiom\n---\n",
    )
    .expect("write");
    write_band(
        &root,
        "---\nband: audit\ndescription: Every run writes an audit line\ninsist:\n  cli: [\"echo AUDIT:*\"]\n---\n",
    );
    let scripts = [
        ("env", "env echo AUDIT:start"),
        ("path", "/usr/bin/echo AUDIT:start"),
        ("builtin", "echo AUDIT:start"),
        ("command", "command echo AUDIT:start"),
    ];
    for (name, line) in scripts {
        let p = root.join(format!("scripts/{name}.sh"));
        fs_err::write(
            &p,
            format!("#!/bin/sh\nset -eu\n{line} >&2\nprintf '{{}}' > \"$OUTPUT_PATH\"\n"),
        )
        .expect("write");
        fs_err::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        fs_err::write(root.join(format!("schemas/input/{name}.json")), "{}").expect("write");
    }
    let ws = tempfile::tempdir().expect("ws");
    let ws_arg = ws.path().display().to_string();
    for (name, met) in [
        ("env", true),
        ("path", true),
        ("builtin", false),
        ("command", false),
    ] {
        let script = format!("audit/{name}");
        let (code, out, err) = band(
            &[
                "run",
                "--json",
                "--skills",
                ".",
                "--workspace",
                &ws_arg,
                &script,
            ],
            t.path(),
        );
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out} {err}"));
        // Each script did write its line (inside the sandbox, on stderr).
        assert!(
            v["stderr"]
                .as_str()
                .unwrap_or_default()
                .contains("AUDIT:start"),
            "{name}: {v}"
        );
        if met {
            assert_eq!(
                (code, v["status"].as_str()),
                (0, Some("ok")),
                "{name}: {v} {err}"
            );
        } else {
            assert_ne!(code, 0, "{name}: {v}");
            assert_eq!(
                v["insist_missing"],
                serde_json::json!(["cli: echo AUDIT:*"]),
                "{name}: {v}"
            );
        }
    }
}

/// A band with a secret bound to a host and HTTP rules in `allow.net`: lint accepts it, names a
/// bound host `allow.net` does not admit (E003) and an HTTP rule outside `allow.net` (P001), and
/// explain shows the bound secret and what goes through band-server's egress proxy.
#[test]
fn bound_secrets_and_http_rules_are_linted_and_explained() {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::write(
        t.path().join("api.band.md"),
        "---\nband: api\ndescription: d\nallow:\n  net:\n    - \"GET,POST https://api.example.test/repos/acme/**\"\n    - uploads.example.test\nenv:\n  secrets:\n    - PLAIN\n    - name: API_TOKEN\n      hosts: [api.example.test]\n---\n",
    )
    .expect("write");
    fs_err::write(
        t.path().join("bad.band.md"),
        "---\nband: bad\ndescription: d\nallow:\n  net: [\"get https://api.example.test/x\"]\ndeny:\n  net: [\"GET https://api.example.test/admin/**\"]\nenv:\n  secrets:\n    - {name: API_TOKEN, hosts: [\"*\"]}\n---\n",
    )
    .expect("write");
    band_snapshot!(
        output(&["explain", "--band", "api.band.md"], t.path()),
        "explain_bound_secret_and_http_rules"
    );
    band_snapshot!(
        output(&["lint", "api.band.md", "bad.band.md"], t.path()),
        "lint_bound_secret_and_http_rules"
    );
}
