//! Makes the source archive band carries (see `src/archive.rs`): `$OUT_DIR/source.tar.gz`, and
//! `$OUT_DIR/source.sha256`, the SHA-256 of the uncompressed tar. Outside a workspace (a
//! packaged crate) both are empty and band says it carries no server source.

#[path = "src/archive.rs"]
mod archive;

use std::path::{Path, PathBuf};

fn main() -> Result<(), String> {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let (gz, sha) = match archive::files(&root) {
        Ok(files) => {
            for p in archive::watched(&root)? {
                println!("cargo:rerun-if-changed={}", p.display());
            }
            let tar = archive::tar(&root, &files)?;
            (archive::gzip(&tar)?, archive::sha256_hex(&tar))
        }
        Err(why) => {
            println!("cargo:warning=band carries no band-server source: {why}");
            (Vec::new(), String::new())
        }
    };
    fs_err::write(out.join("source.tar.gz"), gz).map_err(|e| e.to_string())?;
    fs_err::write(out.join("source.sha256"), sha).map_err(|e| e.to_string())?;
    Ok(())
}
