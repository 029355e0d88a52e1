//! An ad-hoc command (code an agent wrote) under a band file's policy: `band exec --band FILE --
//! CMD ARGS…`, through the same pipeline as a skill's script.
//!
//! band writes a one-script skill for it in a private temporary folder ([`TempSkill`]):
//! `BAND.md` is a `path:` reference to the given band file (so its `extends`, `includes` and
//! `path:` resolve where the file is), `scripts/exec.sh` execs the command by name, found on the
//! sandbox's PATH of checked wrappers, and the input is `{"argv": [...]}`. The script is band's;
//! the command is the agent's, so before anything starts the whole argv is checked against the
//! band's `allow.cli` / `deny.cli` rules ([`cli_refusal`]) — with no exemption for the shell
//! essentials a script may use — and refused as `denied` (exit 5) when no allow rule admits it.
//! Inside the sandbox the wrapper checks it again.
//!
//! `band.lock` does not apply: the command is ad hoc by definition, and its policy is the band
//! file. Each exec is recorded in the ledger as skill `exec`, script `exec`.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::outcome::{Outcome, Prepared, RunSpec};
use super::{ClientError, Result, pipeline};
use crate::manifest::is_band_file;
use crate::policy::{CompiledPolicy, Decision, Policy};
use crate::proto::{self, Denial, Layer, RunResult, Status};

/// The synthetic skill's name and its one script's name.
pub const NAME: &str = "exec";

/// What `band exec` asked for.
#[derive(Debug, Clone)]
pub struct AdHocSpec {
    /// The band file whose policy the command runs under.
    pub band_file: PathBuf,
    /// The command and its arguments (at least the command).
    pub argv: Vec<String>,
    /// The host folder the command sees at /workspace.
    pub workspace: PathBuf,
    /// See [`RunSpec::allow_system_workspace`].
    pub allow_system_workspace: bool,
    /// `--target`.
    pub target: Option<String>,
    /// Keep the argv, stdout and stderr in the ledger.
    pub record_io: bool,
    /// Record every command call in the result (`band exec --trace`).
    pub trace: bool,
}

/// An ad-hoc command ready to run: its band file checked, its skill written.
#[derive(Debug)]
pub struct AdHoc {
    skill: TempSkill,
    spec: RunSpec,
    argv: Vec<String>,
}

impl AdHoc {
    /// Check the band file ([`check_band_file`]) and write the command's skill.
    pub fn new(spec: &AdHocSpec) -> Result<AdHoc> {
        let band_file = check_band_file(&spec.band_file)?;
        let skill = TempSkill::create(&band_file, &spec.argv)?;
        let run = RunSpec {
            skill_root: skill.root.clone(),
            script: NAME.into(),
            raw_input: serde_json::json!({ "argv": spec.argv }),
            workspace: spec.workspace.clone(),
            allow_system_workspace: spec.allow_system_workspace,
            target: spec.target.clone(),
            trace: spec.trace,
            require_lock: false,
            record_io: spec.record_io,
            schemas: None,
        };
        Ok(AdHoc {
            skill,
            spec: run,
            argv: spec.argv.clone(),
        })
    }

    /// [`AdHoc::run`], observed by band-server (`band learn --band FILE -- CMD…`).
    pub fn run_observed(self, on_event: &mut dyn FnMut(&proto::Event)) -> Result<Outcome> {
        let argv = &self.argv;
        let outcome =
            pipeline::run_observed(&self.spec, on_event, &|prepared| cli_gate(prepared, argv));
        drop(self.skill);
        outcome
    }

    /// The run it becomes.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }

    /// Run it ([`pipeline::run_gated`], the argv checked by [`cli_refusal`] first), with a
    /// band-server that may have been started on a guess (`early`, see [`pipeline::Early`]); the
    /// skill's temporary folder is removed afterwards.
    pub fn run(
        self,
        early: pipeline::Early,
        on_event: &mut dyn FnMut(&proto::Event),
    ) -> Result<Outcome> {
        let argv = &self.argv;
        let outcome = pipeline::run_gated(&self.spec, early, on_event, &|prepared| {
            cli_gate(prepared, argv)
        });
        drop(self.skill);
        outcome
    }
}

/// The band file, canonical, or a user error that says what is wrong with the path.
pub fn check_band_file(path: &Path) -> Result<PathBuf> {
    let hint = "pass --band with a BAND.md or *.band.md file; `band init` writes one";
    let canonical = path
        .canonicalize()
        .map_err(|e| ClientError::user(format!("band file {}: {e}", path.display()), hint))?;
    if !canonical.is_file() || !is_band_file(&canonical) {
        return Err(ClientError::user(
            format!(
                "{} is not a band file (BAND.md or *.band.md)",
                path.display()
            ),
            hint,
        ));
    }
    let (resolved, diags) = crate::skill::resolve_band_file(&canonical);
    if resolved.is_none() {
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        return Err(ClientError::user(
            format!(
                "the band file {} has errors; nothing ran\n{}",
                path.display(),
                errors.join("\n")
            ),
            format!("run `band lint {}`", path.display()),
        ));
    }
    Ok(canonical)
}

fn cli_gate(prepared: &Prepared, argv: &[String]) -> Option<RunResult> {
    cli_refusal(&prepared.request.policy, &prepared.request.run_id, argv)
}

/// The agent's argv against the band's CLI rules (deny > allow > default deny; no exemption for
/// the essentials). `Some(result)` refuses the run `run_id` as `denied` (or `setup_failed` when
/// the policy does not compile).
pub fn cli_refusal(policy: &Policy, run_id: &str, argv: &[String]) -> Option<RunResult> {
    let decision = match CompiledPolicy::compile(policy) {
        Ok(c) => c.cli.check(argv),
        Err(e) => {
            return Some(RunResult::setup_failed(
                run_id,
                Layer::Cli,
                e.to_string(),
                None,
            ));
        }
    };
    let command = argv.first().map(String::as_str).unwrap_or_default();
    let (rule, why, hint) = match decision {
        Decision::Allow { .. } => return None,
        Decision::Deny { rule } => (
            Some(rule.clone()),
            format!("denied by `deny.cli` rule `{rule}`"),
            "the band file forbids this command line; deny rules win over allow rules".to_string(),
        ),
        Decision::Default if command.contains('/') => (
            None,
            "no `allow.cli` rule admits it".to_string(),
            "name the command, not a path: run a file with its interpreter (`-- python3 script.py`)".to_string(),
        ),
        Decision::Default => (
            None,
            "no `allow.cli` rule admits it".to_string(),
            format!("if the command should run, add a pattern such as `{command} *` to allow.cli in the band file"),
        ),
    };
    let mut r = RunResult::setup_failed(
        run_id,
        Layer::Cli,
        format!("command `{}`: {why}; nothing ran", argv.join(" ")),
        Some(hint),
    );
    r.status = Status::Denied;
    r.denied = vec![Denial::Cli {
        argv: argv.to_vec(),
        rule,
        source: None,
    }];
    Some(r)
}

/// Single-quote `s` for sh.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script that runs the command: `exec` by name, through the sandbox's PATH. band-server
/// recognises exactly this shape and, when the command is allowed, starts it without `sh`
/// (`band_server::layers::cli::shim::band_exec_argv`): change both together.
pub fn script_for(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    format!(
        "#!/bin/sh\n# Written by `band exec`: the agent's command, under the band's policy.\nexec {}\n",
        words.join(" ")
    )
}

/// `path:` from `from_dir` to `file` (both canonical): `../../home/me/x.band.md`.
pub fn relative_reference(from_dir: &Path, file: &Path) -> String {
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

/// An I/O error that names the path and what band was doing (the message band exec always had).
fn io_error(what: &str, path: &Path, e: std::io::Error) -> ClientError {
    ClientError::Fs(std::io::Error::new(
        e.kind(),
        format!("{what} {}: {e}", path.display()),
    ))
}

/// The one-script skill for the command, in a private temporary folder removed on drop.
#[derive(Debug)]
pub struct TempSkill {
    dir: PathBuf,
    root: PathBuf,
}

impl TempSkill {
    /// Write the skill for `argv` under `band_file` (canonical) in a new folder of the system's
    /// temporary folder.
    pub fn create(band_file: &Path, argv: &[String]) -> Result<TempSkill> {
        TempSkill::create_in(&std::env::temp_dir(), band_file, argv)
    }

    /// [`TempSkill::create`] under `base`.
    pub fn create_in(base: &Path, band_file: &Path, argv: &[String]) -> Result<TempSkill> {
        let mut n = 0u32;
        let dir = loop {
            let d = base.join(format!("band-exec-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Ok(()) => break d,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(io_error("cannot create", &d, e)),
            }
        };
        let skill = TempSkill {
            root: dir.join(NAME),
            dir,
        };
        let mkdir = |p: PathBuf| fs_err::create_dir_all(&p).map_err(ClientError::Fs);
        mkdir(skill.root.join("scripts"))?;
        mkdir(skill.root.join("schemas/input"))?;
        let root = skill
            .root
            .canonicalize()
            .map_err(|e| io_error("cannot resolve", &skill.root, e))?;
        let files: [(&str, String, u32); 4] = [
            (
                "BAND.md",
                // A JSON string (YAML reads it): the band file's name is the caller's text, and a
                // newline or `#` in it must not become YAML of its own (issue 36).
                format!(
                    "---\npath: {}\n---\n",
                    serde_json::Value::from(relative_reference(&root, band_file))
                ),
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
            fs_err::write(&p, text).map_err(ClientError::Fs)?;
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                .map_err(ClientError::Fs)?;
        }
        let tree = crate::lock::Tree::read(&skill.root)
            .map_err(|e| ClientError::user(e.to_string(), e.hint()))?;
        crate::lock::write(&skill.root, &tree)
            .map_err(|e| ClientError::user(e.to_string(), e.hint()))?;
        Ok(skill)
    }

    /// The skill's folder.
    pub fn root(&self) -> &Path {
        &self.root
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

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    /// What sh makes of `script_for(["printf", "<%s>", args…])`: each argument as `<arg>`.
    fn sh_reads_back(args: &[&str]) -> String {
        let mut argv = strings(&["printf", "<%s>"]);
        argv.extend(strings(args));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script_for(&argv))
            .output()
            .expect("sh");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn the_script_execs_the_argv_quoted() {
        let argv = strings(&["printf", "%s\\n", "it's", "$HOME `x`"]);
        let script = script_for(&argv);
        assert!(script.starts_with("#!/bin/sh\n"));
        let last = script.lines().last().unwrap_or_default();
        assert_eq!(last, r"exec 'printf' '%s\n' 'it'\''s' '$HOME `x`'");
    }

    #[test]
    fn sh_reads_hostile_arguments_back_unchanged() {
        let hostile = [
            "it's",
            "'",
            "''",
            "\"double\"",
            "$(touch /tmp/band-adhoc-pwned)",
            "`id`",
            "$HOME ${PATH} $0 $@",
            "a\nb",
            "\nexec rm -rf /\n",
            "; echo injected",
            "| cat",
            "&& true",
            "*",
            "~",
            "-n",
            "",
            "\\'\\",
            "tab\there",
        ];
        let expected: String = hostile.iter().map(|a| format!("<{a}>")).collect();
        assert_eq!(sh_reads_back(&hostile), expected);
        assert!(!Path::new("/tmp/band-adhoc-pwned").exists());
    }

    #[test]
    fn quoting_closes_and_reopens_around_single_quotes() {
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("a\nb"), "'a\nb'");
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

    const BAND: &str = "---\nband: agent\ndescription: d\nallow:\n  cli: [\"echo *\"]\n---\n";

    fn user_error(e: ClientError) -> (String, String) {
        match e {
            ClientError::User { message, hint } => (message, hint),
            other => panic!("not a user error: {other:?}"),
        }
    }

    #[test]
    fn the_band_file_must_exist_be_a_band_file_and_have_no_errors() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        let missing = d.join("missing.band.md");
        let (msg, hint) = user_error(check_band_file(&missing).expect_err("missing"));
        assert!(
            msg.starts_with(&format!("band file {}: ", missing.display())),
            "{msg}"
        );
        assert!(hint.contains("--band"), "{hint}");

        fs_err::write(d.join("data.txt"), BAND).expect("write");
        fs_err::create_dir(d.join("BAND.md")).expect("mkdir");
        for not_band in ["data.txt", "BAND.md"] {
            let (msg, _) = user_error(check_band_file(&d.join(not_band)).expect_err(not_band));
            assert!(
                msg.ends_with("is not a band file (BAND.md or *.band.md)"),
                "{msg}"
            );
        }

        let broken = d.join("broken.band.md");
        fs_err::write(
            &broken,
            "---\nband: x\ndescription: d\nallow:\n  cli: [\"/bin/sh *\"]\n---\n",
        )
        .expect("write");
        let (msg, hint) = user_error(check_band_file(&broken).expect_err("broken"));
        assert!(msg.contains("has errors; nothing ran\n"), "{msg}");
        assert_eq!(hint, format!("run `band lint {}`", broken.display()));

        let good = d.join("agent.band.md");
        fs_err::write(&good, BAND).expect("write");
        let canonical = check_band_file(&good).expect("good");
        assert_eq!(canonical, good.canonicalize().expect("canonical"));
    }

    #[test]
    fn a_band_file_name_with_yaml_in_it_stays_one_reference() {
        let dir = tempfile::tempdir().expect("tmp");
        let band = dir.path().join("x\ninsist:\n  net: ['*'] # .band.md");
        fs_err::write(&band, BAND).expect("write");
        let band = band.canonicalize().expect("canonical");
        let skill = TempSkill::create_in(dir.path(), &band, &strings(&["echo"])).expect("create");
        let (skill_md, _) = crate::skill::load_skill(skill.root());
        let (resolved, diags) = crate::skill::resolve_script(&skill_md, NAME);
        let resolved = resolved.unwrap_or_else(|| panic!("{diags:?}"));
        assert_eq!(resolved.policy.allow.cli, ["echo *"]);
        assert!(resolved.policy.insist.net.is_empty());
    }

    #[test]
    fn the_temporary_skill_points_at_the_band_file_and_goes_away() {
        let dir = tempfile::tempdir().expect("tmp");
        let band = dir.path().join("agent.band.md");
        fs_err::write(&band, BAND).expect("write");
        let band = band.canonicalize().expect("canonical");
        let skill =
            TempSkill::create_in(dir.path(), &band, &strings(&["echo", "hi"])).expect("create");
        let root = skill.root().to_path_buf();
        let mode = |rel: &str| {
            use std::os::unix::fs::MetadataExt;
            fs_err::metadata(root.join(rel)).expect("stat").mode() & 0o777
        };
        assert_eq!(mode("scripts/exec.sh"), 0o755);
        assert_eq!(mode("BAND.md"), 0o644);
        assert_eq!(mode(".."), 0o700);
        assert!(root.join("band.lock").is_file());
        assert_eq!(
            fs_err::read_to_string(root.join("scripts/exec.sh")).expect("read"),
            script_for(&strings(&["echo", "hi"]))
        );
        // The reference resolves to the band file, so the script's band is the file's policy.
        let (skill_md, _) = crate::skill::load_skill(&root);
        let (resolved, diags) = crate::skill::resolve_script(&skill_md, NAME);
        let resolved = resolved.unwrap_or_else(|| panic!("{diags:?}"));
        assert_eq!(resolved.policy.allow.cli, ["echo *"]);
        drop(skill);
        assert!(!root.exists());
    }

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.allow.cli = strings(allow);
        p.deny.cli = strings(deny);
        p
    }

    #[test]
    fn an_allowed_command_passes_the_cli_check() {
        let p = policy(&["echo *"], &[]);
        assert!(cli_refusal(&p, "r", &strings(&["echo", "x"])).is_none());
    }

    #[test]
    fn a_deny_rule_refuses_and_names_itself() {
        let p = policy(&["echo *"], &["echo secret *"]);
        let r = cli_refusal(&p, "r", &strings(&["echo", "secret", "x"])).expect("refused");
        assert_eq!(r.status, Status::Denied);
        assert_eq!(r.run_id, "r");
        assert_eq!(
            r.denied,
            vec![Denial::Cli {
                argv: strings(&["echo", "secret", "x"]),
                rule: Some("echo secret *".into()),
                source: None,
            }]
        );
        let error = r.error.expect("error");
        assert_eq!(
            error.message,
            "command `echo secret x`: denied by `deny.cli` rule `echo secret *`; nothing ran"
        );
    }

    #[test]
    fn no_allow_rule_refuses_with_a_hint_that_fits() {
        let p = policy(&["echo *"], &[]);
        // The shell essentials a script may use are not exempt.
        let r = cli_refusal(&p, "r", &strings(&["sh", "-c", "echo hi"])).expect("refused");
        assert_eq!(r.status, Status::Denied);
        let hint = r.error.and_then(|e| e.hint).unwrap_or_default();
        assert!(hint.contains("`sh *`"), "{hint}");
        let r = cli_refusal(&p, "r", &strings(&["/usr/bin/echo", "x"])).expect("refused");
        let hint = r.error.and_then(|e| e.hint).unwrap_or_default();
        assert!(hint.starts_with("name the command, not a path"), "{hint}");
    }
}
