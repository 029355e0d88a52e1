//! The one place that picks a [`Driver`] implementation: for a `--driver` kind, or for the
//! execution target a run names.

use super::{Driver, DriverKind, lima, qemu, remote};
use crate::manifest::Target;
use crate::vm::endpoint::Endpoint;
use crate::vm::paths::VmPaths;
use crate::vm::qemu::InstanceDir;
use crate::vm::{Result, VmError};

/// The driver of a kind, over the state in `paths`.
pub fn for_kind(kind: DriverKind, paths: &VmPaths) -> Box<dyn Driver> {
    match kind {
        DriverKind::Qemu => Box::new(qemu::Qemu::new(paths)),
        DriverKind::Lima => Box::new(lima::Lima::new(paths)),
        DriverKind::Ssh => Box::new(remote::Remote::new(paths, None)),
    }
}

/// The driver behind an execution target (`host` has none).
pub fn for_target(target: &Target, paths: &VmPaths) -> Result<Box<dyn Driver>> {
    Ok(match target {
        Target::Host => {
            return Err(VmError::Invalid(
                "the host target has no SSH endpoint".into(),
            ));
        }
        Target::Sandboxd { .. } => {
            return Err(VmError::Invalid(
                "a sandboxd:// target is a pod's endpoint, not a machine band sets up".into(),
            ));
        }
        Target::Qemu => Box::new(qemu::Qemu::new(paths)),
        Target::Lima => Box::new(lima::Lima::new(paths)),
        Target::Ssh { user, host, port } => Box::new(remote::Remote::new(
            paths,
            Some((user.clone(), host.clone(), *port)),
        )),
    })
}

/// The endpoint of a target, from the state `band setup` left.
pub fn endpoint_for(paths: &VmPaths, target: &Target) -> Result<Endpoint> {
    for_target(target, paths)?.endpoint()
}

/// The VM `band setup` made on this machine, if any: qemu first, then lima (the target a run goes
/// to when none was chosen and the host target cannot start; see `client::pipeline`).
pub fn set_up_vm(paths: &VmPaths) -> Option<Target> {
    if InstanceDir::new(paths).state().is_file() {
        return Some(Target::Qemu);
    }
    paths
        .instance_dir(crate::vm::lima::DRIVER)
        .join(crate::vm::lima::STATE)
        .is_file()
        .then_some(Target::Lima)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_up_vm_is_the_one_with_a_state_file() {
        let t = tempfile::tempdir().expect("tmp");
        let paths = VmPaths::new(t.path());
        assert_eq!(set_up_vm(&paths), None);
        let lima_state = paths
            .instance_dir(crate::vm::lima::DRIVER)
            .join(crate::vm::lima::STATE);
        fs_err::create_dir_all(lima_state.parent().expect("dir")).expect("mkdir");
        fs_err::write(&lima_state, "{}").expect("write");
        assert_eq!(set_up_vm(&paths), Some(Target::Lima));
        let qemu_state = InstanceDir::new(&paths).state();
        fs_err::create_dir_all(qemu_state.parent().expect("dir")).expect("mkdir");
        fs_err::write(&qemu_state, "{}").expect("write");
        assert_eq!(set_up_vm(&paths), Some(Target::Qemu));
    }
}
