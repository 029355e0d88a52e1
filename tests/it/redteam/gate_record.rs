//! Red-team round 3 (issue 36, item 8): a script that speaks to the CLI gate's report socket
//! itself (a forged request: it is no band-shim) is refused, and the refusal is on the run's
//! record: `band run --json`, the warning after a run, the ledger and `band show`, not only
//! band-server's log, as docs/security.md says.

use std::path::Path;

use band_test::SkillBuilder;
use serde_json::Value;

use crate::common::{band_exe, sandbox_missing};

const SCRIPT: &str = r#"#!/usr/bin/env python3
import json, os, socket
for _ in range(3):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/band/sock")
    try:
        s.sendall(json.dumps({"image": {"phdr": 1, "random": 2}, "argv": ["jq", "--forged"]}).encode() + b"\n")
        s.recv(64)
    except OSError:
        pass
    s.close()
with open(os.environ["OUTPUT_PATH"], "w") as out:
    out.write("{}")
"#;

fn forger_skill(dir: &Path) {
    SkillBuilder::new("forger")
        .description("Speaks to the CLI gate itself.")
        .band(
            r#"description: Forges gate requests.
version: 1
allow:
  cli: ["python3 /skill/scripts/forge.py"]
limit:
  maxRuntimeMs: 30s
"#,
        )
        .script("forge.py", SCRIPT)
        .input_schema(
            "forge",
            r#"{"type": "object", "additionalProperties": false}"#,
        )
        .write(dir);
}

#[test]
fn privileged_forged_gate_requests_are_on_the_runs_record() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    forger_skill(t.path());
    let data = t.path().join("data");
    let band = band_test::Band::new(band_exe(), &data);
    let (code, stdout, stderr) = band.run(
        &["run", "--json", "--skills", ".", "forger/forge"],
        t.path(),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["forged"]["count"], 3, "{stdout}");
    let reasons = result["forged"]["reasons"].as_array().expect("reasons");
    assert_eq!(reasons.len(), 3, "{stdout}");

    // A person is told after the run.
    let (code, _, stderr) = band.run(&["run", "--skills", ".", "forger/forge"], t.path());
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            "band: warning: 3 requests to the CLI gate came from no band-shim and were refused: "
        ),
        "{stderr}"
    );

    // The ledger keeps it, and band show shows it.
    let run_id = result["run_id"].as_str().unwrap();
    let (code, show, _) = band.run(&["show", "--json", run_id], t.path());
    assert_eq!(code, 0, "{show}");
    let shown: Value = serde_json::from_str(&show).unwrap();
    assert_eq!(shown["forged"]["count"], 3, "{show}");
    let (code, show, _) = band.run(&["show", run_id], t.path());
    assert_eq!(code, 0, "{show}");
    assert!(
        show.contains("3 requests to the CLI gate came from no band-shim and were refused"),
        "{show}"
    );
}
