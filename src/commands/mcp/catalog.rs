//! What `band mcp` offers, built from the skills path by pure functions of what is on disk: a
//! tool per script, a resource per skill (its SKILL.md), and the scripts left out, with why.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use band::policy::Policy;
use rmcp::model::{JsonObject, Resource, Tool, ToolAnnotations};
use serde_json::Value;

/// Separates skill and script in a tool name. Skill and script names are kebab-case, so it never
/// occurs inside either.
pub(crate) const TOOL_SEPARATOR: &str = "__";

/// The resource that lists the scripts left out, present only when there are some.
pub(crate) const NOT_OFFERED_URI: &str = "band://not-offered";

/// One tool and where its script lives.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub tool: Tool,
    /// The `skill://…/SKILL.md` of the skill, when the Skills extension serves it.
    pub skill_uri: Option<String>,
    pub skill_root: PathBuf,
    pub script: String,
}

/// A skill served by the Skills extension: its SKILL.md as a resource, its files, its entry.
#[derive(Debug, Clone)]
pub(crate) struct SkillDoc {
    /// The SKILL.md resource of `resources/list`.
    pub resource: Resource,
    pub served: super::skills::Served,
}

/// A script that is not a tool, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub skill: String,
    pub script: String,
    pub why: String,
    pub root: PathBuf,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}: {}; run `band lint {}`",
            self.skill,
            self.script,
            self.why,
            self.root.display()
        )
    }
}

/// Everything found on the skills path.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub tools: Vec<Entry>,
    pub skills: Vec<SkillDoc>,
    pub skipped: Vec<Skipped>,
    /// The skills with a SKILL.md the Skills extension does not serve, with why.
    pub not_served: Vec<String>,
}

impl Catalog {
    /// The resources: each skill's SKILL.md, then the list of scripts left out, if any.
    pub(crate) fn resources(&self) -> Vec<Resource> {
        let mut out: Vec<Resource> = self.skills.iter().map(|s| s.resource.clone()).collect();
        if !self.skipped.is_empty() {
            out.push(
                Resource::new(NOT_OFFERED_URI, "not-offered")
                    .with_title("Scripts band mcp does not offer")
                    .with_description(
                        "The scripts on the skills path that are not tools, each with why (their \
                         band or input schema does not load).",
                    )
                    .with_mime_type("text/plain"),
            );
        }
        out
    }

    /// The text of [`NOT_OFFERED_URI`]: one line per script left out.
    pub(crate) fn not_offered_text(&self) -> String {
        self.skipped.iter().map(|s| format!("{s}\n")).collect()
    }
}

/// `--script-tool-names`: each tool is named by its script alone. A name two skills' scripts
/// share is no tool: both are left out, each saying with which it collides.
pub(crate) fn name_by_script(c: &mut Catalog) {
    let mut count: HashMap<String, usize> = HashMap::new();
    for e in &c.tools {
        *count.entry(e.script.clone()).or_default() += 1;
    }
    let tools = std::mem::take(&mut c.tools);
    for mut e in tools {
        let skill = e.tool.title.clone().unwrap_or_default();
        let skill = skill.split('/').next().unwrap_or_default().to_string();
        if count.get(&e.script).copied().unwrap_or(0) > 1 {
            c.skipped.push(Skipped {
                skill,
                script: e.script.clone(),
                why: format!(
                    "another skill has a script `{}`, and --script-tool-names names tools by script alone",
                    e.script
                ),
                root: e.skill_root.clone(),
            });
            continue;
        }
        e.tool.name = e.script.clone().into();
        c.tools.push(e);
    }
}

pub(crate) fn tool_name(skill: &str, script: &str) -> String {
    format!("{skill}{TOOL_SEPARATOR}{script}")
}

/// The URI of a skill's SKILL.md resource.
pub(crate) fn skill_md_uri(skill: &str) -> String {
    super::skills::skill_md_uri(skill)
}

/// The catalog of the skills found in `dirs` (the first skill of a name wins, as in `band list`).
pub(crate) fn catalog(dirs: &[PathBuf]) -> Catalog {
    let mut skills = BTreeMap::new();
    for d in dirs {
        for root in band::skill::find_skills(d) {
            let (skill, _) = band::skill::load_skill(&root);
            skills.entry(skill.name.clone()).or_insert(skill);
        }
    }
    let mut out = Catalog::default();
    // The site's layers this client previews: each tool says the tier it would run in, and
    // whether they would refuse it (band-server decides; an agent host sees it before calling).
    let site = band::client::narrow::preview().ok().flatten();
    for skill in skills.values() {
        // A skill with a link out of it does not run (its bundle cannot hold the link), so none
        // of it is offered: not its SKILL.md, not its scripts (issue 36).
        if let Some(link) = band::skillfs::links_leaving(&skill.root).first() {
            out.skipped
                .extend(skill.scripts.iter().map(|script| Skipped {
                    skill: skill.name.clone(),
                    script: script.name.clone(),
                    why: format!(
                        "{} is a symlink that leads outside the skill",
                        link.strip_prefix(&skill.root).unwrap_or(link).display()
                    ),
                    root: skill.root.clone(),
                }));
            continue;
        }
        // Once per skill: its schemas, and each band file's policy (many scripts share one band;
        // resolving it compiles every pattern, the bulk of a catalog's cost).
        let (schemas, _) = band::contract::SchemaSet::load_dir(&skill.root);
        let mut policies = HashMap::new();
        let offered = out.tools.len();
        for script in &skill.scripts {
            match tool_for(skill, &script.name, &schemas, &mut policies) {
                Ok(mut tool) => {
                    if let Some(site) = &site {
                        let policy = skill
                            .band_file_for(&script.name)
                            .and_then(|f| policies.get(&f).cloned().flatten());
                        trust_meta(&mut tool, site, &skill.root, policy.as_ref());
                    }
                    out.tools.push(Entry {
                        tool,
                        skill_uri: None,
                        skill_root: skill.root.clone(),
                        script: script.name.clone(),
                    })
                }
                Err(why) => out.skipped.push(Skipped {
                    skill: skill.name.clone(),
                    script: script.name.clone(),
                    why: why.to_string(),
                    root: skill.root.clone(),
                }),
            }
        }
        // The instruction half (the Skills extension), tied to the tools just made.
        if skill.skill_md.is_some() {
            let first = offered;
            let tools: Vec<String> = out.tools[first..]
                .iter()
                .map(|e| e.tool.name.to_string())
                .collect();
            match super::skills::served(&skill.root, &skill.name, tools) {
                Ok(served) => {
                    let fm = &served.entry.frontmatter;
                    let resource = Resource::new(served.entry.uri.clone(), fm.name.clone())
                        .with_title(format!("The {} skill", skill.name))
                        .with_description(fm.description.clone())
                        .with_mime_type("text/markdown");
                    for e in &mut out.tools[first..] {
                        e.skill_uri = Some(served.entry.uri.clone());
                        let mut meta = e.tool.meta.take().unwrap_or_default();
                        meta.0.insert(
                            super::skills::META_SKILL.into(),
                            served.entry.uri.clone().into(),
                        );
                        e.tool.meta = Some(meta);
                    }
                    out.skills.push(SkillDoc { resource, served });
                }
                Err(why) => out.not_served.push(format!(
                    "{}: {why}; run `band lint {}`",
                    skill.name,
                    skill.root.display()
                )),
            }
        }
    }
    out
}

/// Why a script is not served as a tool.
#[derive(Debug, thiserror::Error)]
enum NotATool {
    #[error("its band has errors")]
    BandErrors,
    #[error("input schema: {0}")]
    InputSchema(String),
    #[error("its input schema does not describe an object")]
    NotAnObject,
    #[error(
        "its input schema and the files it refers to are {0} bytes; band mcp offers tools whose schemas are at most {MAX_TOOL_SCHEMA_BYTES} bytes"
    )]
    SchemaTooLarge(usize),
}

/// The most bytes of schema files (a tool's input or output schema and every file it reaches
/// through `$ref`) band mcp compiles and bundles for one tool: each tool embeds its own copy, and
/// every request lists them again, so one large shared definitions file referred to by many
/// scripts would otherwise cost gigabytes.
const MAX_TOOL_SCHEMA_BYTES: usize = 1 << 20;

/// The MCP description of one script.
/// `schemas` are the skill's; `policies` caches each band file's resolved policy (`None`: errors).
fn tool_for(
    skill: &band::skill::Skill,
    script: &str,
    schemas: &band::contract::SchemaSet,
    policies: &mut HashMap<PathBuf, Option<Policy>>,
) -> Result<Tool, NotATool> {
    let file = skill.band_file_for(script).ok_or(NotATool::BandErrors)?;
    let policy = policies
        .entry(file)
        .or_insert_with_key(|f| band::skill::resolve_band_file(f).0.map(|r| r.policy))
        .clone()
        .ok_or(NotATool::BandErrors)?;
    if let Some(bytes) = schemas
        .input_rel(script)
        .and_then(|rel| schemas.reached_bytes(&rel))
        .filter(|b| *b > MAX_TOOL_SCHEMA_BYTES)
    {
        return Err(NotATool::SchemaTooLarge(bytes));
    }
    // A script with no input schema takes no input: its tool takes an empty object.
    schemas
        .input_contract(script)
        .map_err(|e| NotATool::InputSchema(e.to_string()))?;
    let input = schemas
        .input_tool_schema(script)
        .and_then(object_schema)
        .ok_or(NotATool::NotAnObject)?;
    let title = format!("{}/{script}", skill.name);
    let mut tool = Tool::new(
        tool_name(&skill.name, script),
        description(&skill.name, script, &input),
        Arc::new(input),
    )
    .with_title(title.clone())
    .with_annotations(annotations(&policy, title));
    // An output schema too large to bundle is left out of the tool (its runs still check it).
    if let Some(output_rel) = schemas.output_rel(script)
        && schemas
            .reached_bytes(&output_rel)
            .is_some_and(|b| b <= MAX_TOOL_SCHEMA_BYTES)
        && schemas.compile(&output_rel).is_ok()
        && let Some(output) = schemas.bundle(&output_rel).and_then(object_schema)
    {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    Ok(tool)
}

/// The `_meta` key of the trust a tool would run with (issue 40).
pub(crate) const META_TRUST: &str = "band/trust";

/// Put in `tool`'s `_meta` the tier a run of the skill at `root` gets under this client's preview
/// of the site's layers, why (signed by whom, or unsigned), and the refusal those layers would
/// give `policy`, if any.
fn trust_meta(
    tool: &mut Tool,
    site: &band::client::narrow::Preview,
    root: &std::path::Path,
    policy: Option<&Policy>,
) {
    let (tier, why) = site.tier(Some(root));
    let refused = policy.and_then(|p| {
        site.apply(p, band::policy::site::RunKind::default(), &tier)
            .err()
            .map(|r| r.message)
    });
    let mut meta = tool.meta.take().unwrap_or_default();
    meta.0.insert(
        META_TRUST.into(),
        serde_json::json!({"tier": tier, "why": why, "refused": refused, "preview": true}),
    );
    tool.meta = Some(meta);
}

/// What the script does, in its own words: the input schema's `description`, else its `title`.
/// The skill's description is not repeated on every tool: it is in the skill's SKILL.md resource.
fn description(skill: &str, script: &str, input: &JsonObject) -> String {
    ["description", "title"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(String::from)
        .unwrap_or_else(|| {
            format!(
                "Runs `{script}` of the skill `{skill}` (its input schema has no description; \
                 the resource {} describes the skill).",
                skill_md_uri(skill)
            )
        })
}

/// The hints a client may show or act on, from the policy: what can the script change outside
/// its sandbox? Only the workspace (files under `allow.write`, copied back) and the network
/// (`allow.net`); an insisted item counts as allowed.
///
/// - `readOnlyHint`: nothing is written back and there is no network.
/// - `destructiveHint`: whenever the tool is not read-only. band cannot tell an overwrite from a
///   new file, nor a DELETE from a GET, so it never claims "additive only".
/// - `openWorldHint`: it has network.
/// - `idempotentHint` is left out: nothing in a band says so.
pub(crate) fn annotations(policy: &Policy, title: String) -> ToolAnnotations {
    let writes = !policy.allow.write.is_empty() || !policy.insist.write.is_empty();
    let net = !policy.allow.net.is_empty() || !policy.insist.net.is_empty();
    let read_only = !writes && !net;
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(!read_only)
        .open_world(net)
}

/// A bundled schema as an MCP object schema: `"type": "object"` is added when the root names no
/// type (MCP tool arguments and structured results are objects); a root of another type is not
/// one.
fn object_schema(schema: Value) -> Option<JsonObject> {
    let Value::Object(mut o) = schema else {
        return None;
    };
    match o.get("type") {
        None => {
            o.insert("type".into(), "object".into());
            Some(o)
        }
        Some(Value::String(t)) if t == "object" => Some(o),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repo_skills() -> Vec<PathBuf> {
        vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills")]
    }

    fn hints(t: &Tool) -> (Option<bool>, Option<bool>, Option<bool>) {
        let a = t.annotations.clone().unwrap_or_default();
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    }

    #[test]
    fn every_script_of_the_repository_skills_is_a_tool() {
        let c = catalog(&repo_skills());
        assert!(c.skipped.is_empty(), "{:?}", c.skipped);
        let names: Vec<String> = c.tools.iter().map(|e| e.tool.name.to_string()).collect();
        for name in [
            "text__count",
            "text__summary",
            "csv-stats__report",
            "github__issue-create",
            "json-transform__apply",
        ] {
            assert!(names.contains(&name.to_string()), "{name} in {names:?}");
        }
        let get = |n: &str| {
            c.tools
                .iter()
                .find(|e| e.tool.name == n)
                .map(|e| e.tool.clone())
                .unwrap()
        };
        let count = get("text__count");
        assert_eq!(
            count.description.as_deref(),
            Some("Count words, lines and characters of `text`.")
        );
        assert_eq!(count.title.as_deref(), Some("text/count"));
        assert_eq!(count.input_schema["required"], json!(["text"]));
        // (readOnly, destructive, openWorld)
        assert_eq!(hints(&count), (Some(true), Some(false), Some(false)));
        assert_eq!(
            hints(&get("github__issue-create")),
            (Some(false), Some(true), Some(true))
        );
        assert_eq!(
            hints(&get("csv-stats__report")),
            (Some(false), Some(true), Some(false))
        );
    }

    /// The skill's description opened every tool's (the same 265 characters on all 13 github
    /// tools); it is said once, in the skill's resource.
    #[test]
    fn tools_say_what_their_script_does_and_skills_are_resources() {
        let c = catalog(&repo_skills());
        let github = c
            .skills
            .iter()
            .find(|s| s.resource.uri == "skill://github/SKILL.md")
            .expect("the github skill's resource");
        let skill_description = github.resource.description.clone().unwrap_or_default();
        assert!(skill_description.starts_with("Work with GitHub"));
        assert!(github.served.root.ends_with("github"));
        let mut descriptions = std::collections::BTreeSet::new();
        for e in &c.tools {
            let d = e.tool.description.as_deref().unwrap_or("");
            assert!(!d.contains(&skill_description), "{}: {d}", e.tool.name);
            assert!(!d.is_empty() && d.len() < 200, "{}: {d}", e.tool.name);
            descriptions.insert(d.to_string());
        }
        assert_eq!(descriptions.len(), c.tools.len(), "{descriptions:#?}");
        let uris: Vec<String> = c.resources().iter().map(|r| r.uri.clone()).collect();
        assert_eq!(
            uris,
            [
                "csv-stats",
                "elevenlabs",
                "github",
                "http-fetch",
                "json-transform",
                "slack",
                "summarize",
                "text"
            ]
            .map(skill_md_uri)
        );
    }

    /// An insisted item counts as allowed: `insist.net` opens the world as `allow.net` does, and
    /// `insist.write` writes as `allow.write` does.
    /// A script whose input schema reaches more than [`MAX_TOOL_SCHEMA_BYTES`] of schema files
    /// (one large shared definitions file) is not offered, and says why; its sibling with a
    /// small schema is.
    #[test]
    fn a_tool_whose_schema_reaches_too_many_bytes_is_not_offered() {
        let t = tempfile::tempdir().expect("tempdir");
        let skill = t.path().join("amp");
        for d in ["scripts", "schemas/defs", "schemas/input"] {
            fs_err::create_dir_all(skill.join(d)).expect("mkdir");
        }
        fs_err::write(
            skill.join("SKILL.md"),
            "---\nname: amp\ndescription: d\n---\n",
        )
        .expect("write");
        fs_err::write(
            skill.join("BAND.md"),
            "---\nband: amp\ndescription: d\nversion: 1\n---\n",
        )
        .expect("write");
        let defs: serde_json::Map<String, serde_json::Value> = (0..40_000)
            .map(|i| (format!("d{i}"), json!({"type": "string", "maxLength": i})))
            .collect();
        let big = serde_json::to_string(&json!({ "$defs": defs })).expect("json");
        assert!(big.len() > MAX_TOOL_SCHEMA_BYTES);
        fs_err::write(skill.join("schemas/defs/big.json"), &big).expect("write");
        for (name, text) in [
            (
                "big",
                json!({"type": "object", "properties": {"t": {"$ref": "../defs/big.json#/$defs/d1"}}}),
            ),
            (
                "small",
                json!({"type": "object", "properties": {"t": {"type": "string"}}}),
            ),
        ] {
            let script = skill.join(format!("scripts/{name}.sh"));
            fs_err::write(&script, "#!/bin/sh\necho hi\n").expect("write");
            fs_err::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
            fs_err::write(
                skill.join(format!("schemas/input/{name}.json")),
                text.to_string(),
            )
            .expect("write");
        }
        let c = catalog(&[t.path().to_path_buf()]);
        let names: Vec<String> = c.tools.iter().map(|e| e.tool.name.to_string()).collect();
        assert_eq!(names, ["amp__small"]);
        assert_eq!(c.skipped.len(), 1, "{:?}", c.skipped);
        assert_eq!(c.skipped[0].script, "big");
        assert!(
            c.skipped[0].why.contains(&format!(
                "band mcp offers tools whose schemas are at most {MAX_TOOL_SCHEMA_BYTES} bytes"
            )),
            "{}",
            c.skipped[0].why
        );
    }

    #[test]
    fn annotations_follow_the_policy() {
        let title = || "s/x".to_string();
        let none = Policy::default();
        let a = annotations(&none, title());
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.open_world_hint),
            (Some(true), Some(false), Some(false))
        );
        let mut net = Policy::default();
        net.insist.net = vec!["api.x.test".into()];
        let a = annotations(&net, title());
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.open_world_hint),
            (Some(false), Some(true), Some(true))
        );
        let mut write = Policy::default();
        write.insist.write = vec!["out/**".into()];
        let a = annotations(&write, title());
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.open_world_hint),
            (Some(false), Some(true), Some(false))
        );
        // Reading the workspace and running commands changes nothing outside the sandbox.
        let mut read = Policy::default();
        read.allow.read = vec!["data/**".into()];
        read.allow.cli = vec!["jq *".into()];
        assert_eq!(annotations(&read, title()).read_only_hint, Some(true));
        assert_eq!(annotations(&read, title()).title.as_deref(), Some("s/x"));
    }

    /// Upstream Bands skills as they come (tests/corpus): co-located contracts are the tools'
    /// schemas, and a script with no input schema is a tool that takes an empty object.
    #[test]
    fn upstream_layouts_and_scripts_without_input_are_tools() {
        let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/upstream");
        let c = catalog(&[corpus]);
        assert!(c.skipped.is_empty(), "{:?}", c.skipped);
        let get = |n: &str| {
            c.tools
                .iter()
                .find(|e| e.tool.name == n)
                .map(|e| e.tool.clone())
                .unwrap_or_else(|| panic!("no tool {n}"))
        };
        let user_info = get("elevenlabs__user-info");
        assert_eq!(
            Value::Object((*user_info.input_schema).clone()),
            band::contract::no_input_schema()
        );
        let no_wrapper = get("config-skill__no-wrapper");
        assert_eq!(
            no_wrapper.input_schema["additionalProperties"],
            json!(false)
        );
        let issues = get("github__issue-list");
        assert_eq!(issues.input_schema["required"], json!(["repo"]));
        let echo = get("example-banded__echo-input");
        assert!(echo.output_schema.is_some());
    }

    #[test]
    fn a_script_left_out_is_reported() {
        let t = tempfile::tempdir().unwrap();
        band_test::copy_dir(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills/text"),
            &t.path().join("text"),
        );
        fs_err::write(
            t.path().join("text/schemas/input/count.json"),
            r#"{"type": "string"}"#,
        )
        .unwrap();
        let c = catalog(&[t.path().to_path_buf()]);
        let names: Vec<&str> = c.tools.iter().map(|e| e.tool.name.as_ref()).collect();
        assert_eq!(names, ["text__summary"]);
        assert_eq!(
            c.skipped
                .iter()
                .map(|s| (s.skill.as_str(), s.script.as_str(), s.why.as_str()))
                .collect::<Vec<_>>(),
            [(
                "text",
                "count",
                "its input schema does not describe an object"
            )]
        );
        let line = format!(
            "text/count: its input schema does not describe an object; run `band lint {}`\n",
            t.path().join("text").display()
        );
        assert_eq!(c.not_offered_text(), line);
        assert!(
            c.resources().iter().any(|r| r.uri == NOT_OFFERED_URI),
            "{:?}",
            c.resources()
        );
        // Nothing left out, no such resource.
        assert!(
            !catalog(&repo_skills())
                .resources()
                .iter()
                .any(|r| r.uri == NOT_OFFERED_URI)
        );
    }

    #[test]
    fn tool_schemas_are_self_contained() {
        let c = catalog(&repo_skills());
        for e in &c.tools {
            let input = Value::Object((*e.tool.input_schema).clone());
            assert_eq!(input["type"], "object", "{}", e.tool.name);
            let compiled = jsonschema::validator_for(&input);
            assert!(compiled.is_ok(), "{}: {:?}", e.tool.name, compiled.err());
            if let Some(out) = &e.tool.output_schema {
                let out = Value::Object((**out).clone());
                assert!(
                    jsonschema::validator_for(&out).is_ok(),
                    "{} output",
                    e.tool.name
                );
            }
        }
        // A $ref'd input schema (github) still checks what the contract checks.
        let list = c
            .tools
            .iter()
            .find(|e| e.tool.name == "github__issue-list")
            .unwrap();
        let v =
            jsonschema::validator_for(&Value::Object((*list.tool.input_schema).clone())).unwrap();
        assert!(v.is_valid(&json!({"repo": "octo/demo", "limit": 5})));
        assert!(!v.is_valid(&json!({"repo": "not a repo"})));
        assert!(!v.is_valid(&json!({"repo": "octo/demo", "limit": 500})));
    }
}
