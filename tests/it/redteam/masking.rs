//! Red-team round 3 (issue 36): masking. A secret that a script encodes before it prints it or
//! puts it in a command line — URL-quoted into a curl URL (the case found), form-encoded, in
//! base64 alone and inside a Basic header, base64 then quoted, in hex, JSON-escaped, quoted twice
//! — reaches neither `--trace`, the `--json` result, `band show --json`, nor the ledger's bytes.
//! The encodings are made by python3's own `urllib.parse`, `base64` and `json`, in the sandbox
//! (what the script prints) and on the host (what the test looks for); a near miss (one
//! character different) is printed too and stays as it is.

use std::path::Path;
use std::process::Command;

use band_test::SkillBuilder;
use serde_json::Value;

use crate::common::{band_exe, sandbox_missing};

/// An AWS-style secret (`/` and `+`), as in the report.
const AWS: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// A password with a space, quotes, `&`, `=` and a non-ASCII letter.
const PASSWORD: &str = "pa ss/wörd+\"x\"&y=1";
/// The AWS secret with one character different: not a secret.
const NEAR: &str = "wJalrXUtnFEMI/K7MDENH+bPxRfiCYEXAMPLEKEY";

/// `encodings(s)`: every way the script prints `s`, by python3's own encoders.
const ENCODINGS_PY: &str = r#"
import base64, json, re, sys, urllib.parse as up

def encodings(s):
    b = s.encode()
    b64 = base64.b64encode(b).decode()
    lower = lambda t: re.sub('%[0-9A-F]{2}', lambda m: m.group(0).lower(), t)
    return [
        s,
        up.quote(s),
        up.quote(s, safe=''),
        lower(up.quote(s)),
        up.quote_plus(s),
        up.urlencode({'key': s}),
        up.quote(up.quote(s)),
        b64,
        b64.rstrip('='),
        base64.urlsafe_b64encode(b).decode(),
        base64.urlsafe_b64encode(b).decode().rstrip('='),
        'Basic ' + base64.b64encode(b'user:' + b).decode(),
        base64.b64encode(b'u:' + b + b'!').decode(),
        base64.b64encode(b'us:' + b + b'?!').decode(),
        up.quote(b64, safe=''),
        up.quote('Basic ' + base64.b64encode(b'user:' + b).decode(), safe=''),
        b.hex(),
        b.hex().upper(),
        json.dumps(s),
        json.dumps(s).replace('/', '\\/'),
        json.dumps({'url': 'https://h.test/?key=' + up.quote(s)}),
        '"' + ''.join('\\u%04x' % ord(c) for c in s) + '"',
    ]
"#;

const SCRIPT_MAIN: &str = r#"
import os, subprocess
secrets = [os.environ['AWS_SECRET'], os.environ['PASSWORD']]
near = 'wJalrXUtnFEMI/K7MDENH+bPxRfiCYEXAMPLEKEY'
# The report's case: a quoted secret in a curl URL (loopback, nothing listens: curl fails).
subprocess.run(['curl', '-s', '-m', '5', 'http://127.0.0.1:9/?key=' + up.quote(secrets[0])])
for s in secrets + [near]:
    forms = encodings(s)
    # As command arguments (the trace and the ledger's events), on stdout and on stderr.
    subprocess.run(['printf', '%s\n'] + forms, check=True)
    for f in forms:
        print('stdout', f, flush=True)
        print('stderr', f, file=sys.stderr, flush=True)
with open(os.environ['OUTPUT_PATH'], 'w') as out:
    out.write('{}')
"#;

/// The band's frontmatter after `band: quote`.
const BAND: &str = r#"description: Prints its secrets encoded every way a script's libraries encode them.
version: 1
allow:
  cli: ["python3 /skill/scripts/quote.py", "curl *", "printf *"]
env:
  secrets: [AWS_SECRET, PASSWORD]
limit:
  maxRuntimeMs: 30s
"#;

fn quote_skill(dir: &Path) {
    SkillBuilder::new("quote")
        .description("Prints its secrets, encoded.")
        .band(BAND)
        .script(
            "quote.py",
            &format!("#!/usr/bin/env python3{ENCODINGS_PY}{SCRIPT_MAIN}"),
        )
        .input_schema(
            "quote",
            r#"{"type": "object", "additionalProperties": false}"#,
        )
        .write(dir);
}

/// python3's encodings of `s` (run on the host: the same code as the script's).
fn encodings(s: &str) -> Vec<String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "{ENCODINGS_PY}\nprint(json.dumps(encodings(sys.argv[1])))"
        ))
        .arg(s)
        .output()
        .expect("python3 (a test dependency, see CONTRIBUTING.md)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Assert `text` (named `what`) holds no encoding of either secret.
#[track_caller]
fn assert_clean(what: &str, text: &str) {
    for s in [AWS, PASSWORD] {
        for f in encodings(s) {
            assert!(
                !text.contains(&f),
                "{what} shows a secret as `{f}`:\n{text}"
            );
        }
    }
}

#[test]
fn privileged_encoded_secrets_are_masked_in_the_trace_the_result_and_the_ledger() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    quote_skill(t.path());
    let data = t.path().join("data");
    let band = band_test::Band::new(band_exe(), &data)
        .env("AWS_SECRET", AWS)
        .env("PASSWORD", PASSWORD);
    let (code, stdout, stderr) = band.run(
        &[
            "run",
            "--json",
            "--trace",
            "--record-io",
            "--skills",
            ".",
            "quote/quote",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_clean("--json result", &stdout);
    assert_clean("band's stderr", &stderr);
    // The report's case, in the CLI calls: the curl URL, masked.
    let calls = result["cli_calls"].to_string();
    assert!(
        calls.contains(r#""http://127.0.0.1:9/?key=[secret AWS_SECRET]""#),
        "{calls}"
    );
    // The near miss is not a secret: every one of its forms is shown as it was printed.
    let out = result["stdout"].as_str().unwrap();
    for f in encodings(NEAR) {
        assert!(
            out.contains(&format!("stdout {f}\n")),
            "`{f}` not in:\n{out}"
        );
    }

    // The same run as a person sees it: the trace on stderr.
    let (code, _, stderr) = band.run(
        &["run", "--trace", "--skills", ".", "quote/quote"],
        t.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("[secret PASSWORD]"), "{stderr}");
    assert_clean("--trace", &stderr);

    // What the ledger keeps, as band shows it and as its bytes.
    let run_id = result["run_id"].as_str().unwrap();
    let (code, show, _) = band.run(&["show", "--json", run_id], t.path());
    assert_eq!(code, 0);
    assert!(show.contains("[secret AWS_SECRET]"), "{show}");
    assert_clean("band show --json", &show);
    let raw = fs_err::read_to_string(data.join("ledger.jsonl")).unwrap();
    assert!(raw.contains(run_id));
    assert_clean("ledger.jsonl", &raw);
    let (code, verify, err) = band.run(&["audit", "verify"], t.path());
    assert_eq!(code, 0, "{verify}{err}");
}
