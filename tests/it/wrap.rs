//! `band wrap`: Anthropic's Agent Skills (SKILL.md and scripts, no band; `tests/corpus/agent/`)
//! get a band and argv-style contracts, lint clean, and run as `band <skill>/<script> -- ARGS…`.

use std::path::{Path, PathBuf};

use band_test::band_snapshot;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{band, output, repo, sandbox_missing};

fn agent(skill: &str) -> PathBuf {
    repo().join("tests/corpus/agent").join(skill)
}

/// A workspace holding copies of `skills` from the corpus.
fn workspace(skills: &[&str]) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    for s in skills {
        band_test::copy_dir(&agent(s), &ws.path().join(s));
    }
    ws
}

/// `band <target> --json --target host --skills . -- <words>` in `ws`.
fn run_argv(ws: &Path, target: &str, words: &[&str]) -> (i32, Value, String) {
    let mut args = vec![target, "--json", "--target", "host", "--skills", ".", "--"];
    args.extend(words);
    let (code, out, err) = band(&args, ws);
    (code, serde_json::from_str(&out).unwrap_or_default(), err)
}

/// What `band wrap` prints without --write: every file in full, the scripts, and that nothing was
/// written (and nothing is).
#[test]
fn wrap_prints_what_it_would_write() {
    let ws = workspace(&["xlsx"]);
    band_snapshot!(output(&["wrap", "xlsx"], ws.path()), "wrap_xlsx_plan");
    assert!(!ws.path().join("xlsx/BAND.md").exists());
    assert!(!ws.path().join("xlsx/schemas").exists());
}

/// Every Agent Skill of the corpus, wrapped with --write, lints with no error and no warning
/// (before: S006, no band), is locked, and its input schemas are argv-style. docx's programs are
/// in a subfolder (`scripts/office/soffice.py`, `unpack.py`): they are wrapped as
/// `office-soffice` and `office-unpack` (before: refused, "no script directly in scripts/"), and
/// its helper module (`office/helpers/merge_runs.py`, no `#!` line or main guard) is not.
#[test]
fn wrapped_agent_skills_lint_clean() {
    let ws = workspace(&["pdf", "skill-creator", "xlsx", "docx"]);
    for skill in ["pdf", "skill-creator", "xlsx", "docx"] {
        // Before: S006 (no band); docx's S007 (no scripts: its programs are in a subfolder).
        band_snapshot!(
            output(&["lint", skill], ws.path()),
            format!("lint_{skill}_before_wrap")
        );
        let (code, out, err) = band(&["wrap", skill, "--write"], ws.path());
        assert_eq!(code, 0, "{skill}: {out}{err}");
        // After: no problems.
        band_snapshot!(
            output(&["lint", skill], ws.path()),
            format!("lint_{skill}_wrapped")
        );
        let (code, out, _) = band(&["lock", "--check", skill], ws.path());
        assert_eq!(code, 0, "{skill}: {out}");
        let (skill_dir, _) = band::skill::load_skill(&ws.path().join(skill));
        let schemas = band::contract::SchemaSet::load_dir(&ws.path().join(skill)).0;
        for s in &skill_dir.scripts {
            assert!(schemas.takes_argv(&s.name), "{skill}/{}", s.name);
        }
    }
    // `band help` shows an argv-style script's usage as its command line.
    band_snapshot!(
        output(
            &["help", "--skills", ".", "pdf/check_bounding_boxes"],
            ws.path()
        ),
        "help_wrapped_argv_script"
    );
    let (docx, _) = band::skill::load_skill(&ws.path().join("docx"));
    let scripts: Vec<(&str, String)> = docx
        .scripts
        .iter()
        .map(|s| (s.name.as_str(), s.entry.display().to_string()))
        .collect();
    assert_eq!(
        scripts,
        [
            ("office-soffice", "scripts/office/soffice.py".to_string()),
            ("office-unpack", "scripts/office/unpack.py".to_string())
        ]
    );
    band_snapshot!(
        output(&["list", "--skills", "."], ws.path()),
        "list_wrapped_with_subfolder_scripts"
    );
}

/// A skill whose only files below scripts/ are a module (no `#!` line, no main guard) is refused,
/// the file named, and nothing is written.
/// A script shipped for both Linux and Windows (`convert.sh` and `convert.ps1`, as UiPath's
/// planner skill has them): wrap drafts the `.sh`, the one band runs, and says why the `.ps1` is
/// not a script; the skill locks and lints clean (before: wrap drafted `pwsh … convert.ps1 *`,
/// lint refused the lock with S003, and the run started the `.sh` the band did not describe).
#[test]
fn wrap_drafts_the_script_not_its_windows_twin() {
    let t = tempfile::tempdir().unwrap();
    let skill = t.path().join("conv");
    let write_file = |p: &Path, text: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, text).unwrap();
        fs_err::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write_file(
        &skill.join("SKILL.md"),
        "---\nname: conv\ndescription: Converts a file.\n---\n\nOn Windows: `pwsh scripts/convert.ps1 in.txt`.\nElsewhere: `bash scripts/convert.sh in.txt`.\n",
        0o644,
    );
    write_file(
        &skill.join("scripts/convert.sh"),
        "#!/usr/bin/env bash\n# Convert a file.\nset -e\nwc -c \"$1\"\n",
        0o755,
    );
    write_file(
        &skill.join("scripts/convert.ps1"),
        "param($In)\n(Get-Item $In).Length\n",
        0o644,
    );
    let (code, out, err) = band(&["wrap", "conv", "--write"], t.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("not a script: scripts/convert.ps1 (the Windows form of scripts/convert.sh, which is the script band runs)"),
        "{out}"
    );
    let band_md = fs_err::read_to_string(skill.join("BAND.md")).unwrap();
    assert!(
        band_md.contains("wc *") && !band_md.contains("pwsh"),
        "{band_md}"
    );
    assert!(skill.join("band.lock").is_file());
    let (code, out, err) = band(&["lint", "conv"], t.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("two entry points"), "{out}");
}

#[test]
fn wrap_refuses_a_skill_with_only_modules() {
    let ws = tempfile::tempdir().unwrap();
    let skill = ws.path().join("lib-only");
    fs_err::create_dir_all(skill.join("scripts/lib")).unwrap();
    fs_err::write(
        skill.join("SKILL.md"),
        "---\nname: lib-only\ndescription: x\n---\n",
    )
    .unwrap();
    fs_err::write(skill.join("scripts/lib/util.py"), "def f():\n    pass\n").unwrap();
    band_snapshot!(
        output(&["wrap", "lib-only", "--write"], ws.path()),
        "wrap_only_modules_refused"
    );
    assert!(!skill.join("BAND.md").exists());
}

/// `--write` locks the skill as `band lock` does: not one that lint finds errors in. The band and
/// contracts are written all the same, shown as written (a fifth wild trial saw only the
/// error, and the next `--write` said the files "already exist"), and the error names what lint
/// found.
#[test]
fn wrap_write_does_not_lock_a_skill_with_lint_errors() {
    let ws = workspace(&["pdf"]);
    let skill_md = ws.path().join("pdf/SKILL.md");
    let text = fs_err::read_to_string(&skill_md).unwrap();
    // A name that is not the folder's: lint error S002, which does not stop a run.
    let renamed = text.replacen("name: pdf", "name: other", 1);
    assert_ne!(renamed, text);
    fs_err::write(&skill_md, renamed).unwrap();
    let (code, out, err) = band(&["wrap", "pdf", "--write"], ws.path());
    assert_eq!(code, i32::from(band::proto::exit::USAGE), "{out}{err}");
    assert!(err.contains("band.lock was not written"), "{err}");
    assert!(err.contains("does not match the folder `pdf`"), "{err}");
    assert!(out.starts_with("Wrote for `pdf`"), "{out}");
    assert!(
        out.contains("\n--- BAND.md\n")
            && out.contains("\n--- band.lock (not written: see the error below)\n"),
        "{out}"
    );
    assert!(
        ws.path().join("pdf/BAND.md").exists(),
        "the band was not written"
    );
    assert!(
        !ws.path().join("pdf/band.lock").exists(),
        "a lock was written"
    );
}

/// A band (or a schema) already there is never replaced without --force.
#[test]
fn wrap_never_replaces_a_band_without_force() {
    let ws = workspace(&["pdf"]);
    fs_err::write(ws.path().join("pdf/BAND.md"), "---\nband: mine\n---\n").unwrap();
    band_snapshot!(
        output(&["wrap", "pdf", "--write"], ws.path()),
        "wrap_band_already_there"
    );
    assert_eq!(
        fs_err::read_to_string(ws.path().join("pdf/BAND.md")).unwrap(),
        "---\nband: mine\n---\n"
    );
    assert!(!ws.path().join("pdf/schemas").exists());
    let (code, _, err) = band(&["wrap", "pdf", "--write", "--force"], ws.path());
    assert_eq!(code, 0, "{err}");
    let text = fs_err::read_to_string(ws.path().join("pdf/BAND.md")).unwrap();
    assert!(
        text.contains("python3 /skill/scripts/check_bounding_boxes.py *"),
        "{text}"
    );
}

/// The programs a script calls by name, read from its code, are allowed and said so: recalc.py's
/// `timeout` is in a list assigned to the variable it hands `subprocess.run`, its `soffice` in a
/// list on the line after `run(`.
#[test]
fn wrap_allows_the_programs_the_code_calls() {
    let ws = workspace(&["xlsx"]);
    let (code, out, _) = band(&["wrap", "xlsx", "--json"], ws.path());
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&out).unwrap();
    let calls = |name: &str| {
        plan["scripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {plan}"))["calls"]
            .clone()
    };
    assert_eq!(calls("recalc"), json!(["soffice", "timeout"]));
    assert_eq!(calls("office-soffice"), json!(["soffice"]));
    assert_eq!(plan["written"], json!(false));
    let band_md = plan["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "BAND.md")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(band_md.contains("    - \"soffice *\"\n"), "{band_md}");
    assert!(band_md.contains("    - \"timeout *\"\n"), "{band_md}");
    assert!(band_md.contains("`timeout`: called by scripts/recalc.py (read from its code)"));
}

/// The wrapped pdf and skill-creator scripts run from the command line, their words as their
/// argv, on workspace files the wrap allowed: the output is the script's stdout as text.
#[test]
fn privileged_wrapped_agent_skills_run_with_argv() {
    band_test::privileged!(sandbox_missing());
    let ws = workspace(&["pdf", "skill-creator"]);
    fs_err::write(
        ws.path().join("fields.json"),
        r#"{"form_fields": [
            {"page_number": 1, "description": "Name", "label_bounding_box": [10, 10, 50, 20], "entry_bounding_box": [60, 10, 200, 30]},
            {"page_number": 1, "description": "Date", "label_bounding_box": [10, 40, 50, 50], "entry_bounding_box": [55, 25, 200, 55]}
        ]}"#,
    )
    .unwrap();
    let (code, _, err) = band(
        &["wrap", "pdf", "--write", "--allow-read", "*.json"],
        ws.path(),
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = band(
        &["wrap", "skill-creator", "--write", "--allow-read", "pdf/**"],
        ws.path(),
    );
    assert_eq!(code, 0, "{err}");

    let (code, json, err) = run_argv(ws.path(), "pdf/check_bounding_boxes", &["fields.json"]);
    assert_eq!(code, 0, "{json}\n{err}");
    assert_eq!(
        json["output"],
        "Read 2 fields\nFAILURE: entry of `Name` overlaps entry of `Date`\nFAILURE: fix the boxes\n"
    );
    // No words: the script's own usage (argv is just the script).
    let (code, json, _) = run_argv(ws.path(), "pdf/check_bounding_boxes", &[]);
    assert_eq!(
        (code, &json["output"]),
        (1, &json!("Usage: check_bounding_boxes.py [fields.json]\n"))
    );
    let (code, json, err) = run_argv(ws.path(), "skill-creator/quick_validate", &["pdf"]);
    assert_eq!(
        (code, &json["output"]),
        (0, &json!("Skill is valid!\n")),
        "{json}\n{err}"
    );
    // The input is the argv: `band run --input` gives the same.
    let (code, out, _) = band(
        &[
            "run",
            "--json",
            "--target",
            "host",
            "--skills",
            ".",
            "skill-creator/quick_validate",
            "--input",
            r#"{"args": ["pdf"]}"#,
        ],
        ws.path(),
    );
    let json: Value = serde_json::from_str(&out).unwrap_or_default();
    assert_eq!((code, &json["output"]), (0, &json!("Skill is valid!\n")));
    // MCP: the tool takes `{"args": [...]}` and answers with the script's stdout.
    let (mut raw, _) = crate::mcp::Raw::start(&[ws.path()], ws.path());
    let tools = raw.request("tools/list", json!({}));
    let tool = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "skill-creator__quick_validate")
        .unwrap_or_else(|| panic!("{tools}"));
    assert!(
        band::contract::is_argv_schema(&tool["inputSchema"]),
        "{tool}"
    );
    let r = raw.request(
        "tools/call",
        json!({"name": "skill-creator__quick_validate", "arguments": {"args": ["pdf"]}}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(r["content"][0]["text"], json!("Skill is valid!\n"), "{r}");
}

/// From inside: a wrapped skill reads the workspace files its band allows and nothing else of
/// the workspace or the host, whatever paths its arguments name.
#[test]
fn privileged_wrapped_skill_reads_only_what_its_band_allows() {
    band_test::privileged!(sandbox_missing());
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let probe = ws.path().join("probe");
    fs_err::create_dir_all(probe.join("scripts")).unwrap();
    fs_err::write(
        probe.join("SKILL.md"),
        "---\nname: probe\ndescription: Read the files named on the command line.\n---\n\n`python3 scripts/read.py PATH…`\n",
    )
    .unwrap();
    fs_err::write(
        probe.join("scripts/read.py"),
        "#!/usr/bin/env python3\n\"\"\"Read each path named, say what happened.\"\"\"\nimport sys\n\nfor p in sys.argv[1:]:\n    try:\n        with open(p) as fh:\n            print(f\"{p}: {fh.read().strip()}\")\n    except OSError as e:\n        print(f\"{p}: {type(e).__name__}\")\n",
    )
    .unwrap();
    fs_err::set_permissions(
        probe.join("scripts/read.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs_err::write(ws.path().join("allowed.txt"), "allowed content\n").unwrap();
    fs_err::write(ws.path().join("secret.txt"), "workspace secret\n").unwrap();
    let host = tempfile::Builder::new()
        .prefix("band-wrap-")
        .tempdir_in("/tmp")
        .unwrap();
    fs_err::write(host.path().join("host.txt"), "host secret\n").unwrap();
    let host_file = host.path().join("host.txt").display().to_string();
    let (code, _, err) = band(
        &["wrap", "probe", "--write", "--allow-read", "allowed.txt"],
        ws.path(),
    );
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = run_argv(
        ws.path(),
        "probe/read",
        &["allowed.txt", "secret.txt", &host_file, "/root/.bashrc"],
    );
    assert_eq!(code, 0, "{json}\n{err}");
    assert_eq!(
        json["output"],
        format!(
            "allowed.txt: allowed content\nsecret.txt: FileNotFoundError\n{host_file}: FileNotFoundError\n/root/.bashrc: FileNotFoundError\n"
        )
    );
    // A wrapped script that prints nothing (one that writes a file) is not an invalid output.
    let (code, json, err) = run_argv(ws.path(), "probe/read", &[]);
    assert_eq!((code, &json["status"]), (0, &json!("ok")), "{json}\n{err}");
}

/// Anthropic's office skills need LibreOffice: with `soffice` installed, a wrapped skill whose
/// script calls it (allowed by `band wrap` from reading the code) converts a workspace file, and
/// fontconfig finds its configuration (the host's `/etc/fonts`; before, soffice said "Fontconfig
/// error: Cannot load default config file"). CI installs LibreOffice (`.ci/run`); elsewhere,
/// without it, the test says so and passes unless BAND_TEST_MUST_RUN=1.
#[test]
fn privileged_wrapped_office_skill_runs_libreoffice() {
    band_test::privileged!(sandbox_missing());
    if !soffice_installed(band_test::test_name!()) {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let skill = ws.path().join("office");
    fs_err::create_dir_all(skill.join("scripts")).unwrap();
    fs_err::write(
        skill.join("SKILL.md"),
        "---\nname: office\ndescription: Convert documents to PDF with LibreOffice.\n---\n\n`python3 scripts/convert.py FILE OUTDIR`\n",
    )
    .unwrap();
    fs_err::write(
        skill.join("scripts/convert.py"),
        "#!/usr/bin/env python3\n\"\"\"Convert a document to PDF with LibreOffice.\"\"\"\nimport subprocess\nimport sys\nfrom pathlib import Path\n\nsrc, out = sys.argv[1], sys.argv[2]\nr = subprocess.run([\"soffice\", \"--headless\", \"--convert-to\", \"pdf\", \"--outdir\", out, src], check=True, capture_output=True, text=True)\npdf = Path(out) / (Path(src).stem + \".pdf\")\nprint(pdf.read_bytes()[:5].decode())\nprint(\"\".join(l + \"\\n\" for l in r.stderr.splitlines() if \"ontconfig\" in l), end=\"\")\n",
    )
    .unwrap();
    fs_err::set_permissions(
        skill.join("scripts/convert.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs_err::write(ws.path().join("note.txt"), "hello from band\n").unwrap();
    let (code, _, err) = band(
        &[
            "wrap",
            "office",
            "--write",
            "--allow-read",
            "note.txt",
            "--allow-write",
            "out/**",
        ],
        ws.path(),
    );
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = run_argv(ws.path(), "office/convert", &["note.txt", "out"]);
    assert_eq!(
        (code, &json["output"]),
        (0, &json!("%PDF-\n")),
        "{json}\n{err}"
    );
    assert!(ws.path().join("out/note.pdf").exists());
}

/// True when LibreOffice is installed; else says so, and fails under BAND_TEST_MUST_RUN=1 (CI
/// installs it).
fn soffice_installed(test: &str) -> bool {
    if Path::new("/usr/bin/soffice").exists() {
        return true;
    }
    assert!(
        std::env::var_os("BAND_TEST_MUST_RUN").is_none(),
        "{test}: LibreOffice is not installed (/usr/bin/soffice); .ci/run installs it"
    );
    eprintln!("{test}: skipped: LibreOffice is not installed (/usr/bin/soffice)");
    false
}

/// Anthropic's docx skill (the corpus copy) as it comes: `band wrap` wraps its nested
/// `scripts/office/soffice.py` (before: refused), which runs as `band docx/office-soffice -- ARGS…`
/// and converts a real .docx with LibreOffice in the sandbox, to text (the document's words) and
/// to PDF.
#[test]
fn privileged_wrapped_docx_skill_converts_a_document() {
    band_test::privileged!(sandbox_missing());
    if !soffice_installed(band_test::test_name!()) {
        return;
    }
    let ws = workspace(&["docx"]);
    // A minimal WordprocessingML document, zipped by the host's python3.
    let make = std::process::Command::new("python3")
        .arg("-c")
        .arg(DOCX_MAKER)
        .arg(ws.path().join("report.docx"))
        .status()
        .unwrap();
    assert!(make.success());
    let (code, out, err) = band(
        &[
            "wrap",
            "docx",
            "--write",
            "--allow-read",
            "report.docx",
            "--allow-write",
            "out/**",
        ],
        ws.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    for (to, file) in [("txt:Text", "out/report.txt"), ("pdf", "out/report.pdf")] {
        let (code, json, err) = run_argv(
            ws.path(),
            "docx/office-soffice",
            &[
                "--headless",
                "--convert-to",
                to,
                "--outdir",
                "out",
                "report.docx",
            ],
        );
        assert_eq!((code, &json["status"]), (0, &json!("ok")), "{json}\n{err}");
        assert!(
            json["written_files"]
                .as_array()
                .unwrap()
                .contains(&json!(file)),
            "{json}"
        );
    }
    let text = fs_err::read_to_string(ws.path().join("out/report.txt")).unwrap();
    assert_eq!(
        text.trim_start_matches('\u{feff}').trim_end(),
        "Quarterly report from band"
    );
    let pdf = fs_err::read(ws.path().join("out/report.pdf")).unwrap();
    assert!(pdf.starts_with(b"%PDF-"), "{:?}", &pdf[..pdf.len().min(16)]);
}

/// Writes a one-paragraph .docx at argv[1].
const DOCX_MAKER: &str = r#"
import sys, zipfile
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("[Content_Types].xml", '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
    z.writestr("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    z.writestr("word/document.xml", f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>Quarterly report from band</w:t></w:r></w:p></w:body></w:document>')
"#;

/// Anthropic's xlsx skill (the corpus reconstruction of `recalc.py`: a StarBasic macro it puts in
/// LibreOffice's user profile, `timeout N soffice --headless … <macro URL> <file>`, openpyxl)
/// runs unchanged through `band wrap`: `timeout` (in a list assigned to a variable) and `soffice`
/// are read from its code and allowed, `/usr/bin/python3` imports Debian's openpyxl, the profile
/// goes in the run's own HOME, and the report is the one the same script gives on the host, where
/// LibreOffice 7.4 (Debian 12) aborts after running the macro (`Unspecified Application
/// Error`): what the sandbox adds is only the `uname: not found` of soffice's launcher script.
/// Before, wrap read neither call, and the run stopped at a Python `FileNotFoundError` for
/// `timeout` with no denial on record; that message is a denial with its rule now
/// (`timeout *`), shown here by taking the rule out again.
#[test]
fn privileged_wrapped_xlsx_recalc_runs_as_on_the_host() {
    band_test::privileged!(sandbox_missing());
    let test = band_test::test_name!();
    if !soffice_installed(test) {
        return;
    }
    let calc = Path::new("/usr/lib/libreoffice/program/libsclo.so").exists();
    let openpyxl = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import openpyxl"])
        .status()
        .is_ok_and(|s| s.success());
    if !(calc && openpyxl) {
        assert!(
            std::env::var_os("BAND_TEST_MUST_RUN").is_none(),
            "{test}: needs libreoffice-calc-nogui and python3-openpyxl (.ci/run installs them)"
        );
        eprintln!("{test}: skipped: needs libreoffice-calc-nogui and python3-openpyxl");
        return;
    }
    let ws = workspace(&["xlsx"]);
    let host = tempfile::tempdir().unwrap();
    for dir in [ws.path(), host.path()] {
        let made = std::process::Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(
                "import sys\nfrom openpyxl import Workbook\nwb = Workbook(); ws = wb.active; ws.title = 'Model'\n\
                 ws['A1'] = 6; ws['A2'] = 0; ws['A3'] = '=A1/A2'; ws['A4'] = '=A1*7'\nwb.save(sys.argv[1])\n",
            )
            .arg(dir.join("book.xlsx"))
            .status()
            .unwrap();
        assert!(made.success());
    }
    let (code, out, err) = band(
        &[
            "wrap",
            "xlsx",
            "--write",
            "--allow-write",
            "book.xlsx",
            "--allow-write",
            ".~lock.book.xlsx#",
        ],
        ws.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let band_md = fs_err::read_to_string(ws.path().join("xlsx/BAND.md")).unwrap();
    assert!(band_md.contains("    - \"timeout *\"\n"), "{band_md}");

    // The script on the host, as its SKILL.md says to run it (a HOME of its own).
    let on_host = std::process::Command::new("/usr/bin/python3")
        .arg(ws.path().join("xlsx/scripts/recalc.py"))
        .arg("book.xlsx")
        .current_dir(host.path())
        .env("HOME", host.path().join("home"))
        .output()
        .unwrap();
    let on_host: Value = serde_json::from_slice(&on_host.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&on_host.stderr)));

    let (code, json, err) = run_argv(ws.path(), "xlsx/recalc", &["book.xlsx"]);
    assert_eq!(code, 0, "{json}\n{err}");
    let cli_denied: Vec<&Value> = json["denied"]
        .as_array()
        .map(|d| d.iter().filter(|d| d["kind"] == "cli").collect())
        .unwrap_or_default();
    assert!(cli_denied.is_empty(), "{json}");
    // A report with an error is compared without the crash's stack addresses and the sandbox's
    // `uname: not found`.
    let norm = |v: &Value| match v["error"].as_str() {
        Some(e) => json!({"error": e
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('/') && *l != "Stack:" && !l.ends_with(": not found"))
            .collect::<Vec<_>>()}),
        None => v.clone(),
    };
    assert_eq!(norm(&json["output"]), norm(&on_host), "{json}");

    // Without `timeout *`: Python's FileNotFoundError is a denial with the rule.
    let without = band_md.replace("    - \"timeout *\"\n", "");
    fs_err::write(ws.path().join("xlsx/BAND.md"), without).unwrap();
    let (code, _, err) = band(&["lock", "xlsx"], ws.path());
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = run_argv(ws.path(), "xlsx/recalc", &["book.xlsx"]);
    assert_eq!(code, 5, "{json}\n{err}");
    assert_eq!(
        json["denied"],
        json!([{"kind": "cli", "argv": ["timeout"], "rule": null, "source": "not_found_message"}]),
        "{json}"
    );
}

/// `band wrap --allow-net` writes each host into the band's `allow.net`, in order, and the band
/// lints clean; a loopback host without a port is refused before anything is written, with lint's
/// hint; and lint says the same of such a rule written by hand.
#[test]
fn wrap_allow_net_writes_the_hosts_and_refuses_a_loopback_host_without_a_port() {
    let ws = workspace(&["xlsx"]);
    let refused = output(
        &["wrap", "xlsx", "--write", "--allow-net", "localhost"],
        ws.path(),
    );
    band_snapshot!(refused, "wrap_allow_net_loopback_without_port");
    assert!(!ws.path().join("xlsx/BAND.md").exists());
    let (code, _, err) = band(
        &[
            "wrap",
            "xlsx",
            "--write",
            "--allow-net",
            "localhost:18000",
            "--allow-net",
            "api.example.test:443",
        ],
        ws.path(),
    );
    assert_eq!(code, 0, "{err}");
    let text = fs_err::read_to_string(ws.path().join("xlsx/BAND.md")).unwrap();
    let front = band::wrap::frontmatter_value(&text).unwrap();
    assert_eq!(
        front["allow"]["net"],
        json!(["localhost:18000", "api.example.test:443"])
    );
    assert!(
        text.contains("Network: only the hosts under `allow.net`."),
        "{text}"
    );
    let (code, out, err) = band(&["lint", "--deny-warnings", "xlsx"], ws.path());
    assert_eq!(code, 0, "{out}{err}");
    // By hand: without a port, and with a wildcard port.
    let by_hand = text.replace(
        "    - \"localhost:18000\"\n",
        "    - \"localhost\"\n    - \"127.0.0.1:*\"\n",
    );
    assert_ne!(by_hand, text);
    fs_err::write(ws.path().join("xlsx/BAND.md"), by_hand).unwrap();
    band_snapshot!(
        output(&["lint", "xlsx"], ws.path()),
        "lint_loopback_rule_without_port"
    );
}

/// Every skill of the corpus without a band (`tests/corpus/wild-shapes/`: the shapes that broke
/// `band wrap` on public skills, `tests/corpus/agent/`, and any other) is wrapped with --write,
/// and lints with no error. What was wrapped, what was left out and why, and the `allow.cli`
/// drafted are snapshotted per skill: only entry points (SKILL.md's run commands, a `#!` line,
/// an execute bit, a main guard), never data (`pyproject.toml`, `uv.lock`, `requirements.txt`,
/// an `.xml`, a `.tar.gz`, an `.html`), tests, `__init__.py` or imported modules; commands only
/// from the code an entry reaches (not `gcc`/`sysctl` of a module nothing imports), a bash
/// script's commands, a `shell=True` string's first word.
#[test]
fn wrap_every_corpus_skill_without_a_band_lints_clean() {
    let corpus = repo().join("tests/corpus");
    let skills: Vec<PathBuf> = band::skill::find_skills(&corpus)
        .into_iter()
        .filter(|s| {
            !s.join("BAND.md").exists()
                && !s.join("scripts/BAND.md").exists()
                && !s.starts_with(corpus.join("wild"))
        })
        .collect();
    assert!(skills.len() >= 14, "{skills:?}");
    let mut report = String::new();
    for skill in &skills {
        let rel = skill.strip_prefix(&corpus).unwrap().display().to_string();
        let ws = tempfile::tempdir().unwrap();
        let name = skill.file_name().unwrap().to_str().unwrap();
        band_test::copy_dir(skill, &ws.path().join(name));
        let (code, out, err) = band(&["wrap", name, "--json"], ws.path());
        assert_eq!(code, 0, "{rel}: {out}{err}");
        let plan: Value = serde_json::from_str(&out).unwrap();
        let (code, out, err) = band(&["wrap", name, "--write"], ws.path());
        assert_eq!(code, 0, "{rel}: {out}{err}");
        let (_, out, err) = band(&["lint", "--format", "json", name], ws.path());
        let lint: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
        assert_eq!(lint["summary"]["errors"], json!(0), "{rel}: {lint:#}");
        // The loader sees the scripts wrap wrapped, no more (no data file or module becomes a
        // script the band does not allow).
        let (loaded, _) = band::skill::load_skill(&ws.path().join(name));
        let mut loaded: Vec<String> = loaded.scripts.iter().map(|s| s.name.clone()).collect();
        loaded.sort();
        let wrapped: Vec<String> = plan["scripts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(loaded, wrapped, "{rel}");
        report.push_str(&format!("## {rel}\n"));
        for s in plan["scripts"].as_array().unwrap() {
            report.push_str(&format!(
                "script {} ({}; {})\n",
                s["name"].as_str().unwrap(),
                s["entry"].as_str().unwrap(),
                s["why"].as_str().unwrap()
            ));
            for u in s["unseen"].as_array().unwrap() {
                report.push_str(&format!("  unseen: {}\n", u.as_str().unwrap()));
            }
        }
        for s in plan["skipped"].as_array().unwrap() {
            report.push_str(&format!(
                "skipped {} ({})\n",
                s["path"].as_str().unwrap(),
                s["why"].as_str().unwrap()
            ));
        }
        let band_md = plan["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "BAND.md")
            .unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string();
        let fm = band::wrap::frontmatter_value(&band_md).unwrap();
        for r in fm["allow"]["cli"].as_array().unwrap() {
            report.push_str(&format!("allow.cli {}\n", r.as_str().unwrap()));
        }
        report.push('\n');
    }
    insta::assert_snapshot!("wrap_corpus_entry_points", report);
}

/// A wrapped entry of mode 644 with no `#!` line (a PEP 723 block and a `__main__` guard, run by
/// SKILL.md's `uv run …/scripts/draw_cards.py`) runs in band as on the host with python3: the
/// same stdout.
#[test]
fn privileged_wrapped_mode_644_entry_runs_as_on_the_host() {
    band_test::privileged!(sandbox_missing());
    let ws = tempfile::tempdir().unwrap();
    let skill = ws.path().join("card-draw");
    band_test::copy_dir(&repo().join("tests/corpus/wild-shapes/card-draw"), &skill);
    let entry = skill.join("scripts/draw_cards.py");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs_err::metadata(&entry).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let (code, out, err) = band(&["wrap", "card-draw", "--write"], ws.path());
    assert_eq!(code, 0, "{out}{err}");
    let words = ["--seed", "7", "--count", "3"];
    let host = std::process::Command::new("python3")
        .arg(&entry)
        .args(words)
        .output()
        .unwrap();
    assert!(host.status.success(), "{host:?}");
    let host = String::from_utf8(host.stdout).unwrap();
    assert_eq!(host.lines().count(), 3, "{host}");
    let (code, json, err) = run_argv(ws.path(), "card-draw/draw_cards", &words);
    assert_eq!(code, 0, "{json}\n{err}");
    assert_eq!(json["output"], json!(host), "{err}");
}

/// `wild-shapes/module-entry`: SKILL.md runs `python -m scripts.package_skill` (from the skill's
/// folder), and the script imports `from scripts.quick_validate import …`. Wrapped as `python3 -m
/// scripts.package_skill *`, and run by band as a module with the skill's root on Python's path
/// (before: run by its path, `ModuleNotFoundError: No module named 'scripts'`): the stdout of the
/// host's `python3 -m scripts.package_skill` run in the skill's folder.
#[test]
fn privileged_a_module_entry_runs_as_its_skill_md_runs_it() {
    band_test::privileged!(sandbox_missing());
    let ws = tempfile::tempdir().unwrap();
    let skill = ws.path().join("module-entry");
    band_test::copy_dir(
        &repo().join("tests/corpus/wild-shapes/module-entry"),
        &skill,
    );
    let (code, out, err) = band(&["wrap", "module-entry", "--write"], ws.path());
    assert_eq!(code, 0, "{out}{err}");
    let band_md = fs_err::read_to_string(skill.join("BAND.md")).unwrap();
    assert!(
        band_md.contains("python3 -m scripts.package_skill *"),
        "{band_md}"
    );
    let words = ["my-skill", "Other_Skill"];
    let host = std::process::Command::new("python3")
        .args(["-m", "scripts.package_skill"])
        .args(words)
        .current_dir(&skill)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(host.status.success(), "{host:?}");
    let host = String::from_utf8(host.stdout).unwrap();
    assert_eq!(
        host,
        "running as scripts.package_skill\nmy-skill: ok\nOther_Skill: bad\n"
    );
    let (code, json, err) = run_argv(ws.path(), "module-entry/package_skill", &words);
    assert_eq!(code, 0, "{json}\n{err}");
    assert_eq!(json["output"], json!(host), "{err}");
}
