//! The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): the instruction half of
//! each skill band serves, tied to the execution half band owns.
//!
//! - every file of the skill is the resource `skill://<name>/<path>`, its SKILL.md
//!   `skill://<name>/SKILL.md`; `skills/list` and `skills/get` give each skill's frontmatter and
//!   the `{uri, digest, size}` of every file, read the way a run reads the skill
//!   ([`band::lock::Tree`]: the same files, the same links kept inside the skill) plus its
//!   `band.lock`;
//! - the skill entry's `_meta` ties it to band: `band/bundle` is the skill's fingerprint (the
//!   `bundle` line of its `band.lock`, the digest every run of it records in the ledger),
//!   `band/lock` whether `band.lock` matches the files served (`matches`, `unlocked`,
//!   `differs`), `band/tools` the tools that run its scripts. Each tool's `_meta` names its skill
//!   (`band/skill`), and each tool result says which version of it ran (see `super::run_meta`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rmcp::model::{
    DIRECTORY_MIME_TYPE, MetaObject, Resource, Skill, SkillFrontmatter, SkillResource,
    SkillResources,
};
use serde_json::{Value, json};

/// The `_meta` key of band's fields, on skills, tools and tool results.
pub(crate) const META_SKILL: &str = "band/skill";

/// The URI of a skill's file `rel` (`/`-separated, relative to the skill root).
pub(crate) fn file_uri(name: &str, rel: &str) -> String {
    format!("skill://{name}/{}", encode_path(rel))
}

/// The URI of a skill's SKILL.md.
pub(crate) fn skill_md_uri(name: &str) -> String {
    file_uri(name, "SKILL.md")
}

/// A path as a URI path: every byte but the unreserved ones and `/` percent-encoded.
fn encode_path(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len());
    for b in rel.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A skill as the extension serves it.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    /// The `skills/list` entry.
    pub entry: Skill,
    /// The skill's folder.
    pub root: PathBuf,
    /// Each file's URI and its path below `root`.
    pub files: BTreeMap<String, String>,
}

/// Why a skill is not served by the extension.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotServed {
    #[error("cannot read the skill: {0}")]
    Tree(String),
    #[error("its SKILL.md has no frontmatter with a `name` and a `description`: {0}")]
    Frontmatter(String),
    #[error(
        "its SKILL.md's name `{0}` is not a skill name (1-64 lowercase letters, digits and single hyphens)"
    )]
    Name(String),
    #[error("its SKILL.md names it `{named}`, not `{skill}` as band does")]
    OtherName { named: String, skill: String },
}

/// The Agent Skills naming rule the extension requires of the URI's last segment.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
        && !n.contains("--")
}

/// SKILL.md's frontmatter as a JSON object, as written.
fn frontmatter(text: &str) -> Result<SkillFrontmatter, NotServed> {
    let (yaml, _, _) = band::manifest::split_frontmatter(text)
        .map_err(|e| NotServed::Frontmatter(e.to_string()))?;
    let value: Value =
        yaml_serde::from_str(yaml).map_err(|e| NotServed::Frontmatter(e.to_string()))?;
    // YAML aliases repeat what they name: served expanded, a small frontmatter can be large.
    let served = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
    if served > MAX_SERVED_FRONTMATTER_BYTES {
        return Err(NotServed::Frontmatter(format!(
            "its frontmatter is {served} bytes as served (YAML aliases expanded); band serves at most {MAX_SERVED_FRONTMATTER_BYTES}"
        )));
    }
    serde_json::from_value(value).map_err(|e| NotServed::Frontmatter(e.to_string()))
}

/// The most bytes of a SKILL.md's frontmatter band mcp serves in `skills/list` (as JSON, its
/// aliases expanded): a skill's name, description and metadata take a few kilobytes.
const MAX_SERVED_FRONTMATTER_BYTES: usize = 256 << 10;

/// The extension's view of the skill `skill` at `root`, whose scripts are the tools `tools`. Its
/// SKILL.md must name it as band does: the URI's last segment is that name, one skill per name.
pub(crate) fn served(root: &Path, skill: &str, tools: Vec<String>) -> Result<Served, NotServed> {
    let tree = band::lock::Tree::read(root).map_err(|e| NotServed::Tree(e.to_string()))?;
    let lock = match band::lock::check(root, &tree) {
        Ok(state) => state.as_str().to_string(),
        Err(_) => "differs".to_string(),
    };
    let skill_md = tree
        .files()
        .find(|n| n.path == "SKILL.md")
        .ok_or_else(|| NotServed::Frontmatter("no SKILL.md".into()))?;
    let fm = frontmatter(&String::from_utf8_lossy(&skill_md.data))?;
    if !valid_name(&fm.name) {
        return Err(NotServed::Name(fm.name));
    }
    if fm.name != skill {
        return Err(NotServed::OtherName {
            named: fm.name,
            skill: skill.to_string(),
        });
    }
    let name = fm.name.clone();
    let mut files = BTreeMap::new();
    let mut resources = Vec::new();
    let mut add = |rel: &str, bytes: &[u8]| {
        let uri = file_uri(&name, rel);
        resources.push(SkillResource::new(
            uri.clone(),
            format!("sha256:{}", band::lock::sha256_hex(bytes)),
            bytes.len() as u64,
        ));
        files.insert(uri, rel.to_string());
    };
    // What the links lead to counts against the bundle's bound with the files: a thousand links
    // to one large file are not read (and hashed) a thousand times over on every request.
    let files_bytes: u64 = tree.files().map(|n| n.data.len() as u64).sum();
    let mut budget = band::lock::MAX_BUNDLE_BYTES.saturating_sub(files_bytes);
    for node in &tree.nodes {
        match node.kind {
            band::lock::Kind::File => add(&node.path, &node.data),
            // A link inside the skill is the file it leads to (a link to a folder is no file),
            // while the bound allows.
            band::lock::Kind::Link => {
                if let Ok(bytes) = band::skillfs::read(root, Path::new(&node.path), budget) {
                    budget -= bytes.len() as u64;
                    add(&node.path, &bytes);
                }
            }
        }
    }
    if let Ok(bytes) = band::skillfs::read(
        root,
        Path::new(band::lock::LOCK_FILE),
        band::lock::MAX_BUNDLE_BYTES,
    ) {
        add(band::lock::LOCK_FILE, &bytes);
    }
    let bundle = format!("sha256:{}", tree.bundle_sha256());
    let mut meta = serde_json::Map::new();
    meta.insert(
        META_SKILL.into(),
        json!({ "bundle": bundle, "lock": lock, "tools": tools }),
    );
    let entry = Skill::new(skill_md_uri(&name), fm, SkillResources::Files(resources))
        .with_meta(MetaObject(meta));
    Ok(Served {
        entry,
        root: root.to_path_buf(),
        files,
    })
}

/// `resources/directory/read`: the direct children of a folder of a served skill (a skill's
/// root is `skill://<name>`), folders as `inode/directory`; `None` when `uri` is no folder.
pub(crate) fn directory(skills: &[&Served], uri: &str) -> Option<Vec<Resource>> {
    let dir = uri.trim_end_matches('/');
    let prefix = format!("{dir}/");
    let mut children: BTreeMap<String, Resource> = BTreeMap::new();
    for s in skills {
        for (file, rel) in &s.files {
            let Some(rest) = file.strip_prefix(&prefix) else {
                continue;
            };
            let child = match rest.split_once('/') {
                Some((sub, _)) => Resource::new(format!("{prefix}{sub}"), sub.to_string())
                    .with_mime_type(DIRECTORY_MIME_TYPE),
                None => {
                    Resource::new(file.clone(), rest.to_string()).with_mime_type(mime_type(rel))
                }
            };
            children.entry(child.uri.clone()).or_insert(child);
        }
    }
    (!children.is_empty()).then(|| children.into_values().collect())
}

/// A MIME type for a skill file, by its name.
pub(crate) fn mime_type(rel: &str) -> &'static str {
    let ext = rel.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "md" => "text/markdown",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "js" | "mjs" | "cjs" => "text/javascript",
        _ => "text/plain",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_skill_lists_every_file_with_its_digest_and_band_lock_fingerprint() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills/text");
        let s = served(&root, "text", vec!["text__count".into()]).expect("served");
        assert_eq!(s.entry.uri, "skill://text/SKILL.md");
        s.entry.validate().expect("a valid entry");
        let SkillResources::Files(files) = &s.entry.resources else {
            panic!("files")
        };
        let md = files
            .iter()
            .find(|f| f.uri == "skill://text/SKILL.md")
            .expect("SKILL.md listed");
        let bytes = fs_err::read(root.join("SKILL.md")).expect("read");
        assert_eq!(md.size, bytes.len() as u64);
        assert_eq!(
            md.digest,
            format!("sha256:{}", band::lock::sha256_hex(&bytes))
        );
        // Its fingerprint is the bundle a run of it records.
        let tree = band::lock::Tree::read(&root).expect("tree");
        let meta = s.entry.meta.expect("meta");
        assert_eq!(
            meta.0[META_SKILL]["bundle"],
            json!(format!("sha256:{}", tree.bundle_sha256()))
        );
        assert_eq!(meta.0[META_SKILL]["tools"], json!(["text__count"]));
    }

    /// Links inside the skill are served as the files they lead to only within the bundle's
    /// bound, the skill's own files counted first: many links to one large file are not each
    /// read and hashed on every request.
    /// A frontmatter whose aliases expand it past the bound is not served (the skill is not
    /// in `skills/list`, and says why).
    #[test]
    fn a_frontmatter_its_aliases_blow_up_is_not_served() {
        let big = "x".repeat(8 << 10);
        let aliases: String = (0..60).map(|i| format!("  k{i}: *a\n")).collect();
        let text = format!(
            "---\nname: s\ndescription: d\nanchor: &a \"{big}\"\nmetadata:\n{aliases}---\n"
        );
        let Err(NotServed::Frontmatter(why)) = frontmatter(&text) else {
            panic!("served");
        };
        assert!(why.contains("YAML aliases expanded"), "{why}");
        assert!(frontmatter("---\nname: s\ndescription: d\n---\n").is_ok());
    }

    #[test]
    fn links_are_served_within_the_bundles_bound() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("big");
        fs_err::create_dir_all(&root).expect("mkdir");
        fs_err::write(
            root.join("SKILL.md"),
            "---\nname: big\ndescription: d\n---\n",
        )
        .expect("write");
        let data = fs_err::File::create(root.join("data.bin")).expect("create");
        data.set_len(band::lock::MAX_BUNDLE_BYTES / 2 + 1)
            .expect("sparse");
        fs_err::write(root.join("small.txt"), "s").expect("write");
        for i in 0..3 {
            fs_err::os::unix::fs::symlink("data.bin", root.join(format!("l{i}.bin")))
                .expect("symlink");
        }
        fs_err::os::unix::fs::symlink("small.txt", root.join("s.txt")).expect("symlink");
        let s = served(&root, "big", vec![]).expect("served");
        let paths: Vec<&str> = s.files.values().map(String::as_str).collect();
        assert_eq!(paths, ["SKILL.md", "data.bin", "s.txt", "small.txt"]);
    }

    #[test]
    fn a_skill_folder_lists_its_direct_children() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills/text");
        let s = served(&root, "text", vec![]).expect("served");
        let top = directory(&[&s], "skill://text").expect("the skill's root is a folder");
        let uris: Vec<(&str, Option<&str>)> = top
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect();
        assert!(
            uris.contains(&("skill://text/SKILL.md", Some("text/markdown"))),
            "{uris:?}"
        );
        assert!(
            uris.contains(&("skill://text/schemas", Some(DIRECTORY_MIME_TYPE))),
            "{uris:?}"
        );
        assert!(
            !uris
                .iter()
                .any(|(u, _)| u.starts_with("skill://text/schemas/"))
        );
        assert!(directory(&[&s], "skill://text/SKILL.md").is_none());
        assert!(directory(&[&s], "skill://nope").is_none());
    }

    #[test]
    fn paths_are_percent_encoded_and_names_checked() {
        assert_eq!(file_uri("a", "x y/ü.md"), "skill://a/x%20y/%C3%BC.md");
        assert!(valid_name("csv-stats"));
        for bad in ["", "-a", "a-", "a--b", "A", "a_b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
