//! Where band keeps its VM state, under the band data folder (`~/.local/share/band/vm/`):
//!
//! ```text
//! vm/keys/id_ed25519{,.pub}        the client key band setup made (0600), used for every VM
//! vm/images/<recipe hash>/         root.qcow2, vmlinuz, initrd.img, host_key.pub, image.json
//! vm/qemu/                         the QEMU instance: disk.qcow2 (overlay), state.json,
//!                                  console.log, qemu.pid, known_host, mux.sock
//! vm/lima/                         band.yaml as given to limactl, known_host, mux.sock
//! vm/ssh/<user>@<host>_<port>/     target.json, known_host, mux.sock
//! ```
//!
//! Every folder is 0700: it holds a private key, pinned host keys and control sockets.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Result, VmError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmPaths {
    pub root: PathBuf,
}

impl VmPaths {
    /// `data_dir` is the band data folder; VM state lives in its `vm/` folder.
    pub fn new(data_dir: &Path) -> Self {
        VmPaths {
            root: data_dir.join("vm"),
        }
    }

    pub fn keys_dir(&self) -> PathBuf {
        self.root.join("keys")
    }

    pub fn client_key(&self) -> PathBuf {
        self.keys_dir().join("id_ed25519")
    }

    pub fn images_dir(&self) -> PathBuf {
        self.root.join("images")
    }

    pub fn image_dir(&self, recipe_hash: &str) -> PathBuf {
        self.images_dir().join(recipe_hash)
    }

    /// The state folder of a driver's instance (`qemu`, `lima`).
    pub fn instance_dir(&self, driver: &str) -> PathBuf {
        self.root.join(driver)
    }

    /// The state folder of an `ssh://` target.
    pub fn ssh_dir(&self, user: &str, host: &str, port: u16) -> PathBuf {
        self.root.join("ssh").join(format!("{user}@{host}_{port}"))
    }

    /// The accelerator probe's cached answer.
    pub fn accel_cache(&self) -> PathBuf {
        self.root.join("accel.json")
    }
}

/// Create `dir` (and its parents) and make it 0700.
pub fn private_dir(dir: &Path) -> Result<()> {
    fs_err::create_dir_all(dir).map_err(VmError::Fs)?;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(VmError::Fs)
}

/// Write a file atomically (temp file + rename) with `mode`.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let _ = fs_err::remove_file(&tmp);
    let mut f = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(VmError::Fs)?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(VmError::Fs)?;
    fs_err::rename(&tmp, path).map_err(VmError::Fs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_under_vm() {
        let p = VmPaths::new(Path::new("/d"));
        assert_eq!(p.client_key(), PathBuf::from("/d/vm/keys/id_ed25519"));
        assert_eq!(p.image_dir("abc"), PathBuf::from("/d/vm/images/abc"));
        assert_eq!(p.instance_dir("qemu"), PathBuf::from("/d/vm/qemu"));
        assert_eq!(
            p.ssh_dir("me", "box", 22),
            PathBuf::from("/d/vm/ssh/me@box_22")
        );
    }

    #[test]
    fn private_dirs_are_0700_and_writes_are_atomic() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b");
        private_dir(&d).unwrap();
        assert_eq!(
            fs_err::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let f = d.join("x.json");
        write_atomic(&f, b"1", 0o600).unwrap();
        write_atomic(&f, b"2", 0o600).unwrap();
        assert_eq!(fs_err::read(&f).unwrap(), b"2");
        assert_eq!(
            fs_err::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!d.join("x.tmp").exists());
    }
}
