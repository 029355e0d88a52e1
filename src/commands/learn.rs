//! `band learn`: run a script (or an ad-hoc command) once in an observing sandbox, and draft the
//! narrowest band for what it did, as a diff against its current band ([`band::learn`]).
//!
//! The observing run is an ordinary run through the same pipeline and band-server, on a private
//! copy of the skill whose band is the learning band ([`band::learn::observe::learning_policy`])
//! and on a copy of the workspace, with band-server asked to observe (`observe: true`).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::skills::{find_script, split_target};
use crate::cli::learn::LearnArgs;
use crate::cli::progress::{Spinner, cancel_on_signals};
use crate::cli::render::{Live, say};
use crate::cli::user_error;
use band::client::adhoc::{AdHoc, AdHocSpec};
use band::client::pipeline::{self, Outcome, RunSpec};
use band::client::workspace::{self, Copied, CopyLimits, WorkspaceRoot};
use band::learn::observe::{self, ESSENTIALS};
use band::learn::{self as learn, Observations};
use band::policy::{Policy, spell};
use band::proto::{Status, exit};

/// The most files a workspace copy may hold (and at most what `band run` sends, in bytes).
const MAX_WORKSPACE_FILES: usize = 20_000;
/// Files of the skill larger than this are not scanned for command names.
const MAX_SCAN_BYTES: u64 = 1024 * 1024;
/// Where the host's programs are looked for (band-server's PATH for declared commands).
const HOST_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

pub(crate) fn cmd_learn(mut args: LearnArgs) -> Result<u8> {
    // band learn's own switches also count after the script's `--key=value` arguments.
    if args.band.is_none() {
        let mut rest = Vec::new();
        let mut it = std::mem::take(&mut args.args).into_iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--write" => args.write = true,
                "--merge" => args.merge = true,
                "--net" => args.net = true,
                "--json" => args.json = true,
                "--workspace" => args.workspace = it.next().map(PathBuf::from),
                _ => match a.strip_prefix("--workspace=") {
                    Some(dir) => args.workspace = Some(PathBuf::from(dir)),
                    None => rest.push(a),
                },
            }
        }
        args.args = rest;
    }
    if args.band.is_some() {
        return learn_adhoc(&args);
    }
    let Some(target) = args.target.as_deref() else {
        bail!(user_error(
            "band learn needs a script to observe",
            "`band learn <skill>/<script> --key=value…`, or `band learn --band FILE -- CMD…`"
        ));
    };
    let (skill_name, Some(script)) = split_target(target) else {
        bail!(user_error(
            format!("`{target}` names no script"),
            "use `band learn <skill>/<script>`; `band list` shows them"
        ));
    };
    let skill = find_script(skill_name, script, &args.skills)?;
    // An argv-style script (`band wrap`): the words after `--` are its `args`.
    let raw_input = if args.input.is_none()
        && band::contract::SchemaSet::load_dir(&skill.root)
            .0
            .takes_argv(script)
    {
        let words = match args.args.split_first() {
            Some((first, rest)) if first == "--" => rest,
            _ => &args.args[..],
        };
        serde_json::json!({ "args": words })
    } else {
        read_input(&args)?
    };
    let resolved = band::skill::resolve_script(&skill, script).0;
    let current = resolved
        .as_ref()
        .map(|r| r.policy.clone())
        .unwrap_or_default();
    let texts = skill_texts(&skill.root);
    let text_refs: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
    let mut candidates = observe::candidate_commands(&text_refs, &is_host_program);
    if let Some(entry) = skill.script(script).map(|s| skill.root.join(&s.entry))
        && let Ok(text) = band::skillfs::read_to_string(&skill.root, &entry, MAX_SCAN_BYTES)
        && let Some(interp) = observe::shebang_command(&text)
        && !ESSENTIALS.contains(&interp.as_str())
        && !candidates.contains(&interp)
    {
        candidates.push(interp);
    }
    let offered = offered_secrets(&current, &args.secrets);
    if !args.json && args.net {
        say("band learn: --net: the observed script can reach any public host during this run\n");
    }
    cancel_on_signals();
    let human = !args.json;
    // One observed run with `candidates` on PATH (a fresh copy of the skill and workspace).
    let observe_once = |candidates: &[String]| -> Result<Observed> {
        let tmp = tempfile::Builder::new()
            .prefix("band-learn-")
            .tempdir()
            .context("cannot create a temporary folder for band learn")?;
        let folder = skill
            .root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_owned()))
            .unwrap_or_else(|| skill.name.clone().into());
        let copy = tmp.path().join("skills").join(folder);
        copy_skill(&skill.root, &copy, &|rel| rel == band::lock::LOCK_FILE)?;
        let ws = tmp.path().join("workspace");
        let listing = copy_workspace(
            args.workspace.as_deref().unwrap_or(Path::new(".")),
            args.workspace.is_some(),
            &ws,
            &current.allow.read,
        )?;
        let policy = observe::learning_policy(
            &current,
            candidates,
            args.net,
            &offered,
            &listing.empty_folders,
        );
        let (policy, site_notes) = fit_to_site(policy, false)?;
        let band_text = learning_band(&skill.name, &policy, resolved.as_ref())?;
        // (A skill may have no scripts/ folder.)
        fs_err::create_dir_all(copy.join("scripts"))?;
        fs_err::write(
            copy.join("scripts").join(format!("{script}.band.md")),
            band_text,
        )?;
        let spec = RunSpec {
            skill_root: copy,
            script: script.to_string(),
            raw_input: raw_input.clone(),
            workspace: ws,
            allow_system_workspace: false,
            target: args.exec_target.clone(),
            trace: true,
            require_lock: false,
            record_io: false,
            schemas: None,
        };
        let spinner = Spinner::start(args.json, format!("observing {target}"));
        let mut live = Live::default();
        let outcome = pipeline::run_observed(
            &spec,
            &mut |ev| {
                if human {
                    spinner.suspend(|| live.event(ev))
                }
            },
            &|_| None,
        );
        spinner.finish();
        live.end();
        Ok(Observed {
            outcome: outcome?,
            policy,
            files: listing.files,
            site_notes,
        })
    };
    let (seen, passes) = observe_passes(&mut candidates, human, &observe_once)?;
    let (outcome, policy) = (&seen.outcome, &seen.policy);
    let mut obs = observe::observations(&outcome.result, &offered, &text_refs, policy);
    let values = observe::data_values(&raw_input, &seen.files);
    obs.data = observe::data_in_calls(&obs.execs, &values, &obs.listed);
    // A value of the input in a request's path varies with the input too.
    for v in band::learn::http::data_in_requests(&obs.http, &values) {
        if !obs.data.contains(&v) {
            obs.data.push(v);
        }
    }
    obs.notes.extend(passes);
    obs.notes.extend(seen.site_notes.iter().cloned());
    let key = format!("{}-{script}", skill.name);
    let band_file = resolved.as_ref().map(written_band_file);
    // The skill's other scripts the same band file governs: their rules stay.
    let shared_with = sharing_band(&skill, script);
    let entry_start = skill.script(script).and_then(|s| {
        let start =
            learn::EntryStart::of(&s.entry, &band::lint::entry_launch(&skill.root, &s.entry))?;
        let head = band::skillfs::read_head(&skill.root, &s.entry, 256)
            .map(|(head, _)| head)
            .unwrap_or_default();
        Some(start.with_shebang(&s.entry, &head))
    });
    let to = Destination {
        band_file: band_file.as_deref(),
        skill_root: Some(&skill.root),
        shared_with,
        scripts: script_texts(&texts),
        entry_start,
    };
    finish(&args, outcome, obs, &key, &current, to)
}

/// One observed run: its outcome, its learning policy, and the files of its workspace copy
/// (workspace-relative).
struct Observed {
    outcome: Outcome,
    policy: Policy,
    files: Vec<String>,
    /// What the site policy or a narrowing took from the learning policy, as notes.
    site_notes: Vec<String>,
}

/// One observed run with the given commands on PATH.
type ObserveOnce<'a> = dyn Fn(&[String]) -> Result<Observed> + 'a;

/// Most observed runs of one `band learn`: the first, and up to two more for commands the run
/// tried that were not on its PATH.
const MAX_PASSES: usize = 3;

/// Observe (`once`), and while the run tried commands that were not in its sandbox but are on
/// this host (a program named through a variable, which no file of the skill names), observe
/// again with them on PATH, at most [`MAX_PASSES`] runs. Returns the last run, its learning
/// policy, and notes saying what was added and which tried names this host does not have.
fn observe_passes(
    candidates: &mut Vec<String>,
    human: bool,
    once: &ObserveOnce<'_>,
) -> Result<(Observed, Vec<String>)> {
    let mut notes = Vec::new();
    let mut absent = BTreeSet::new();
    let mut pass = 1;
    loop {
        let seen = once(candidates)?;
        let outcome = &seen.outcome;
        let outside = outcome
            .result
            .observed
            .as_ref()
            .map(|o| o.outside.as_slice())
            .unwrap_or_default();
        let tried = observe::tried_commands(outside, &outcome.result.denied);
        let mut added = Vec::new();
        for name in tried {
            if candidates.contains(&name) || ESSENTIALS.contains(&name.as_str()) {
                continue;
            }
            if is_host_program(&name) {
                added.push(name);
            } else {
                absent.insert(name);
            }
        }
        if added.is_empty() || pass >= MAX_PASSES {
            if !added.is_empty() {
                notes.push(format!(
                    "the run still tried {} after {MAX_PASSES} runs; run band learn again to cover them",
                    added.join(", ")
                ));
            }
            for name in &absent {
                notes.push(format!(
                    "the run tried to start `{name}`, which this host does not have: no rule can make it run"
                ));
            }
            return Ok((seen, notes));
        }
        let msg = format!(
            "the run tried {} (named nowhere in the skill's files); observed again with {} on PATH",
            added.join(", "),
            if added.len() == 1 { "it" } else { "them" }
        );
        if human {
            say(&format!("band learn: {msg}\n"));
        }
        notes.push(msg);
        candidates.extend(added);
        pass += 1;
    }
}

/// `band learn --band FILE -- CMD…`: the command under the learning band made from FILE.
fn learn_adhoc(args: &LearnArgs) -> Result<u8> {
    let Some(band_file) = &args.band else {
        return Ok(exit::USAGE);
    };
    let command = args.command();
    if command.is_empty() {
        bail!(user_error(
            "band learn --band needs a command after `--`",
            "`band learn --band BAND.md -- python3 script.py`"
        ));
    }
    let checked = band::client::adhoc::check_band_file(band_file)?;
    let current = band::skill::resolve_band_file(&checked)
        .0
        .map(|r| r.policy)
        .unwrap_or_default();
    let texts: Vec<String> = command
        .iter()
        .filter_map(|a| {
            let p = Path::new(a);
            let small = p
                .metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= MAX_SCAN_BYTES);
            small.then(|| fs_err::read_to_string(p).ok()).flatten()
        })
        .chain([command.join(" ")])
        .collect();
    let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut candidates = observe::candidate_commands(&text_refs, &is_host_program);
    let offered = offered_secrets(&current, &args.secrets);
    if !args.json && args.net {
        say("band learn: --net: the observed command can reach any public host during this run\n");
    }
    cancel_on_signals();
    let human = !args.json;
    let observe_once = |candidates: &[String]| -> Result<Observed> {
        let tmp = tempfile::Builder::new()
            .prefix("band-learn-")
            .tempdir()
            .context("cannot create a temporary folder for band learn")?;
        let ws = tmp.path().join("workspace");
        let listing = copy_workspace(
            args.workspace.as_deref().unwrap_or(Path::new(".")),
            args.workspace.is_some(),
            &ws,
            &current.allow.read,
        )?;
        let mut policy = observe::learning_policy(
            &current,
            candidates,
            args.net,
            &offered,
            &listing.empty_folders,
        );
        // The command itself, exactly as given (band exec checks it before anything starts).
        if let Some(rule) = spell::exact_cli_rule(&command)
            && !policy.allow.cli.contains(&rule)
        {
            policy.allow.cli.push(rule);
        }
        let (policy, site_notes) = fit_to_site(policy, true)?;
        let learn_band = tmp.path().join("learn.band.md");
        fs_err::write(&learn_band, learning_band("exec", &policy, None)?)?;
        let adhoc = AdHoc::new(&AdHocSpec {
            band_file: learn_band,
            argv: command.clone(),
            workspace: ws,
            allow_system_workspace: false,
            target: args.exec_target.clone(),
            record_io: false,
            trace: true,
        })?;
        let mut live = Live::default();
        let outcome = adhoc.run_observed(&mut |ev| {
            if human {
                live.event(ev)
            }
        });
        live.end();
        Ok(Observed {
            outcome: outcome?,
            policy,
            files: listing.files,
            site_notes,
        })
    };
    let (seen, passes) = observe_passes(&mut candidates, human, &observe_once)?;
    let (outcome, policy) = (&seen.outcome, &seen.policy);
    let mut obs = observe::observations(&outcome.result, &offered, &text_refs, policy);
    // The command is the author's, not data: only the workspace's paths are.
    obs.data = observe::data_in_calls(
        &obs.execs,
        &observe::data_values(&serde_json::Value::Null, &seen.files),
        &obs.listed,
    );
    obs.notes.extend(passes);
    obs.notes.extend(seen.site_notes.iter().cloned());
    let key = format!(
        "exec-{}",
        band::lock::sha256_hex(checked.to_string_lossy().as_bytes())
    );
    let to = Destination {
        band_file: Some(&checked),
        ..Destination::default()
    };
    finish(args, outcome, obs, &key, &current, to)
}

/// Where a draft goes: the band file `--write` edits, the skill it re-locks, and the skill's
/// other scripts that band file governs (their rules the draft keeps).
#[derive(Default)]
struct Destination<'a> {
    band_file: Option<&'a Path>,
    skill_root: Option<&'a Path>,
    shared_with: Vec<String>,
    /// The skill's files under `scripts/` (band files aside): name and text.
    scripts: Vec<(String, String)>,
    /// How band-server starts the script, when with an interpreter that needs a rule.
    entry_start: Option<learn::EntryStart>,
}

/// Merge, save, draft, print, and with --write write the band and re-lock.
fn finish(
    args: &LearnArgs,
    outcome: &Outcome,
    mut obs: Observations,
    key: &str,
    current: &Policy,
    to: Destination,
) -> Result<u8> {
    let Destination {
        band_file,
        skill_root,
        shared_with,
        scripts,
        entry_start,
    } = to;
    let result = &outcome.result;
    if result.status == Status::SetupFailed || result.status == Status::InputInvalid {
        crate::cli::render::print_failure(result);
        return Ok(result.status.exit_code());
    }
    if result.observed.is_none() {
        bail!(user_error(
            "band-server did not report which files the run touched",
            "band learn needs a band-server of this version (`band doctor` checks it)"
        ));
    }
    let saved = saved_path(key)?;
    if args.merge
        && let Ok(text) = fs_err::read_to_string(&saved)
        && let Ok(before) = serde_json::from_str::<Observations>(&text)
    {
        let mut all = before;
        all.merge(obs);
        obs = all;
    }
    if let Some(dir) = saved.parent() {
        fs_err::create_dir_all(dir)?;
    }
    fs_err::write(&saved, serde_json::to_string_pretty(&obs)?)?;

    let mut draft = learn::draft(&obs);
    learn::vet(&mut draft);
    draft.keep_named_reads(&current.allow, &scripts);
    if let Some(start) = &entry_start {
        draft.keep_entry_start(&current.allow, start);
    }
    if !shared_with.is_empty() {
        let names: Vec<String> = shared_with.iter().map(|s| format!("`{s}`")).collect();
        draft.keep(
            &current.allow,
            &current.secrets,
            &format!(
                "kept: the band also governs {}, which this run cannot speak for",
                names.join(", ")
            ),
        );
    }
    draft.drop_covered_paths();
    let lines = learn::diff(&current.allow, &current.secrets, &draft);
    let mut notes = draft.notes.clone();
    notes.extend(learn::narrowed_note(&lines));
    if result.observed.as_ref().is_some_and(|o| !o.complete) {
        notes.push(
            "the observer's record is incomplete (the kernel's event queue overflowed, or the run touched more paths than band-server keeps): some files may be missing"
                .into(),
        );
    }
    if !args.net && !obs.lookups.is_empty() {
        let mut names: Vec<&str> = obs.lookups.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        notes.push(format!(
            "without --net the run could reach no host: {} was looked up (and refused), and a contact was not tried, so no port is known; run band learn with --net to observe it",
            names.join(", ")
        ));
    }
    if let Some(note) = site_refuses(current, &draft) {
        notes.push(note);
    }
    if result.status != Status::Ok {
        notes.push(format!(
            "the observed run ended `{}` ({}); the draft covers what it did until then",
            result.status,
            result.status.describe()
        ));
    }
    if let Some(hint) = result.listening_hint() {
        notes.push(hint);
    }
    for line in result.stderr.lines() {
        if line.ends_with("not found") || line.ends_with("command not found") {
            notes.push(format!(
                "the script ran a program band learn could not offer: {line}"
            ));
        }
    }
    if args.json {
        let doc = serde_json::json!({
            "status": result.status,
            "observations": obs,
            "draft": draft,
            "diff": lines,
            "notes": notes,
            "net": args.net,
            "written": result.written.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
            "observed": result.observed,
        });
        crate::cli::render::write_stdout(&format!(
            "{}\n",
            crate::cli::render::json_text(&serde_json::to_string_pretty(&doc)?)
        ))?;
    } else {
        say(&format!(
            "band learn: observed run {} ({} command call{}, {} file{} read, {} written, {} name{} looked up)\n",
            result.status,
            obs.execs.len(),
            if obs.execs.len() == 1 { "" } else { "s" },
            obs.reads.len(),
            if obs.reads.len() == 1 { "" } else { "s" },
            obs.writes.len(),
            obs.lookups.len(),
            if obs.lookups.len() == 1 { "" } else { "s" },
        ));
        crate::cli::render::write_stdout(&learn::render_diff(&lines))?;
        for n in &notes {
            say(&format!("band learn: note: {}\n", learn::one_line(n)));
        }
    }
    if args.write {
        let Some(file) = band_file else {
            bail!(user_error(
                "there is no band file to write the draft into",
                "create one with `band init`, then run band learn --write again"
            ));
        };
        // A band the skill shares through `path:` or `extends:` from outside it is other skills'
        // too: learn writes only inside the skill.
        if let Some(root) = skill_root {
            let inside = match (fs_err::canonicalize(root), fs_err::canonicalize(file)) {
                (Ok(root), Ok(file)) => file.starts_with(root),
                _ => false,
            };
            if !inside {
                bail!(user_error(
                    format!(
                        "the band this script runs under is {}, outside the skill (reached through `path:`); band learn --write writes only inside the skill",
                        file.display()
                    ),
                    "apply the diff to that band by hand (other skills may share it), or give the skill a band of its own"
                ));
            }
        }
        write_draft(file, &draft)?;
        if !args.json {
            say(&format!("band learn: wrote {}\n", file.display()));
        }
        if let Some(root) = skill_root {
            let tree =
                band::lock::Tree::read(root).map_err(|e| user_error(e.to_string(), e.hint()))?;
            // As `band lock`: a skill lint finds errors in is not locked (the band written above
            // stays, and the old lock no longer matches it).
            super::lock::lock_skill(root, &tree)?;
            if !args.json {
                say(&format!(
                    "band learn: re-locked {}\n",
                    root.join(band::lock::LOCK_FILE).display()
                ));
            }
        }
    }
    Ok(exit::OK)
}

/// The site's layers this client previews and the tier an unsigned copy gets (learn observes a
/// copy); `None` when there are none.
fn site_layers() -> Result<Option<(band::client::narrow::Preview, String)>> {
    use band::client::narrow::{PreviewError, preview};
    match preview() {
        Ok(None) => Ok(None),
        Ok(Some(p)) => {
            let (tier, _) = p.tier(None);
            Ok(Some((p, tier)))
        }
        Err(PreviewError::Site(e)) => anyhow::bail!("the site policy cannot be used: {e}"),
        Err(PreviewError::Narrowing(e)) => Err((*e).into()),
    }
}

/// The learning policy fitted to the site's layers ([`band::policy::site::fit`]): what they
/// would refuse is not offered to the observed run (band-server would refuse the whole run), and
/// each rule taken away is a note.
fn fit_to_site(policy: Policy, exec: bool) -> Result<(Policy, Vec<String>)> {
    use band::policy::site;
    let Some((p, tier)) = site_layers()? else {
        return Ok((policy, Vec::new()));
    };
    match site::fit(
        &policy,
        site::RunKind { exec },
        &p.site,
        &tier,
        &p.narrowing,
    ) {
        Ok((fitted, dropped)) => Ok((
            fitted,
            dropped
                .iter()
                .map(|r| format!("not offered to the observed run: {}", r.message))
                .collect(),
        )),
        Err(r) => anyhow::bail!("{} (hint: {})", r.message, r.hint),
    }
}

/// What the site policy this client previews (and the user's and session's narrowing) would
/// say of the band with the draft applied: `Some(note)` when it would refuse it (a draft learn
/// cannot make run here), `None` when it runs or there is no site policy.
fn site_refuses(current: &Policy, draft: &learn::Draft) -> Option<String> {
    use band::policy::site;
    let (p, tier) = match site_layers() {
        Ok(l) => l?,
        Err(e) => return Some(format!("{e}: no run starts here")),
    };
    let mut drafted = current.clone();
    drafted.allow = draft.allow();
    drafted.secrets = draft.secret_names();
    p.apply(&drafted, site::RunKind::default(), &tier)
        .err()
        .map(|r| format!("this draft would not run here: {} ({})", r.message, r.hint))
}

/// Write the draft's lists into `file`, keeping everything else (comments included). Fail closed:
/// the new text must read back as the old frontmatter with exactly the drafted lists in place
/// ([`expected_frontmatter`]), and parse without an error.
fn write_draft(file: &Path, draft: &learn::Draft) -> Result<()> {
    // Never through a link out of the skill (issue 36): the draft goes into the skill's band.
    let (scope, abs) = band::manifest::band_scope(file);
    let original =
        band::skillfs::read_to_string(&scope, &abs, band::manifest::MAX_BAND_FILE_BYTES)?;
    let mut text = original.clone();
    let allow = draft.allow();
    for cat in band::policy::Category::ALL {
        text = learn::edit::set_list(&text, "allow", cat.as_str(), allow.get(cat))
            .map_err(|e| user_error(format!("{}: {e}", file.display()), "edit the band by hand"))?;
    }
    text = learn::edit::set_list(&text, "env", "secrets", &draft.secret_names())
        .map_err(|e| user_error(format!("{}: {e}", file.display()), "edit the band by hand"))?;
    let (parsed_ok, errors) = {
        let parsed = band::manifest::parse_band(file, &text);
        let errors: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        (errors.is_empty(), errors)
    };
    let expected = band::wrap::frontmatter_value(&original).map(|v| expected_frontmatter(v, draft));
    let got = band::wrap::frontmatter_value(&text).map(normalized);
    if expected.is_none() || expected != got {
        bail!(user_error(
            format!(
                "the drafted band does not read back as the current band with the drafted rules; {} was not changed",
                file.display()
            ),
            "apply the diff by hand"
        ));
    }
    if !parsed_ok {
        bail!(user_error(
            format!(
                "the drafted band would not parse; {} was not changed\n{}",
                file.display(),
                errors.join("\n")
            ),
            "apply the diff by hand"
        ));
    }
    band::skillfs::replace(&scope, &abs, text.as_bytes())?;
    Ok(())
}

/// What `--write` must turn the frontmatter `current` into: the same, with `allow.<category>` and
/// `env.secrets` the draft's lists (a list left empty, and a section left empty, removed).
fn expected_frontmatter(mut current: serde_json::Value, draft: &learn::Draft) -> serde_json::Value {
    let allow = draft.allow();
    let lists = band::policy::Category::ALL
        .iter()
        .map(|c| ("allow", c.as_str(), allow.get(*c).to_vec()))
        .chain([("env", "secrets", draft.secret_names())]);
    for (top, key, values) in lists {
        if let Some(doc) = current.as_object_mut() {
            let section = doc.entry(top).or_insert_with(|| serde_json::json!({}));
            if !section.is_object() {
                *section = serde_json::json!({});
            }
            if let Some(map) = section.as_object_mut() {
                if values.is_empty() {
                    map.remove(key);
                } else {
                    map.insert(key.into(), serde_json::json!(values));
                }
            }
        }
    }
    normalized(current)
}

/// A frontmatter with its empty `allow:` and `env:` sections (null or `{}`) removed.
fn normalized(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(doc) = v.as_object_mut() {
        for top in ["allow", "env"] {
            if doc
                .get(top)
                .is_some_and(|s| s.is_null() || s.as_object().is_some_and(|m| m.is_empty()))
            {
                doc.remove(top);
            }
        }
    }
    v
}

/// The observing band's text: JSON frontmatter (YAML reads it) with the learning policy.
fn learning_band(
    name: &str,
    p: &Policy,
    resolved: Option<&band::skill::Resolved>,
) -> Result<String> {
    let band_name = format!("{}-learn", band::manifest::to_kebab(name));
    let mut doc = serde_json::json!({
        "band": band_name,
        "description": "band learn's observing band",
        "version": 1,
        "allow": p.allow,
        "deny": p.deny,
        "limit": p.limits,
    });
    if !p.secrets.is_empty() {
        doc["env"] = serde_json::json!({ "secrets": p.secrets });
    }
    // A band's config block is keyed by the band's name (`slack:` in the slack band).
    if let Some(cfg) = resolved.and_then(|r| r.config.clone()) {
        doc[band_name.as_str()] = cfg;
    }
    Ok(format!("---\n{}\n---\n", serde_json::to_string(&doc)?))
}

/// The skill's scripts other than `script` whose band is the band file `script`'s is (the one
/// `band learn --write` would edit): a rule one of them needs may be one `script` never uses.
pub(crate) fn sharing_band(skill: &band::skill::Skill, script: &str) -> Vec<String> {
    let file = |name: &str| {
        band::skill::resolve_script(skill, name)
            .0
            .map(|r| written_band_file(&r))
    };
    let Some(own) = file(script) else {
        return Vec::new();
    };
    skill
        .scripts
        .iter()
        .filter(|s| s.name != script && file(&s.name).as_ref() == Some(&own))
        .map(|s| s.name.clone())
        .collect()
}

/// The band file `--write` edits: the one the script's band file leads to through `path:`
/// pointers (`scripts/x.band.md` → `bands/write.band.md`), not the pointer itself.
fn written_band_file(r: &band::skill::Resolved) -> PathBuf {
    r.sources
        .iter()
        .find(|s| {
            band::manifest::load_band(s)
                .band
                .is_some_and(|b| b.reference.is_none())
        })
        .cloned()
        .unwrap_or_else(|| r.file.clone())
}

/// Declared secrets and `--secret` names that the environment has.
fn offered_secrets(current: &Policy, extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in current.secrets.iter().chain(extra) {
        if std::env::var_os(s).is_some() && !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

fn is_host_program(name: &str) -> bool {
    HOST_PATH.iter().any(|d| {
        Path::new(d)
            .join(name)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The text files of the skill (at most [`MAX_SCAN_BYTES`] each), each with its path in the
/// skill, in path order: for command and secret names, and the files its scripts name.
fn skill_texts(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs_err::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file()
                && let Ok(t) = band::skillfs::read_to_string(root, &path, MAX_SCAN_BYTES)
            {
                let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                out.push((rel, t));
            }
        }
    }
    out.sort();
    out
}

/// Of [`skill_texts`], the files under `scripts/`, band files aside: each one's path in the
/// skill and text.
fn script_texts(texts: &[(PathBuf, String)]) -> Vec<(String, String)> {
    texts
        .iter()
        .filter(|(rel, _)| rel.starts_with("scripts") && !band::manifest::is_band_file(rel))
        .map(|(rel, t)| (rel.display().to_string(), t.clone()))
        .collect()
}

/// Copy the skill at `from` into `to` (regular files with their modes; symlinks left out, as
/// are `.git` and `target`, which no bundle holds), without the paths `skip` names.
fn copy_skill(from: &Path, to: &Path, skip: &dyn Fn(&str) -> bool) -> Result<()> {
    let root = WorkspaceRoot::open(from, true, true)?;
    workspace::copy_out(&root, to, skip, &|_| false, None)?;
    Ok(())
}

/// What a workspace copy holds (workspace-relative paths).
struct Listing {
    files: Vec<String>,
    /// Folders with nothing in them.
    empty_folders: Vec<String>,
}

/// The files and empty folders below `root` (a copy band learn made: no links in it).
fn list_copy(root: &Path) -> Result<Listing> {
    let mut out = Listing {
        files: Vec::new(),
        empty_folders: Vec::new(),
    };
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let mut empty = true;
        for e in fs_err::read_dir(root.join(&rel))? {
            let e = e?;
            empty = false;
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type()?.is_dir() {
                stack.push(path);
            } else {
                out.files.push(path);
            }
        }
        if empty && !rel.is_empty() {
            out.empty_folders.push(rel);
        }
    }
    out.files.sort();
    out.empty_folders.sort();
    Ok(out)
}

/// The workspace copy the observed run gets: what a run would read of it (regular files and
/// folders, empty ones too; symlinks left out; `.git` and `target` left out unless the band's
/// `allow.read` names them, as a run copies them: `read`).
fn copy_workspace(from: &Path, given: bool, to: &Path, read: &[String]) -> Result<Listing> {
    // Read only, never written back: a system folder is no risk here (as before).
    let root = WorkspaceRoot::open(from, given, true)?;
    let named: Vec<band::policy::fs::FsPattern> = read
        .iter()
        .filter_map(|r| band::policy::fs::FsPattern::parse(r).ok())
        .collect();
    let opens = |rel: &str| workspace::names_skipped(rel, &named, &[]);
    let is_git = |rel: &str| rel.rsplit('/').next() == Some(".git") && !opens(rel);
    let limits = CopyLimits {
        bytes: workspace::MAX_WORKSPACE_BYTES,
        files: MAX_WORKSPACE_FILES,
    };
    match workspace::copy_out(&root, to, &is_git, &opens, Some(limits))? {
        Copied::All => list_copy(to),
        Copied::TooLarge => bail!(user_error(
            format!(
                "the workspace {} is too large to copy for band learn",
                from.display()
            ),
            "pass --workspace DIR with only the files the script needs"
        )),
    }
}

/// Where the observations of earlier runs of `key` are kept (for --merge).
fn saved_path(key: &str) -> Result<PathBuf> {
    let cfg = band::client::config::UserConfig::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(cfg.data_dir().join("learn").join(format!("{safe}.json")))
}

fn read_input(args: &LearnArgs) -> Result<serde_json::Value> {
    super::run::input_document(args.input.as_deref(), None, &args.args)
}
