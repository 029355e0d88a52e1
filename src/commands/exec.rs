//! `band exec --band FILE -- CMD ARGS…`: run an ad-hoc command (code an agent wrote) under a band
//! file's policy, through the same pipeline as `band run`.
//!
//! band writes a one-script skill for it in a private temporary folder: `BAND.md` is a `path:`
//! reference to the given band file (so its `extends`, `includes` and `path:` resolve where the
//! file is), `scripts/exec.sh` execs the command by name, found on the sandbox's PATH of checked
//! wrappers, and the input is `{"argv": [...]}`. The script is band's; the command is the agent's,
//! so before anything starts the whole argv is checked against the band's `allow.cli` / `deny.cli`
//! rules — with no exemption for the shell essentials a script may use — and refused as `denied`
//! (exit 5) when no allow rule admits it. Inside the sandbox the wrapper checks it again.
//!
//! `band.lock` does not apply: the command is ad hoc by definition, and its policy is the band
//! file. Each exec is recorded in the ledger as skill `exec`, script `exec`.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cli::exec::ExecArgs;
use crate::cli::progress::Spinner;
use crate::cli::render;
use crate::cli::user_error;
use band::client::pipeline::{self, Prepared, RunSpec};
use band::manifest::is_band_file;
use band::policy::{CompiledPolicy, Decision};
use band::proto::{self, Denial, Layer, RunResult, Status};

/// The synthetic skill's name and its one script's name.
const NAME: &str = "exec";

pub(crate) fn cmd_exec(args: ExecArgs) -> Result<u8> {
    let band_file = check_band_file(&args.band)?;
    let skill = TempSkill::create(&band_file, &args.command)?;
    let spec = RunSpec {
        skill_root: skill.root.clone(),
        script: NAME.into(),
        raw_input: serde_json::json!({ "argv": args.command }),
        workspace: args.workspace.clone().unwrap_or_else(|| PathBuf::from(".")),
        allow_system_workspace: args.allow_system_workspace,
        target: args.exec_target.clone(),
        trace: false,
        require_lock: false,
        record_io: args.record_io,
    };
    let human = !args.json;
    crate::cli::progress::cancel_on_signals();
    let spinner = Spinner::start(
        args.json,
        format!("running {} under {}", args.command[0], args.band.display()),
    );
    let argv = args.command.clone();
    let outcome = pipeline::run_gated(
        &spec,
        &mut |ev| {
            if human {
                spinner.suspend(|| show_event(ev))
            }
        },
        &|prepared| cli_gate(prepared, &argv),
    );
    spinner.finish();
    drop(skill);
    let outcome = outcome?;
    let result = &outcome.result;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&render::result_json(&outcome)?)?
        );
    } else {
        for w in &outcome.secret_warnings {
            eprintln!("band: warning: {w}");
        }
        if result.status != Status::Ok {
            render::print_failure(result);
        }
    }
    Ok(result.status.exit_code())
}

/// The band file, canonical, or a user error that says what is wrong with the path.
fn check_band_file(path: &Path) -> Result<PathBuf> {
    let hint = "pass --band with a BAND.md or *.band.md file; `band init` writes one";
    let canonical = path
        .canonicalize()
        .map_err(|e| user_error(format!("band file {}: {e}", path.display()), hint))?;
    if !canonical.is_file() || !is_band_file(&canonical) {
        bail!(user_error(
            format!(
                "{} is not a band file (BAND.md or *.band.md)",
                path.display()
            ),
            hint
        ));
    }
    let (resolved, diags) = band::skill::resolve_band_file(&canonical);
    if resolved.is_none() {
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        bail!(user_error(
            format!(
                "the band file {} has errors; nothing ran\n{}",
                path.display(),
                errors.join("\n")
            ),
            format!("run `band lint {}`", path.display())
        ));
    }
    Ok(canonical)
}

/// The agent's argv against the band's CLI rules (deny > allow > default deny; no exemption for
/// the essentials). `Some(result)` refuses the run as `denied`.
fn cli_gate(prepared: &Prepared, argv: &[String]) -> Option<RunResult> {
    let policy = &prepared.request.policy;
    let decision = match CompiledPolicy::compile(policy) {
        Ok(c) => c.cli.check(argv),
        Err(e) => {
            return Some(RunResult::setup_failed(
                &prepared.request.run_id,
                Layer::Cli,
                e.to_string(),
                None,
            ));
        }
    };
    let (rule, why, hint) = match decision {
        Decision::Allow { .. } => return None,
        Decision::Deny { rule } => (
            Some(rule.clone()),
            format!("denied by `deny.cli` rule `{rule}`"),
            "the band file forbids this command line; deny rules win over allow rules".to_string(),
        ),
        Decision::Default if argv[0].contains('/') => (
            None,
            "no `allow.cli` rule admits it".to_string(),
            "name the command, not a path: run a file with its interpreter (`-- python3 script.py`)".to_string(),
        ),
        Decision::Default => (
            None,
            "no `allow.cli` rule admits it".to_string(),
            format!("if the command should run, add a pattern such as `{} *` to allow.cli in the band file", argv[0]),
        ),
    };
    let mut r = RunResult::setup_failed(
        &prepared.request.run_id,
        Layer::Cli,
        format!("command `{}`: {why}; nothing ran", argv.join(" ")),
        Some(hint),
    );
    r.status = Status::Denied;
    r.denied = vec![Denial::Cli {
        argv: argv.to_vec(),
        rule,
    }];
    Some(r)
}

fn show_event(ev: &proto::Event) {
    match ev {
        // The command's own output, as it comes.
        proto::Event::Stdout { data } => render::stream_stdout(data),
        other => render::show_event(other),
    }
}

/// Single-quote `s` for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script that runs the command: `exec` by name, through the sandbox's PATH.
fn script_for(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    format!(
        "#!/bin/sh\n# Written by `band exec`: the agent's command, under the band's policy.\nexec {}\n",
        words.join(" ")
    )
}

/// `path:` from `from_dir` to `file` (both canonical): `../../home/me/x.band.md`.
fn relative_reference(from_dir: &Path, file: &Path) -> String {
    let ups = from_dir.components().skip(1).count();
    let rest = file.strip_prefix("/").unwrap_or(file);
    format!("{}{}", "../".repeat(ups), rest.display())
}

const INPUT_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "description": "The command band exec runs: argv[0] and its arguments.",
  "type": "object",
  "properties": { "argv": { "type": "array", "items": { "type": "string" }, "minItems": 1 } },
  "required": ["argv"],
  "additionalProperties": false
}
"#;

/// The one-script skill for the command, in a private temporary folder removed on drop.
struct TempSkill {
    dir: PathBuf,
    root: PathBuf,
}

impl TempSkill {
    fn create(band_file: &Path, argv: &[String]) -> Result<TempSkill> {
        let base = std::env::temp_dir();
        let mut n = 0u32;
        let dir = loop {
            let d = base.join(format!("band-exec-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => break d,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(e).with_context(|| format!("cannot create {}", d.display())),
            }
        };
        let skill = TempSkill {
            root: dir.join(NAME),
            dir,
        };
        let mkdir = |p: PathBuf| fs_err::create_dir_all(&p);
        mkdir(skill.root.join("scripts"))?;
        mkdir(skill.root.join("schemas/input"))?;
        let root = skill
            .root
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", skill.root.display()))?;
        let files: [(&str, String, u32); 4] = [
            (
                "BAND.md",
                format!("---\npath: {}\n---\n", relative_reference(&root, band_file)),
                0o644,
            ),
            (
                "SKILL.md",
                format!(
                    "---\nname: {NAME}\ndescription: An ad-hoc command run by band exec.\n---\n"
                ),
                0o644,
            ),
            ("scripts/exec.sh", script_for(argv), 0o755),
            ("schemas/input/exec.json", INPUT_SCHEMA.to_string(), 0o644),
        ];
        for (rel, text, mode) in files {
            let p = skill.root.join(rel);
            fs_err::write(&p, text)?;
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        }
        let tree =
            band::lock::Tree::read(&skill.root).map_err(|e| user_error(e.to_string(), e.hint()))?;
        band::lock::write(&skill.root, &tree).map_err(|e| user_error(e.to_string(), e.hint()))?;
        Ok(skill)
    }
}

impl Drop for TempSkill {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_execs_the_argv_quoted() {
        let argv: Vec<String> = ["printf", "%s\\n", "it's", "$HOME `x`"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let script = script_for(&argv);
        assert!(script.starts_with("#!/bin/sh\n"));
        let last = script.lines().last().unwrap_or_default();
        assert_eq!(last, r"exec 'printf' '%s\n' 'it'\''s' '$HOME `x`'");
        // sh reads the words back as the same argv, nothing expanded.
        let words = last.trim_start_matches("exec ");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for a in {words}; do printf '<%s>' \"$a\"; done"))
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            r"<printf><%s\n><it's><$HOME `x`>"
        );
    }

    #[test]
    fn references_climb_to_the_root() {
        assert_eq!(
            relative_reference(
                Path::new("/tmp/band-exec-1-0/exec"),
                Path::new("/home/me/x.band.md")
            ),
            "../../../home/me/x.band.md"
        );
        assert_eq!(
            relative_reference(Path::new("/"), Path::new("/x/BAND.md")),
            "x/BAND.md"
        );
    }
}
