//! Checks on a `RunRequest` before anything is created or looked at: protocol version, run id,
//! file paths, bundle integrity, secrets, limits, input size, the policy, the workspace ([`check`]
//! runs them all in order). All pure.

use std::collections::BTreeMap;

use band::policy::cli::missing_bundled;
use band::policy::{Category, CompiledPolicy, Decision, Policy};
use band::proto::{self, FileEntry, Layer, RunRequest, RunResult, Status};
use base64::Engine;

use crate::config::{EffectiveLimits, ServerConfig, resolve_limits};
use crate::error::{LayerExt, SetupError, SetupResult};

/// Longest accepted relative path, in bytes (Linux `PATH_MAX`).
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// Commands that are never made available, declared or not.
pub(crate) const FORBIDDEN_COMMANDS: &[&str] =
    &["sudo", "su", "doas", "pkexec", "bwrap", "band-server"];

/// A checked file: path validated, data decoded, mode reduced to permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedFile {
    pub path: String,
    pub mode: u32,
    pub data: Vec<u8>,
}

/// The canonical SHA-256 of a bundle, hex encoded: `band::proto::bundle_digest` (one definition
/// for client and server). Files are sorted by path (byte order); each contributes
/// `path \0 mode-in-octal \0 len \0 data` where `mode` is `mode & 0o7777` in octal without prefix
/// (`755`) and `len` is the decimal byte length of the data.
pub fn bundle_sha256(files: &[DecodedFile]) -> String {
    let tuples: Vec<(String, u32, Vec<u8>)> = files
        .iter()
        .map(|f| (f.path.clone(), f.mode, f.data.clone()))
        .collect();
    proto::bundle_digest(&tuples)
}

/// A relative path of the request that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathError {
    #[error("empty path")]
    Empty,
    #[error("path longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("path {0:?} contains NUL")]
    Nul(String),
    #[error("path {0:?} is absolute")]
    Absolute(String),
    #[error("path {path:?} has {what} component")]
    Component { path: String, what: &'static str },
}

/// Check one relative path: not empty, no leading `/`, no NUL, no empty, `.` or `..`
/// components, at most [`MAX_PATH_BYTES`].
pub(crate) fn validate_rel_path(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if path.contains('\0') {
        return Err(PathError::Nul(path.into()));
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute(path.into()));
    }
    for comp in path.split('/') {
        let what = match comp {
            "" => "an empty",
            "." => "a `.`",
            ".." => "a `..`",
            _ => continue,
        };
        return Err(PathError::Component {
            path: path.into(),
            what,
        });
    }
    Ok(())
}

/// Validate and decode a list of file entries (`what` names the list in errors). Duplicate paths,
/// and a path that is both a file and a directory prefix of another (`a` and `a/b`), are refused.
pub(crate) fn decode_files(what: &str, entries: &[FileEntry]) -> SetupResult<Vec<DecodedFile>> {
    let mut out = Vec::with_capacity(entries.len());
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        validate_rel_path(&e.path)
            .map_err(|m| SetupError::new(Layer::Io, format!("{what}: {m}")))?;
        if !seen.insert(e.path.clone()) {
            return Err(SetupError::new(
                Layer::Io,
                format!("{what}: duplicate path {:?}", e.path),
            ));
        }
        let data = base64::engine::general_purpose::STANDARD
            .decode(e.data.as_bytes())
            .map_err(|err| {
                SetupError::new(
                    Layer::Io,
                    format!("{what}: {:?} is not valid base64: {err}", e.path),
                )
            })?;
        out.push(DecodedFile {
            path: e.path.clone(),
            mode: e.mode & 0o7777,
            data,
        });
    }
    for p in &seen {
        let mut prefix = p.as_str();
        while let Some(i) = prefix.rfind('/') {
            prefix = &prefix[..i];
            if seen.contains(prefix) {
                return Err(SetupError::new(
                    Layer::Io,
                    format!("{what}: {prefix:?} is both a file and a directory"),
                ));
            }
        }
    }
    Ok(out)
}

/// Run ids become path components and cgroup names: exactly 16 lowercase hex characters.
pub(crate) fn validate_run_id(id: &str) -> SetupResult<()> {
    if id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(SetupError::new(
            Layer::Protocol,
            format!("run id {id:?} is not 16 lowercase hex characters"),
        ))
    }
}

pub(crate) fn check_protocol(req: &RunRequest) -> SetupResult<()> {
    if req.protocol != proto::PROTOCOL_VERSION {
        return Err(SetupError::new(
            Layer::Protocol,
            format!(
                "client speaks protocol {}, this band-server speaks {}",
                req.protocol,
                proto::PROTOCOL_VERSION
            ),
        )
        .with_hint("install matching versions of band and band-server"));
    }
    Ok(())
}

/// Recompute the bundle hash and compare it with the client's.
pub(crate) fn check_integrity(bundle: &[DecodedFile], claimed: &str) -> SetupResult<()> {
    let actual = bundle_sha256(bundle);
    if !actual.eq_ignore_ascii_case(claimed) {
        return Err(SetupError::new(
            Layer::Integrity,
            format!("bundle hash mismatch: client says {claimed}, content is {actual}"),
        ));
    }
    Ok(())
}

/// The entry must be a bundle file band can start (`band::launch`): executable, or started by an
/// interpreter its `#!` line or extension names.
pub(crate) fn check_entry(bundle: &[DecodedFile], entry: &str) -> SetupResult<()> {
    validate_rel_path(entry).map_err(|m| SetupError::new(Layer::Io, format!("entry: {m}")))?;
    match bundle.iter().find(|f| f.path == entry) {
        None => Err(SetupError::new(
            Layer::Io,
            format!("entry {entry:?} is not in the skill bundle"),
        )),
        Some(f)
            if band::launch::launch(std::path::Path::new(entry), f.mode, &f.data)
                == band::launch::Launch::Unknown =>
        {
            Err(SetupError::new(
                Layer::Process,
                format!(
                    "entry {entry:?} is not executable (mode {:o}), and nothing says what runs it",
                    f.mode
                ),
            )
            .with_hint(format!(
                "give it a #! line or a known extension ({}), or chmod +x it if it is a program",
                band::launch::KNOWN_EXTENSIONS
            )))
        }
        Some(_) => Ok(()),
    }
}

fn valid_env_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Secrets: only names the policy lists, valid environment names, not reserved by the runtime,
/// no NUL in values.
pub(crate) fn check_secrets(
    secrets: &BTreeMap<String, String>,
    declared: &[String],
) -> SetupResult<()> {
    for (name, value) in secrets {
        if !declared.iter().any(|d| d == name) {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("secret {name} is not declared in env.secrets"),
            ));
        }
        if !valid_env_name(name) {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("secret name {name:?} is not a valid environment name"),
            ));
        }
        if proto::env::RESERVED.contains(&name.as_str())
            || proto::env::RESERVED_PREFIXES
                .iter()
                .any(|p| name.starts_with(p))
        {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("secret name {name} is reserved for the runtime"),
            ));
        }
        if value.contains('\0') {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("secret {name} contains a NUL byte"),
            ));
        }
    }
    Ok(())
}

/// Bound secrets (`env.secrets: [{name, hosts}]`): each is a declared secret, bound to host
/// names only, each of which `allow.net` admits (else the value could never be sent, and the
/// proxy would have nothing to hold it to).
pub(crate) fn check_bound_secrets(policy: &Policy) -> SetupResult<()> {
    let net = band::policy::net::NetMatcher::new(&policy.allow.net, &policy.deny.net)
        .map_err(|e| SetupError::new(Layer::Network, format!("allow.net: {}", e.error)))?;
    for (name, hosts) in &policy.secret_hosts {
        if !policy.secrets.contains(name) {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("bound secret {name} is not declared in env.secrets"),
            ));
        }
        if hosts.is_empty() {
            return Err(SetupError::new(
                Layer::Secrets,
                format!("bound secret {name} names no host"),
            ));
        }
        for host in hosts {
            if let Some(e) = band::policy::net::secret_host_problem(host) {
                return Err(SetupError::new(
                    Layer::Secrets,
                    format!("bound secret {name}: host {host:?}: {}", e.message),
                ));
            }
            let probe = host
                .strip_prefix("*.")
                .map_or(host.clone(), |d| format!("x.{d}"));
            if !net.check_host(&probe, None).is_allowed() {
                return Err(SetupError::new(
                    Layer::Secrets,
                    format!("bound secret {name} names {host}, which allow.net does not admit"),
                )
                .with_hint(format!(
                    "add `{host}` to allow.net, or drop it from the secret's hosts"
                )));
            }
        }
    }
    Ok(())
}

/// A command name from `allow.cli` becomes a file name under `/usr/bin` and `/band/bin`.
pub(crate) fn check_command_name(name: &str) -> SetupResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'+'));
    if !ok {
        return Err(
            SetupError::new(Layer::Cli, format!("{name:?} is not a command name"))
                .with_hint("allow.cli patterns start with a bare command name such as `jq`"),
        );
    }
    if FORBIDDEN_COMMANDS.contains(&name) {
        return Err(SetupError::new(
            Layer::Cli,
            format!("`{name}` can never be allowed in a sandbox"),
        ));
    }
    Ok(())
}

/// A request that passed the pure checks, decoded.
#[derive(Debug)]
pub struct Checked<'r> {
    pub(crate) req: &'r RunRequest,
    pub(crate) bundle: Vec<DecodedFile>,
    pub(crate) workspace: Vec<DecodedFile>,
    pub(crate) limits: EffectiveLimits,
    pub(crate) input_json: Vec<u8>,
    pub(crate) config_json: Option<Vec<u8>>,
    pub(crate) compiled: CompiledPolicy,
}

/// What [`check`] decided.
#[derive(Debug)]
pub enum Check<'r> {
    Run(Box<Checked<'r>>),
    /// Refused with a result of its own (not a setup failure): the input is too large.
    Refused(Box<RunResult>),
}

/// The pure checks, nothing created or looked at yet: protocol, run id, root, bundle paths and
/// hash, entry, workspace paths, secrets, limits, input size, policy compilation, workspace
/// coverage.
pub fn check<'r>(req: &'r RunRequest, cfg: &ServerConfig, is_root: bool) -> SetupResult<Check<'r>> {
    check_protocol(req)?;
    validate_run_id(&req.run_id)?;
    if !is_root {
        return Err(
            SetupError::new(Layer::Identity, "band-server must run as root")
                .with_hint("run it with sudo; it drops to a per-run uid before starting anything"),
        );
    }
    site_policy(req, cfg.site.as_ref())?;
    let bundle = decode_files("bundle", &req.bundle)?;
    check_integrity(&bundle, &req.bundle_sha256)?;
    check_entry(&bundle, &req.entry)?;
    let workspace = decode_files("workspace", &req.workspace)?;
    check_secrets(&req.secrets, &req.policy.secrets)?;
    check_bound_secrets(&req.policy)?;
    let limits = resolve_limits(&req.policy.limits, cfg)?;
    let input_json =
        serde_json::to_vec(&req.input).layer(Layer::Io, "failed to encode the input")?;
    if input_json.len() as u64 > limits.input_bytes {
        let mut r = RunResult::setup_failed(
            &req.run_id,
            Layer::Io,
            format!(
                "input is {} bytes, over maxInputBytes {}",
                input_json.len(),
                limits.input_bytes
            ),
            None,
        );
        r.status = Status::InputInvalid;
        return Ok(Check::Refused(Box::new(r)));
    }
    let config_json = match &req.config {
        Some(c) => Some(serde_json::to_vec(c).layer(Layer::Io, "failed to encode the config")?),
        None => None,
    };
    let compiled = compile(&req.policy)?;
    check_bundled(&req.policy, &bundle, &req.entry)?;
    check_workspace(&workspace, &compiled)?;
    Ok(Check::Run(Box::new(Checked {
        req,
        bundle,
        workspace,
        limits,
        input_json,
        config_json,
        compiled,
    })))
}

/// The site policy's layer of the check: `band ∩ site ∩ tier ∩ narrowing` for the request, or
/// the refusal, naming the band rule, the site rule (file and line) and the tier, before anything
/// is built. The tier is the signer's when the request carries a signed lock whose signer the site
/// lists (the site's `unsigned` tier otherwise); a signature that does not verify over the lock,
/// or a lock of another bundle, is a refusal ([`trust`]). The request's narrower layers (the
/// user's, the session's: [`narrowing`]) apply after the site's, and with no site file, alone. An
/// ad-hoc command is a request for the skill and script `exec` (`band exec`).
pub(crate) fn site_policy(
    req: &RunRequest,
    site: Option<&band::policy::site::SitePolicy>,
) -> SetupResult<Policy> {
    use band::policy::site;
    let narrower = narrowing(req)?;
    let open;
    let site = match site {
        Some(s) => s,
        None if narrower.is_empty() => return Ok(req.policy.clone()),
        None => {
            open = site::SitePolicy::open(site::DEFAULT_PATH);
            &open
        }
    };
    let trust = trust(req, site)?;
    let kind = site::RunKind {
        exec: req.skill == "exec" && req.script == "exec",
    };
    site::apply_narrowed(&req.policy, kind, site, &trust.tier, &narrower)
        .map(|i| i.policy)
        .map_err(|r| {
            SetupError::new(Layer::new("site"), format!("refused: {}", r.message)).with_hint(r.hint)
        })
}

/// The request's narrower layers, parsed: at most [`band::policy::site::MAX_NARROWING`], each
/// labelled `user` or `session` once, in that order, and a valid narrowing file (no `keys`, no
/// `unsigned`). Anything else is a refusal: a layer band-server cannot read never runs as open.
pub(crate) fn narrowing(
    req: &RunRequest,
) -> SetupResult<Vec<(String, band::policy::site::SitePolicy)>> {
    use band::policy::site;
    let refuse = |m: String| {
        SetupError::new(Layer::new("site"), format!("refused: {m}")).with_hint(
            "a narrowing is a site policy file that only takes away (docs/site-policy.md)",
        )
    };
    if req.narrowing.len() > site::MAX_NARROWING {
        return Err(refuse(format!(
            "the request carries {} narrower layers (at most {})",
            req.narrowing.len(),
            site::MAX_NARROWING
        )));
    }
    let mut last = None;
    let mut out = Vec::new();
    for n in &req.narrowing {
        let rank = band::proto::Narrowing::LABELS
            .iter()
            .position(|l| *l == n.label)
            .ok_or_else(|| {
                refuse(format!(
                    "unknown narrower layer {:?}",
                    n.label.chars().take(32).collect::<String>()
                ))
            })?;
        if last.is_some_and(|l| l >= rank) {
            return Err(refuse(format!(
                "narrower layer {:?} out of order or repeated",
                n.label
            )));
        }
        last = Some(rank);
        let source: String = n.source.chars().take(256).collect();
        let parsed = site::parse_narrowing(std::path::Path::new(&source), &n.text)
            .map_err(|e| refuse(format!("the {} narrowing cannot be used: {e}", n.label)))?;
        out.push((n.label.clone(), parsed));
    }
    Ok(out)
}

/// The run's trust under `site`: its tier and signer. The lock's bundle hash is held against
/// the request's `bundle_sha256`, which [`check_integrity`] holds against the bundle's bytes
/// before anything is built: a lock signed for one bundle never vouches for another.
pub(crate) fn trust(
    req: &RunRequest,
    site: &band::policy::site::SitePolicy,
) -> SetupResult<band::sign::Trust> {
    band::sign::trust(site, req.signed.as_ref(), &req.bundle_sha256).map_err(|e| {
        SetupError::new(Layer::new("site"), format!("refused: {e}")).with_hint(
            "sign the skill again (`band lock`, then `band sign --key KEY`), or remove band.lock.sig to run it as unsigned",
        )
    })
}

/// The trust a run's result records: `None` without a site policy.
pub fn result_trust(req: &RunRequest, cfg: &ServerConfig) -> Option<band::sign::Trust> {
    trust(req, cfg.site.as_ref()?).ok()
}

/// Narrow the request's policy to the site's (deny rules, insists and limits added), or refuse
/// it: what band-server runs is never the band alone.
pub fn narrow_to_site(req: &mut RunRequest, cfg: &ServerConfig) -> SetupResult<()> {
    let narrowed = site_policy(req, cfg.site.as_ref())?;
    if narrowed != req.policy && !req.workspace.is_empty() {
        // The client chose the workspace files by the band alone (it does not know this
        // machine's site policy): those a site's or a narrowing's deny.read covers are withheld,
        // as the client withholds those the band denies; the band's own denials still refuse a
        // request that carries them (`check_workspace`).
        let with_site = compile(&narrowed)?;
        let band = compile(&req.policy)?;
        req.workspace.retain(|f| {
            let denied =
                |c: &CompiledPolicy| matches!(c.read.check(&f.path), Decision::Deny { .. });
            !denied(&with_site) || denied(&band)
        });
    }
    req.policy = narrowed;
    Ok(())
}

pub(crate) fn compile(policy: &band::policy::Policy) -> SetupResult<CompiledPolicy> {
    CompiledPolicy::compile(policy).map_err(|e| {
        let layer = match e.category {
            Category::Cli => Layer::Cli,
            Category::Net => Layer::Network,
            Category::Read | Category::Write => Layer::Filesystem,
        };
        let err = SetupError::new(layer, e.to_string());
        match e.error.hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    })
}

/// The workspace the client sent must be what the policy lets the run see: each file matches
/// `allow.read` or `allow.write`, and none is denied for reading.
pub(crate) fn check_workspace(files: &[DecodedFile], compiled: &CompiledPolicy) -> SetupResult<()> {
    for f in files {
        let read = compiled.read.check(&f.path);
        if let Decision::Deny { rule } = &read {
            return Err(SetupError::new(
                Layer::Filesystem,
                format!("workspace file {} is denied by deny.read `{rule}`", f.path),
            ));
        }
        if !read.is_allowed() && !compiled.write.check(&f.path).is_allowed() {
            return Err(SetupError::new(
                Layer::Filesystem,
                format!(
                    "workspace file {} is not covered by allow.read or allow.write",
                    f.path
                ),
            ));
        }
    }
    Ok(())
}

/// The pure checks of a request's bundled programs (`./` commands, see
/// [`crate::layers::cli::bundled`]), shared in meaning with `band lint`: every
/// `./` pattern names a file of the bundle ([`missing_bundled`], lint's S010), and the entry is
/// not a native executable (lint's S012: `/skill` is `noexec`, and an entry is started by its
/// interpreter reading it).
pub(crate) fn check_bundled(
    policy: &Policy,
    bundle: &[DecodedFile],
    entry: &str,
) -> SetupResult<()> {
    let is_file = |p: &str| bundle.iter().any(|f| f.path == p);
    if let Some(r) = missing_bundled(policy, &is_file).first() {
        return Err(SetupError::new(
            Layer::Cli,
            format!(
                "{}.cli rule `{}` names `./{}`, which is not a file of the skill",
                r.column, r.pattern, r.path
            ),
        )
        .with_hint("ship the file in the skill, or remove the rule (band lint: S010)"));
    }
    if let Some(f) = bundle.iter().find(|f| f.path == entry)
        && band::policy::cli::is_native_executable(&f.data)
    {
        return Err(SetupError::new(
            Layer::Process,
            format!("entry {entry:?} is a native executable, which cannot start from /skill (noexec)"),
        )
        .with_hint(
            "make the entry a script (`#!/bin/sh`) that runs the program as `./bin/<name>`, and allow it: allow.cli: [\"./bin/<name> *\"] (band lint: S012)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn f(path: &str, mode: u32, data: &[u8]) -> DecodedFile {
        DecodedFile {
            path: path.into(),
            mode,
            data: data.to_vec(),
        }
    }

    #[test]
    fn bundle_hash_is_order_independent_and_covers_every_field() {
        let a = vec![f("run.sh", 0o755, b"#!/bin/sh\n"), f("lib/x", 0o644, b"x")];
        let b = vec![f("lib/x", 0o644, b"x"), f("run.sh", 0o755, b"#!/bin/sh\n")];
        assert_eq!(bundle_sha256(&a), bundle_sha256(&b));
        let mode = vec![f("run.sh", 0o644, b"#!/bin/sh\n"), f("lib/x", 0o644, b"x")];
        let data = vec![f("run.sh", 0o755, b"#!/bin/sh \n"), f("lib/x", 0o644, b"x")];
        let path = vec![f("run.sh", 0o755, b"#!/bin/sh\n"), f("lib/y", 0o644, b"x")];
        for other in [mode, data, path] {
            assert_ne!(bundle_sha256(&a), bundle_sha256(&other));
        }
    }

    #[test]
    fn bundle_hash_known_value() {
        use sha2::{Digest, Sha256};
        // sha256("a\0" "644\0" "1\0" "x")
        let got = bundle_sha256(&[f("a", 0o100644, b"x")]);
        let mut h = Sha256::new();
        h.update(b"a\x00644\x001\x00x");
        let want: String = hex::encode(h.finalize());
        assert_eq!(got, want);
        // The empty bundle hashes to sha256("").
        assert_eq!(
            bundle_sha256(&[]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn rel_paths() {
        for ok in [
            "a",
            "a/b",
            "scripts/run.sh",
            ".env",
            "a/..b",
            "a/b..",
            "ü/ñ",
        ] {
            assert_eq!(validate_rel_path(ok), Ok(()), "{ok}");
        }
        let long = "a/".repeat(2048) + "b";
        for bad in [
            "",
            "/a",
            "a//b",
            "a/",
            "./a",
            "a/./b",
            "..",
            "a/../b",
            "a/..",
            "a\0b",
            long.as_str(),
        ] {
            assert!(validate_rel_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn decode_rejects_duplicates_and_file_dir_clashes() {
        let e = |p: &str| FileEntry {
            path: p.into(),
            mode: 0o644,
            data: "eA==".into(),
        };
        let io = |m: &str| Err(SetupError::new(Layer::Io, m));
        assert_eq!(
            decode_files("bundle", &[e("a"), e("a")]),
            io(r#"bundle: duplicate path "a""#)
        );
        assert_eq!(
            decode_files("bundle", &[e("a"), e("a/b")]),
            io(r#"bundle: "a" is both a file and a directory"#)
        );
        let not_base64 = base64::engine::general_purpose::STANDARD
            .decode("!!")
            .expect_err("`!!` is not base64");
        assert_eq!(
            decode_files(
                "bundle",
                &[FileEntry {
                    path: "a".into(),
                    mode: 0,
                    data: "!!".into()
                }]
            ),
            io(&format!(r#"bundle: "a" is not valid base64: {not_base64}"#))
        );
        let got = decode_files(
            "bundle",
            &[FileEntry {
                path: "a".into(),
                mode: 0o100755,
                data: "eA==".into(),
            }],
        );
        assert_eq!(got, Ok(vec![f("a", 0o755, b"x")]));
    }

    #[test]
    fn run_ids() {
        assert!(validate_run_id("0123456789abcdef").is_ok());
        for bad in [
            "0123456789ABCDEF",
            "0123456789abcde",
            "../../../../etc/",
            "0123456789abcdeg",
            "",
        ] {
            assert!(validate_run_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bound_secrets_need_declared_names_and_allowed_hosts() {
        let policy = |hosts: &[&str]| {
            let mut p = Policy::default();
            p.allow.net = vec!["api.example.test".to_string()];
            p.secrets = vec!["TOKEN".to_string()];
            p.secret_hosts = BTreeMap::from([(
                "TOKEN".to_string(),
                hosts.iter().map(|h| h.to_string()).collect(),
            )]);
            p
        };
        let message = |p: &Policy| check_bound_secrets(p).err().map(|e| e.message);
        assert_eq!(
            message(&policy(&["other.test"])).as_deref(),
            Some("bound secret TOKEN names other.test, which allow.net does not admit")
        );
        assert_eq!(
            message(&policy(&["*"])).as_deref(),
            Some(
                "bound secret TOKEN: host \"*\": a secret is bound to host names (`api.example.com` or `*.example.com`), without a port or a path"
            )
        );
        let mut undeclared = policy(&["api.example.test"]);
        undeclared.secrets.clear();
        assert_eq!(
            message(&undeclared).as_deref(),
            Some("bound secret TOKEN is not declared in env.secrets")
        );
        assert!(check_bound_secrets(&policy(&["api.example.test"])).is_ok());
        let mut hosts_only = Policy::default();
        hosts_only.allow.net = vec!["api.example.test".to_string()];
        assert!(check_bound_secrets(&hosts_only).is_ok());
    }

    #[test]
    fn secrets_must_be_declared_and_not_reserved() {
        let m = |k: &str| BTreeMap::from([(k.to_string(), "v".to_string())]);
        let declared = vec![
            "TOKEN".to_string(),
            "PATH".to_string(),
            "LD_PRELOAD".to_string(),
            "1X".to_string(),
        ];
        assert!(check_secrets(&m("TOKEN"), &declared).is_ok());
        for bad in ["OTHER", "PATH", "LD_PRELOAD", "1X"] {
            let got = check_secrets(&m(bad), &declared);
            assert!(
                matches!(&got, Err(e) if e.layer == Layer::Secrets),
                "{bad}: {got:?}"
            );
        }
    }

    #[test]
    fn entry_must_exist_and_be_executable() {
        let b = vec![f("run.sh", 0o755, b""), f("data.txt", 0o644, b"")];
        assert!(check_entry(&b, "run.sh").is_ok());
        assert!(matches!(check_entry(&b, "data.txt"), Err(e) if e.layer == Layer::Process));
        assert!(matches!(check_entry(&b, "nope.sh"), Err(e) if e.layer == Layer::Io));
        assert!(matches!(check_entry(&b, "../run.sh"), Err(e) if e.layer == Layer::Io));
    }

    #[test]
    fn an_entry_needs_an_execute_bit_only_when_nothing_says_what_runs_it() {
        let b = vec![
            f("scripts/resources/go/run.sh", 0o644, b"echo hi\n"),
            f("scripts/go.sh", 0o644, b""),
            f("scripts/x.py", 0o644, b"#!/usr/bin/env python3\n"),
            f("scripts/go", 0o644, b"echo go\n"),
            f("scripts/tool", 0o755, b"\x7fELF"),
        ];
        // Upstream's run.sh (bash), an extension, a `#!` line, a program: each starts.
        for ok in [
            "scripts/resources/go/run.sh",
            "scripts/go.sh",
            "scripts/x.py",
            "scripts/tool",
        ] {
            assert!(check_entry(&b, ok).is_ok(), "{ok}");
        }
        // Nothing says what runs it: refused, naming the layer and what would fix it.
        match check_entry(&b, "scripts/go") {
            Err(e) => {
                assert_eq!(e.layer, Layer::Process);
                assert_eq!(
                    e.message,
                    "entry \"scripts/go\" is not executable (mode 644), and nothing says what runs it"
                );
                assert!(e.hint.is_some_and(|h| h.contains("#! line")));
            }
            Ok(()) => panic!("an entry nothing explains was accepted"),
        }
    }

    #[test]
    fn command_names() {
        for ok in ["jq", "python3", "g++", "x86_64-linux-gnu-gcc", "7z"] {
            assert!(check_command_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/usr/bin/jq",
            "../jq",
            ".hidden",
            "a b",
            "sudo",
            "su",
            "*",
        ] {
            assert!(check_command_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn workspace_must_be_covered_by_the_policy() {
        let mut p = band::policy::Policy::default();
        p.allow.read = vec!["data/**".into()];
        p.allow.write = vec!["out/**".into()];
        p.deny.read = vec!["data/secret.txt".into()];
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let f = |path: &str| DecodedFile {
            path: path.into(),
            mode: 0o644,
            data: vec![],
        };
        let fs = |m: &str| Err(SetupError::new(Layer::Filesystem, m));
        assert_eq!(
            check_workspace(&[f("data/a.csv"), f("out/b.txt")], &compiled),
            Ok(())
        );
        assert_eq!(
            check_workspace(&[f("data/secret.txt")], &compiled),
            fs("workspace file data/secret.txt is denied by deny.read `data/secret.txt`")
        );
        assert_eq!(
            check_workspace(&[f("other.txt")], &compiled),
            fs("workspace file other.txt is not covered by allow.read or allow.write")
        );
    }

    /// `./` rules name files of the bundle, and the entry is no native executable.
    #[test]
    fn bundled_programs_are_files_of_the_skill_and_the_entry_is_no_executable() {
        let mut p = Policy::default();
        p.allow.cli = vec!["./bin/tool *".into(), "./bin/s.sh x".into(), "jq *".into()];
        p.deny.cli = vec!["./bin/s.sh *".into()];
        let bundle = [
            f("bin/tool", 0o755, b"\x7fELF...."),
            f("bin/s.sh", 0o755, b"#!/bin/sh\necho\n"),
        ];
        assert!(check_bundled(&p, &bundle, "run.sh").is_ok());
        let only_tool = [f("bin/tool", 0o755, b"x")];
        let e = check_bundled(&p, &only_tool, "run.sh").err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.layer == Layer::Cli && e.message.contains("`./bin/s.sh`")),
            "{e:?}"
        );
        let e = check_bundled(&Policy::default(), &bundle, "bin/tool").err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.layer == Layer::Process && e.message.contains("native")),
            "{e:?}"
        );
    }
}
