//! `band explain`: the effective policy of a script (or of every script of a skill).

use std::io::Write;
use std::path::Path;

use anyhow::{Result, bail};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use super::skills::{find_skill, split_target};
use crate::cli::{ExplainArgs, user_error};
use band::client::config::UserConfig;
use band::client::pipeline::{TargetChoice, TargetReason, resolve_target};
use band::manifest::{Target, is_band_file};
use band::policy::{Category, Policy, site};
use band::proto::exit;

pub(crate) fn cmd_explain(args: ExplainArgs) -> Result<u8> {
    if let Some(file) = &args.band {
        return explain_band_file(file, args.json);
    }
    let target = args.target.as_deref().unwrap_or_default();
    let (skill_name, script) = split_target(target);
    let root = find_skill(skill_name, &args.skills)?;
    let (skill, _) = band::skill::load_skill(&root);
    let scripts: Vec<String> = match script {
        Some(s) if skill.script(s).is_some() => vec![s.to_string()],
        Some(s) => bail!(user_error(
            format!("skill `{}` has no script `{s}`", skill.name),
            "`band list` shows the scripts"
        )),
        None => skill.scripts.iter().map(|s| s.name.clone()).collect(),
    };
    let config = UserConfig::load()?;
    let mut out = crate::cli::render::Shown::stdout(args.json);
    let mut json = Vec::new();
    for name in scripts {
        let (resolved, diags) = band::skill::resolve_script(&skill, &name);
        let Some(r) = resolved else {
            for d in &diags {
                eprintln!("{d}");
            }
            bail!(user_error(
                format!("the band for `{}/{name}` has errors", skill.name),
                format!("run `band lint {}`", root.display())
            ));
        };
        let (run_target, target_line) = explained_target(r.target.as_ref(), &config);
        let starts = skill
            .script(&name)
            .map(|s| starts_line(&root, &s.entry))
            .unwrap_or_default();
        let site = site_preview(&r.policy, Some(&root));
        if args.json {
            let mut v = serde_json::json!({
                "skill": skill.name, "script": name, "band_file": r.file, "starts": starts,
                "target": r.target.as_ref().map(|t| t.to_string()),
                "run_target": run_target,
                "policy": r.policy, "sources": r.sources,
            });
            if let Some(s) = &site {
                v["site"] = s.json();
            }
            json.push(v);
            continue;
        }
        writeln!(
            out,
            "{}/{name}  (band file: {})",
            skill.name,
            r.file.display()
        )?;
        writeln!(out, "starts: {starts}")?;
        writeln!(out, "{}", policy_table(&r.policy))?;
        if let Some(line) = programs_line(&r.policy) {
            writeln!(out, "{line}")?;
        }
        writeln!(out, "{}", limits_line(&r.policy))?;
        if let Some(s) = &site {
            s.write(&mut out)?;
        }
        writeln!(out, "{target_line}\n")?;
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    }
    Ok(exit::OK)
}

/// How band-server starts the script at `entry` (`band::launch`), as `explain` says it:
/// `python3 /skill/scripts/x.py (by its extension)`.
fn starts_line(root: &Path, entry: &Path) -> String {
    use band::launch::Launch;
    let in_sandbox = Path::new("/skill").join(entry);
    match band::lint::entry_launch(root, entry) {
        Launch::AsIs => format!(
            "{} (as it is: its #! line, or a program)",
            in_sandbox.display()
        ),
        Launch::With(i) if i.by == band::launch::By::Module => format!(
            "{} -m {} ({})",
            i.name,
            band::launch::module_name(entry).unwrap_or_default(),
            i.by.as_str()
        ),
        Launch::With(i) => {
            let arg = i.arg.map(|a| format!(" {a}")).unwrap_or_default();
            format!(
                "{}{arg} {} ({})",
                i.name,
                in_sandbox.display(),
                i.by.as_str()
            )
        }
        Launch::Unknown => format!(
            "nothing: {} has no #! line, no extension band knows and no execute bit",
            entry.display()
        ),
    }
}

/// `band explain --band FILE`: the policy `band exec --band FILE` runs under (the file with its
/// `path:`, `extends` and `includes` followed).
fn explain_band_file(file: &Path, json: bool) -> Result<u8> {
    let hint = "pass --band with a BAND.md or *.band.md file; `band init` writes one";
    if !file.is_file() {
        bail!(user_error(
            format!("{} is not a file", file.display()),
            hint
        ));
    }
    if !is_band_file(file) {
        bail!(user_error(
            format!(
                "{} is not a band file (BAND.md or *.band.md)",
                file.display()
            ),
            hint
        ));
    }
    let (resolved, diags) = band::skill::resolve_band_file(file);
    let Some(r) = resolved else {
        for d in diags.iter().filter(|d| d.is_error()) {
            eprintln!("{d}");
        }
        bail!(user_error(
            format!("the band file {} has errors", file.display()),
            format!("run `band lint {}`", file.display())
        ));
    };
    let config = UserConfig::load()?;
    let (run_target, target_line) = explained_target(r.target.as_ref(), &config);
    let mut out = crate::cli::render::Shown::stdout(json);
    let site = site_preview(&r.policy, None);
    if json {
        let mut v = serde_json::json!({
            "band_file": r.file,
            "band": r.band.name,
            "target": r.target.as_ref().map(|t| t.to_string()),
            "run_target": run_target,
            "policy": r.policy, "sources": r.sources,
        });
        if let Some(s) = &site {
            v["site"] = s.json();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(exit::OK);
    }
    writeln!(out, "{}  (band file: {})", r.band.name, r.file.display())?;
    if r.sources.len() > 1 {
        let here = std::env::current_dir().unwrap_or_default();
        let list: Vec<String> = r
            .sources
            .iter()
            .map(|s| s.strip_prefix(&here).unwrap_or(s).display().to_string())
            .collect();
        writeln!(out, "composed from: {}", list.join(", "))?;
    }
    writeln!(out, "{}", policy_table(&r.policy))?;
    if let Some(line) = programs_line(&r.policy) {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "{}", limits_line(&r.policy))?;
    if let Some(s) = &site {
        s.write(&mut out)?;
    }
    writeln!(out, "{target_line}")?;
    Ok(exit::OK)
}

/// Where a run would go, for `run_target` in `--json` and the `target:` line: chosen and why;
/// the default (it depends on this machine: root, sudo, a VM, so decided at run time); or refused
/// (a band that names another machine no flag or config chose), and why.
fn explained_target(band: Option<&Target>, config: &UserConfig) -> (serde_json::Value, String) {
    let choice = resolve_target(None, band, config, &|| TargetChoice {
        target: Target::Host,
        reason: TargetReason::Default,
        note: None,
    });
    match choice {
        Ok(c) if c.reason == TargetReason::Default => (
            serde_json::json!({"target": null, "reason": c.reason}),
            "target: the default, chosen at run time (nothing names one; docs/vm.md)".into(),
        ),
        Ok(c) => (
            serde_json::json!({"target": c.target.to_string(), "reason": c.reason}),
            format!("target: {} ({})", c.target, c.reason),
        ),
        Err(e) => {
            let hint = e.hint().unwrap_or_default().to_string();
            (
                serde_json::json!({"target": null, "refused": e.to_string(), "hint": hint}),
                format!("target: none, a run is refused: {e} ({hint})"),
            )
        }
    }
}

/// What the site policy of this machine (`band::policy::site::local_path`) and the narrower
/// layers this client sends (the user's file, `$BAND_NARROW`) would make of a run: its layers and
/// `band ∩ site ∩ tier ∩ narrowing`. A preview: band-server applies the site policy of the
/// machine it runs on, whatever the client shows.
enum SitePreview {
    /// The file is there but band-server could not use it: every run is refused.
    Broken(site::SiteError),
    /// A narrowing file cannot be used: band refuses to send a run.
    BrokenNarrowing(String),
    Found {
        site: Box<site::SitePolicy>,
        /// There is no site file: only narrower layers.
        no_site: bool,
        narrowing: Vec<(String, site::SitePolicy)>,
        tier: String,
        why_tier: String,
        effective: Box<Result<Policy, Box<site::Refusal>>>,
    },
}

/// `None` when there is no site policy file and no narrowing (nothing is narrowed).
fn site_preview(band: &Policy, root: Option<&Path>) -> Option<SitePreview> {
    use band::client::narrow::{PreviewError, preview};
    let p = match preview() {
        Ok(p) => p?,
        Err(PreviewError::Site(e)) => return Some(SitePreview::Broken(e)),
        Err(PreviewError::Narrowing(e)) => {
            return Some(SitePreview::BrokenNarrowing(e.to_string()));
        }
    };
    let (tier, why_tier) = p.tier(root);
    let effective = Box::new(
        p.apply(band, site::RunKind::default(), &tier)
            .map(|i| i.policy),
    );
    Some(SitePreview::Found {
        site: Box::new(p.site),
        no_site: p.no_site,
        narrowing: p.narrowing,
        tier,
        why_tier,
        effective,
    })
}

const PREVIEW_NOTE: &str = "a preview: band-server applies the site policy of the machine it runs on, whatever this client shows";

impl SitePreview {
    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let (site, no_site, narrowing, tier, why_tier, effective) = match self {
            SitePreview::Broken(e) => {
                writeln!(out, "site policy: {e}")?;
                writeln!(
                    out,
                    "  band-server refuses every run while its site policy cannot be used ({PREVIEW_NOTE})"
                )?;
                if let Some(h) = &e.hint {
                    writeln!(out, "  hint: {h}")?;
                }
                return Ok(());
            }
            SitePreview::BrokenNarrowing(e) => {
                writeln!(out, "narrowing: {e}")?;
                writeln!(out, "  band sends no run while it cannot read a narrowing")?;
                return Ok(());
            }
            SitePreview::Found {
                site,
                no_site,
                narrowing,
                tier,
                why_tier,
                effective,
            } => (site, *no_site, narrowing, tier, why_tier, effective),
        };
        let name = site
            .name
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        if no_site {
            writeln!(
                out,
                "site policy: none at {}; narrower layers only: {PREVIEW_NOTE}",
                site.source.display()
            )?;
        } else {
            writeln!(
                out,
                "site policy: {}{name}: {PREVIEW_NOTE}",
                site.source.display()
            )?;
        }
        writeln!(out, "  band: the table above")?;
        let layer = |out: &mut dyn Write, label: &str, lines: Vec<String>| {
            if lines.is_empty() {
                return writeln!(out, "  {label}: nothing (adds no rule)");
            }
            writeln!(out, "  {label}:")?;
            for l in lines {
                writeln!(out, "    {l}")?;
            }
            Ok(())
        };
        layer(out, "site", site.rules.describe())?;
        let tier_label = format!("tier {tier} ({why_tier})");
        match site.tier_rules(tier) {
            Some(rules) => layer(out, &tier_label, rules.describe())?,
            None => writeln!(
                out,
                "  {tier_label}: not defined by the site (adds no rule)"
            )?,
        }
        for (label, n) in narrowing {
            layer(
                out,
                &format!("{label} ({})", n.source.display()),
                n.rules.describe(),
            )?;
            if let Some(rules) = n.tier_rules(tier) {
                layer(out, &format!("{label}, tier {tier}"), rules.describe())?;
            }
        }
        let of: String = narrowing.iter().map(|(l, _)| format!(" ∩ {l}")).collect();
        match effective.as_ref() {
            Ok(p) => {
                writeln!(out, "effective (band ∩ site ∩ tier {tier}{of}):")?;
                writeln!(out, "{}", policy_table(p))?;
                writeln!(out, "{}", limits_line(p))?;
            }
            Err(r) => {
                writeln!(
                    out,
                    "effective (band ∩ site ∩ tier {tier}{of}): refused: {}",
                    r.message
                )?;
                writeln!(out, "  hint: {}", r.hint)?;
            }
        }
        Ok(())
    }

    fn json(&self) -> serde_json::Value {
        match self {
            SitePreview::Broken(e) => serde_json::json!({
                "path": e.file, "error": e.to_string(), "hint": e.hint, "preview": true,
            }),
            SitePreview::BrokenNarrowing(e) => serde_json::json!({
                "narrowing_error": e, "preview": true,
            }),
            SitePreview::Found {
                site,
                no_site,
                narrowing,
                tier,
                why_tier,
                effective,
            } => {
                let (policy, refused) = match effective.as_ref() {
                    Ok(p) => (Some(p), None),
                    Err(r) => (None, Some(r)),
                };
                serde_json::json!({
                    "path": site.source, "name": site.name, "preview": true, "no_site": no_site,
                    "narrowing": narrowing.iter().map(|(l, n)| serde_json::json!({
                        "layer": l, "path": n.source, "rules": n.rules, "tier_rules": n.tier_rules(tier),
                    })).collect::<Vec<_>>(),
                    "tier": tier, "tier_reason": why_tier,
                    "site": site.rules, "tier_rules": site.tier_rules(tier),
                    "effective": policy, "refused": refused,
                })
            }
        }
    }
}

/// One row per category: what is allowed, denied and insisted on. Empty allow = denied entirely.
pub(crate) fn policy_table(p: &Policy) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    t.set_header(vec!["", "allow", "deny", "insist"]);
    for cat in Category::ALL {
        let allow = p.allow.get(cat);
        let cell = |v: &Vec<String>| v.join("\n");
        let allow_cell = if allow.is_empty() && p.insist.get(cat).is_empty() {
            match cat {
                Category::Net => "(no network)".to_string(),
                Category::Cli => "(shell essentials only)".to_string(),
                _ => "(nothing)".to_string(),
            }
        } else {
            cell(allow)
        };
        t.add_row(vec![
            cat.as_str().to_string(),
            allow_cell,
            cell(p.deny.get(cat)),
            cell(p.insist.get(cat)),
        ]);
    }
    t
}

/// The skill's own programs the policy lets run (`./` cli patterns): each is `/skill/<path>`,
/// and runs only through the CLI gate, judged by those patterns.
fn programs_line(p: &Policy) -> Option<String> {
    let compiled = band::policy::CompiledPolicy::compile(p).ok()?;
    let programs = compiled.cli.bundled();
    (!programs.is_empty()).then(|| {
        let list: Vec<String> = programs
            .iter()
            .map(|rel| format!("./{rel} (/skill/{rel})"))
            .collect();
        format!("skill programs: {}", list.join(", "))
    })
}

fn limits_line(p: &Policy) -> String {
    let parts = p.limits.shown();
    let limits = if parts.is_empty() {
        "platform defaults".to_string()
    } else {
        parts.join(", ")
    };
    let secrets = if p.secrets.is_empty() {
        "none".to_string()
    } else {
        p.secrets
            .iter()
            .map(|name| match p.secret_hosts.get(name) {
                Some(hosts) => format!(
                    "{name} (bound: the run sees a placeholder; the value goes only into request headers to {})",
                    hosts.join(", ")
                ),
                None => name.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = format!("limits: {limits}\nsecrets: {secrets}");
    if let Some(proxy) = proxy_line(p) {
        text.push('\n');
        text.push_str(&proxy);
    }
    text
}

/// Which connections go through band-server's egress proxy: every allowed host when the run
/// carries a bound secret (a placeholder is caught wherever it goes), else the hosts of the
/// HTTP rules (`"GET https://host/path/**"`), whose methods and paths it enforces.
fn proxy_line(p: &Policy) -> Option<String> {
    let http: Vec<&str> = p
        .allow
        .net
        .iter()
        .filter(|r| band::policy::net::NetPattern::parse(r).is_ok_and(|n| n.http().is_some()))
        .map(String::as_str)
        .collect();
    if !p.secret_hosts.is_empty() {
        Some("egress proxy: every allowed host (the run carries a bound secret); HTTP rules and placeholders are checked on each request".into())
    } else if !http.is_empty() {
        Some(format!(
            "egress proxy: the hosts of the HTTP rules ({}); any other request to them is refused",
            http.join(", ")
        ))
    } else {
        None
    }
}
